"""The planner's runs per arm against published values and exact enumeration (M3)."""

from __future__ import annotations

from fractions import Fraction
from itertools import product
from math import comb

import pytest

from runner.analysis.power import (
    fisher_power,
    fisher_rejections,
    fisher_runs_per_arm,
    fleiss_runs_per_arm,
    normal_power,
    normal_runs_per_arm,
    plan,
)
from runner.analysis.stats import fisher_exact


def test_m3_normal_approximation_matches_r_power_prop_test_examples():
    # R's ?power.prop.test: power.prop.test(p1 = .50, p2 = .75, power = .90) gives n = 76.7,
    # power.prop.test(n = 50, p1 = .50, p2 = .75) gives power = 0.740.
    assert normal_runs_per_arm(0.5, 0.75, power=0.9) == pytest.approx(76.7, abs=0.05)
    assert normal_power(50, 0.5, 0.75) == pytest.approx(0.7401659, abs=1e-6)


def test_m3_fleiss_continuity_corrected_runs_per_arm():
    # Fleiss, Statistical Methods for Rates and Proportions (ch. 3): 5 % vs 10 %, two-sided
    # alpha 0.05, power 0.80: 434.4 -> 435 per group uncorrected, 473.6 -> 474 corrected.
    assert fleiss_runs_per_arm(0.05, 0.10, continuity=False) == 435
    assert fleiss_runs_per_arm(0.05, 0.10) == 474
    assert fleiss_runs_per_arm(0.10, 0.05) == 474  # which arm is the baseline does not matter


def _fisher_power_by_brute_force(n: int, p1: Fraction, p2: Fraction, alpha: float) -> Fraction:
    total = Fraction(0)
    for x1, x2 in product(range(n + 1), repeat=2):
        if fisher_exact(x1, n - x1, x2, n - x2) <= alpha:
            total += (comb(n, x1) * p1**x1 * (1 - p1) ** (n - x1)
                      * comb(n, x2) * p2**x2 * (1 - p2) ** (n - x2))
    return total


@pytest.mark.parametrize("n", [1, 3, 5, 8, 12])
@pytest.mark.parametrize(
    ("p1", "p2"), [(Fraction(1, 2), Fraction(1, 10)), (Fraction(9, 10), Fraction(1, 5)),
                   (Fraction(1), Fraction(0)), (Fraction(3, 10), Fraction(3, 10))],
)
def test_m3_exact_fisher_power_equals_enumerating_every_outcome(n, p1, p2):
    expected = _fisher_power_by_brute_force(n, p1, p2, 0.05)
    assert fisher_power(n, float(p1), float(p2)) == pytest.approx(float(expected), abs=1e-12)


@pytest.mark.parametrize("n", [2, 5, 9, 15])
@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.2])
def test_m3_fisher_rejection_regions_agree_with_fisher_exact(n, alpha):
    regions = fisher_rejections(n, alpha)
    for s, rejected in enumerate(regions):
        brute = [x for x in range(max(0, s - n), min(n, s) + 1)
                 if fisher_exact(x, n - x, s - x, n - s + x) <= alpha]
        assert rejected == brute, s


def test_m3_under_equal_rates_fisher_power_is_its_size_at_most_alpha():
    for n in (5, 20, 60):
        assert fisher_power(n, 0.3, 0.3) <= 0.05


@pytest.mark.parametrize(("p1", "p2"), [(0.6, 0.2), (0.5, 0.1), (0.3, 0.5), (0.9, 0.5)])
def test_m3_exact_runs_per_arm_reach_the_power_and_one_fewer_does_not(p1, p2):
    n = fisher_runs_per_arm(p1, p2)
    assert n is not None
    assert fisher_power(n, p1, p2) >= 0.8 > fisher_power(n - 1, p1, p2)


def test_m3_plan_reports_both_numbers_and_the_exact_power():
    result = plan(0.6, 0.2)
    assert result.fleiss == fleiss_runs_per_arm(0.6, 0.2)
    assert result.exact == fisher_runs_per_arm(0.6, 0.2)
    assert result.exact_power == pytest.approx(fisher_power(result.exact, 0.6, 0.2))
    # Every run duplicates without the patch, none with it: 4 runs per arm suffice
    # (Fisher: 2 / C(8, 4) = 0.029), 3 do not (2 / C(6, 3) = 0.1).
    assert plan(1.0, 0.0).exact == 4


@pytest.mark.parametrize(
    ("args", "message"),
    [((0.3, 0.3), "equal"), ((1.2, 0.3), r"\[0, 1\]"), ((0.3, 0.1, 0.0), "alpha"),
     ((0.3, 0.1, 0.05, 1.0), "power")],
)
def test_m3_planner_refuses_impossible_questions(args, message):
    with pytest.raises(ValueError, match=message):
        plan(*args)


def test_m3_runs_needed_command_prints_both_numbers(tmp_path):
    from typer.testing import CliRunner

    from runner.cli import app

    result = CliRunner().invoke(app, ["runs-needed", "--baseline", "0.6", "--target", "0.2"])
    assert result.exit_code == 0, result.output
    exact, fleiss = fisher_runs_per_arm(0.6, 0.2), fleiss_runs_per_arm(0.6, 0.2)
    assert f"  {exact} runs per arm  Fisher's exact test" in result.output
    assert f"  {fleiss} runs per arm  Fleiss' normal approximation" in result.output


def test_m3_runs_needed_with_runs_prints_the_exact_power():
    from typer.testing import CliRunner

    from runner.cli import app

    result = CliRunner().invoke(
        app, ["runs-needed", "--baseline", "1", "--target", "0", "--runs", "3"]
    )
    assert result.exit_code == 0, result.output
    # 3 of 3 against 0 of 3 is the only rejectable table, and Fisher gives it p = 0.1.
    assert "3 runs per arm give Fisher's exact test, which the report uses, power 0% (exact)" \
        in result.output


def test_m3_runs_needed_for_equal_rates_is_one_clear_error_line():
    from typer.testing import CliRunner

    from runner.cli import app

    result = CliRunner().invoke(app, ["runs-needed", "--baseline", "0.3", "--target", "0.3"])
    assert result.exit_code == 1
    assert result.output.strip().count("\n") == 0
    assert "error: the two rates are equal" in result.output

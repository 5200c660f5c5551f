"""pass^k per cell, paired McNemar where the pairing is real, Holm across the table (M3)."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import count

import polars as pl
import pytest

from runner.analysis import analyse
from runner.analysis.cells import pass_k_expr
from runner.analysis.stats import fisher_exact, holm, mcnemar_exact, pass_hat_k
from runner.experiment.records import RunRecord
from runner.store import Store

T0 = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
_ids = count()


def run(arm: str, rep: int, dup: bool, *, scenario: str = "chaos(rate=0.3)", model: str = "m",
        seed: int | None = -1, verdict: str | None = None, real: bool | None = None,
        status: str = "ok") -> RunRecord:
    """One run; seed -1 means "the repetition's shared seed" (1000 + rep)."""
    ok = status == "ok"
    return RunRecord(
        run_id=f"r{next(_ids):05d}", experiment="exp", cell_id=f"{model}/{scenario}/{arm}",
        repetition=rep, seed=(1000 + rep) if seed == -1 else seed, model=model, prompt="p",
        patch_arm=arm, upstream="booking", scenario=scenario, conversation="single",
        status=status, verdict=(verdict or ("FAIL" if dup else "PASS")) if ok else None,
        duplicate_found=dup if ok else None, real_duplicate=(dup if real is None else real)
        if ok else None, started_at=T0, finished_at=T0, harness_version="0.1.0",
    )


def analysed(tmp_path, runs: list[RunRecord], **kwargs):
    with Store.open(tmp_path / f"runs-{next(_ids)}.duckdb") as store:
        store.save_runs(runs)
        return analyse(store, **kwargs)


def outcomes(arm: str, dups: list[bool], **kwargs) -> list[RunRecord]:
    return [run(arm, rep, dup, **kwargs) for rep, dup in enumerate(dups, start=1)]


# -- pass^k ---------------------------------------------------------------------------------


def test_m3_pass_k_counts_only_runs_without_duplicate_or_violation(tmp_path):
    runs = [
        run("none", 1, False), run("none", 2, False), run("none", 3, False),  # safe
        run("none", 4, False, verdict="NOT_TESTED"),  # nothing executed twice: safe
        run("none", 5, True),  # a duplicate
        run("none", 6, False, real=True),  # the real rows show a duplicate the harness missed
        run("none", 7, False, verdict="FAIL"),  # a violation without a duplicate (F2)
        run("none", 8, False, status="error"),  # did not run: left out, like the rates
    ]
    cells = analysed(tmp_path, runs).cells
    row = cells.row(0, named=True)
    assert (row["safe_k"], row["n"], row["runs"]) == (4, 7, 8)
    assert row["pass_k"] == pytest.approx(pass_hat_k(4, 7, 4)) == pytest.approx(1 / 35)


def test_m3_pass_k_is_empty_for_a_cell_with_fewer_runs_than_k(tmp_path):
    cells = analysed(tmp_path, outcomes("none", [False, False, False]), pass_k=4).cells
    assert cells["pass_k"].to_list() == [None]


def test_m3_pass_k_expression_equals_the_scalar_estimator():
    rows = [(c, n) for n in range(0, 13) for c in range(0, n + 1)]
    frame = pl.DataFrame({"safe_k": [c for c, _ in rows], "n": [n for _, n in rows]})
    for k in range(1, 7):
        got = frame.select(pass_k_expr(k).alias("p"))["p"].to_list()
        want = [pass_hat_k(c, n, k) if n >= k else None for c, n in rows]
        assert got == [pytest.approx(w, abs=1e-12) if w is not None else None for w in want]


# -- which test ------------------------------------------------------------------------------

BEFORE = [True] * 14 + [False] * 6
AFTER = [False] * 20


def arm_result(tmp_path, runs):
    analysis = analysed(tmp_path, runs)
    (row,) = analysis.before_after
    return row.arms["auto"]


def test_m3_chaos_arms_sharing_seeds_are_compared_pair_by_pair_with_mcnemar(tmp_path):
    result = arm_result(tmp_path, outcomes("none", BEFORE) + outcomes("auto", AFTER))
    assert result.test == "mcnemar"
    assert (result.pairs, result.discordant) == (20, (14, 0))
    assert result.p_value == pytest.approx(mcnemar_exact(14, 0)) == pytest.approx(2 / 2**14)


def test_m3_fewer_than_twenty_pairs_are_compared_with_fisher_even_in_chaos(tmp_path):
    # Below 20 pairs Fisher is the stronger test (bench/sim_paired_tests.py).
    runs = outcomes("none", BEFORE[:19]) + outcomes("auto", AFTER[:19])
    result = arm_result(tmp_path, runs)
    assert (result.test, result.pairs) == ("fisher", 19)
    assert result.p_value == pytest.approx(fisher_exact(14, 5, 0, 19))


def test_m3_mcnemar_counts_discordant_pairs_not_totals(tmp_path):
    # Same totals (10 of 20 each), but the duplicates fall in different repetitions.
    before = [True] * 10 + [False] * 10
    after = [False] * 10 + [True] * 10
    result = arm_result(tmp_path, outcomes("none", before) + outcomes("auto", after))
    assert result.discordant == (10, 10) and result.p_value == 1.0
    after = [True] * 10 + [False] * 10
    result = arm_result(tmp_path, outcomes("none", before) + outcomes("auto", after))
    assert result.discordant == (0, 0) and result.p_value == 1.0


def test_m3_a_fixed_fault_makes_the_seed_pairing_nominal_so_fisher_compares(tmp_path):
    runs = outcomes("none", BEFORE, scenario="F1") + outcomes("auto", AFTER, scenario="F1")
    result = arm_result(tmp_path, runs)
    assert result.test == "fisher" and result.pairs == 20
    assert result.p_value == pytest.approx(fisher_exact(14, 6, 0, 20))


def test_m3_runs_without_a_stored_seed_are_not_paired(tmp_path):
    runs = outcomes("none", BEFORE, seed=None) + outcomes("auto", AFTER, seed=None)
    result = arm_result(tmp_path, runs)
    assert (result.test, result.pairs) == ("fisher", 0)


def test_m3_too_few_pairs_fall_back_to_fisher(tmp_path):
    # 60 runs per arm, but only repetitions 1-25 share a seed: 25 pairs, under half the runs.
    runs = outcomes("none", BEFORE * 3) + [
        run("auto", rep, False, seed=(1000 + rep) if rep <= 25 else 5000 + rep)
        for rep in range(1, 61)
    ]
    result = arm_result(tmp_path, runs)
    assert (result.test, result.pairs) == ("fisher", 25)


def test_m3_runs_that_failed_to_run_break_their_pair(tmp_path):
    after = outcomes("auto", AFTER + [False])
    after[0] = run("auto", 1, False, status="error")
    result = arm_result(tmp_path, outcomes("none", BEFORE + [True]) + after)
    assert (result.test, result.pairs, result.count.n) == ("mcnemar", 20, 20)
    assert result.discordant == (14, 0)  # repetition 1's pair is gone, 21's joined


# -- Holm ------------------------------------------------------------------------------------


def test_m3_holm_adjusts_every_comparison_of_the_table_together(tmp_path):
    runs = []
    for model, before in (("a", [True] * 6 + [False] * 4), ("b", [True] * 3 + [False] * 7),
                          ("c", [True] * 9 + [False])):
        runs += outcomes("none", before, model=model, scenario="F1")
        runs += outcomes("auto", [False] * 10, model=model, scenario="F1")
        runs += outcomes("strict.txt", [False] * 9 + [True], model=model, scenario="F1")
    analysis = analysed(tmp_path, runs)
    results = [row.arms[arm] for row in analysis.before_after for arm in ("auto", "strict.txt")]
    assert len(results) == 6
    adjusted = holm([r.p_value for r in results])
    assert [r.p_holm for r in results] == pytest.approx(adjusted)
    assert all(r.p_holm >= r.p_value for r in results)


def test_m3_comparisons_that_cannot_reject_stay_out_of_the_holm_family(tmp_path):
    runs = []
    # Three rows where nothing can differ (no duplicate at all, or only duplicates)...
    for model, dup in (("careful", False), ("also-careful", False), ("naive", True)):
        runs += outcomes("none", [dup] * 5, model=model, scenario="F1")
        runs += outcomes("auto", [dup] * 5, model=model, scenario="F1")
    # ... and one where the patch removed every duplicate.
    runs += outcomes("none", [True] * 5, model="obeys", scenario="F1")
    runs += outcomes("auto", [False] * 5, model="obeys", scenario="F1")
    analysis = analysed(tmp_path, runs)
    results = {row.model: row.arms["auto"] for row in analysis.before_after}
    # Fisher: 5 of 5 against 0 of 5 is 2 / C(10, 5); a family of one leaves it as it is.
    assert results["obeys"].p_value == pytest.approx(2 / 252)
    assert results["obeys"].p_holm == pytest.approx(2 / 252)
    for model in ("careful", "also-careful", "naive"):
        assert results[model].p_value == results[model].p_holm == 1.0

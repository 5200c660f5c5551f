"""Wilson intervals and Fisher's exact test against published values (R6)."""

from __future__ import annotations

from fractions import Fraction
from math import comb

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.analysis.stats import Z95, fisher_exact, wilson_exprs, wilson_interval

# Wilson score interval without continuity correction. The first three come from the brief's
# arithmetic; the rest are Newcombe (1998), Statistics in Medicine 17:857-872, Table I,
# method 3, quoted to four decimals.
WILSON_KNOWN = [
    (0, 10, 0.0, 0.2775),
    (10, 10, 0.7225, 1.0),
    (5, 10, 0.2366, 0.7634),
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0, 0.1611),
    (1, 29, 0.0061, 0.1718),
    (29, 29, 0.8830, 1.0),
]


@pytest.mark.parametrize(("k", "n", "low", "high"), WILSON_KNOWN)
def test_wilson_interval_matches_published_values(k, n, low, high):  # R6
    interval = wilson_interval(k, n)
    assert interval is not None
    assert interval.low == pytest.approx(low, abs=5e-5)
    assert interval.high == pytest.approx(high, abs=5e-5)


def test_wilson_z_is_the_two_sided_95_percent_quantile():
    assert Z95 == pytest.approx(1.959963984540054, abs=1e-15)


@pytest.mark.parametrize(("k", "n"), [(0, 7), (7, 7), (0, 1), (1, 1)])
def test_wilson_bounds_are_exactly_zero_and_one_at_the_edges(k, n):
    interval = wilson_interval(k, n)
    assert interval is not None
    if k == 0:
        assert interval.low == 0.0
    if k == n:
        assert interval.high == 1.0


def test_wilson_without_runs_has_no_interval():  # R6: n = 0 -> no interval
    assert wilson_interval(0, 0) is None


@pytest.mark.parametrize(("k", "n"), [(-1, 5), (6, 5), (0, -1)])
def test_wilson_rejects_impossible_counts(k, n):
    with pytest.raises(ValueError):
        wilson_interval(k, n)


def test_wilson_polars_expressions_agree_with_the_scalar_function():
    pairs = [(k, n) for n in range(0, 31) for k in range(0, n + 1)]
    frame = pl.DataFrame({"k": [p[0] for p in pairs], "n": [p[1] for p in pairs]})
    low, high = wilson_exprs("k", "n")
    out = frame.with_columns(low=low, high=high)
    for k, n, lo, hi in out.iter_rows():
        interval = wilson_interval(k, n)
        if interval is None:
            assert lo is None and hi is None
        else:
            assert lo == pytest.approx(interval.low, abs=1e-12)
            assert hi == pytest.approx(interval.high, abs=1e-12)


# Fisher's exact test. Values from R's fisher.test documentation examples:
# TeaTasting = matrix(c(3, 1, 1, 3), nrow = 2): two-sided p = 0.4857, "greater" p = 0.2429;
# Convictions = matrix(c(2, 10, 15, 3), nrow = 2) (column-major: [[2, 15], [10, 3]]):
# "less" p = 0.0004652, two-sided p = 0.0005367. 10/0 vs 0/10: 2 / choose(20, 10).
FISHER_KNOWN = [
    ((3, 1, 1, 3), "two-sided", 0.4857142857, 1e-9),
    ((3, 1, 1, 3), "greater", 0.2428571429, 1e-9),
    ((3, 1, 1, 3), "less", 0.9857142857, 1e-9),
    ((10, 0, 0, 10), "two-sided", 1.0825088e-05, 1e-12),
    ((10, 0, 0, 10), "greater", 5.412544e-06, 1e-12),
    ((2, 15, 10, 3), "less", 0.0004652, 5e-8),
    ((2, 15, 10, 3), "two-sided", 0.0005367, 5e-8),
]


@pytest.mark.parametrize(("table", "alternative", "p", "tol"), FISHER_KNOWN)
def test_fisher_exact_matches_r_fisher_test(table, alternative, p, tol):  # R6
    assert fisher_exact(*table, alternative=alternative) == pytest.approx(p, abs=tol)


def test_fisher_two_sided_of_ten_of_ten_against_none_is_two_over_choose_20_10():
    assert fisher_exact(10, 0, 0, 10) == pytest.approx(2 / comb(20, 10), rel=1e-9)


@pytest.mark.parametrize("table", [(0, 10, 0, 10), (10, 0, 10, 0), (0, 0, 0, 0), (5, 0, 5, 0)])
def test_fisher_with_a_fixed_margin_is_one(table):
    assert fisher_exact(*table) == 1.0


def test_fisher_rejects_negative_counts():
    with pytest.raises(ValueError):
        fisher_exact(-1, 2, 3, 4)


def test_fisher_rejects_an_unknown_alternative():
    with pytest.raises(ValueError):
        fisher_exact(1, 2, 3, 4, alternative="sideways")  # type: ignore[arg-type]


def _exact_fisher(a: int, b: int, c: int, d: int) -> tuple[Fraction, Fraction, Fraction]:
    """Reference: enumerate the hypergeometric distribution in exact rational arithmetic."""
    row1, col1, total = a + b, a + c, a + b + c + d

    def prob(x: int) -> Fraction:
        return Fraction(comb(row1, x) * comb(total - row1, col1 - x), comb(total, col1))

    support = range(max(0, col1 - (total - row1)), min(row1, col1) + 1)
    observed = prob(a)
    two = sum((prob(x) for x in support if prob(x) <= observed), Fraction(0))
    less = sum((prob(x) for x in support if x <= a), Fraction(0))
    greater = sum((prob(x) for x in support if x >= a), Fraction(0))
    return two, less, greater


counts = st.integers(min_value=0, max_value=15)


@settings(max_examples=300, deadline=None)
@given(counts, counts, counts, counts)
def test_fisher_agrees_with_exact_rational_enumeration(a, b, c, d):
    two, less, greater = _exact_fisher(a, b, c, d)
    assert fisher_exact(a, b, c, d) == pytest.approx(float(two), rel=1e-9, abs=1e-12)
    assert fisher_exact(a, b, c, d, "less") == pytest.approx(float(less), rel=1e-9, abs=1e-12)
    assert fisher_exact(a, b, c, d, "greater") == pytest.approx(
        float(greater), rel=1e-9, abs=1e-12
    )


@settings(max_examples=200, deadline=None)
@given(counts, counts, counts, counts)
def test_fisher_two_sided_does_not_depend_on_row_order(a, b, c, d):
    assert fisher_exact(a, b, c, d) == pytest.approx(fisher_exact(c, d, a, b), rel=1e-9)

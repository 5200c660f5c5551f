"""pass^k, McNemar's exact test and Holm's correction against exact values (M3)."""

from __future__ import annotations

from fractions import Fraction
from math import comb

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.analysis.stats import holm, mcnemar_exact, pass_hat_curve, pass_hat_k

# -- pass^k ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("c", "n", "expected"),
    [
        # 2 safe runs of 4: C(2,1)/C(4,1), C(2,2)/C(4,2), then no 3 safe runs can be drawn.
        (2, 4, [1 / 2, 1 / 6, 0.0, 0.0]),
        (3, 5, [3 / 5, 3 / 10, 1 / 10, 0.0, 0.0]),
        (5, 5, [1.0] * 5),
        (0, 3, [0.0] * 3),
        (9, 10, [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0]),
    ],
)
def test_m3_pass_hat_k_is_the_share_of_k_subsets_that_are_all_safe(c, n, expected):
    assert [pass_hat_k(c, n, k) for k in range(1, n + 1)] == pytest.approx(expected, abs=1e-15)
    assert pass_hat_curve(c, n) == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize("n", range(1, 9))
@pytest.mark.parametrize("p", [Fraction(1, 3), Fraction(3, 4), Fraction(1, 10)])
def test_m3_pass_hat_k_is_unbiased_for_p_to_the_k(n, p):
    # E[C(c,k)/C(n,k)] over c ~ Binomial(n, p) equals p^k exactly: the reason to use it.
    for k in range(1, n + 1):
        expectation = sum(
            comb(n, c) * p**c * (1 - p) ** (n - c) * Fraction(comb(c, k), comb(n, k))
            for c in range(n + 1)
        )
        assert expectation == p**k
    # The plug-in (c/n)^k is not (here for k = 2): it overstates reliability.
    if n >= 2:
        plug_in = sum(comb(n, c) * p**c * (1 - p) ** (n - c) * Fraction(c, n) ** 2
                      for c in range(n + 1))
        assert plug_in > p**2


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 60).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_m3_pass_hat_curve_agrees_with_the_binomial_ratio(cn):
    c, n = cn
    curve = pass_hat_curve(c, n)
    assert len(curve) == n
    for k, value in enumerate(curve, start=1):
        assert value == pytest.approx(comb(c, k) / comb(n, k), rel=1e-12, abs=1e-300)


@pytest.mark.parametrize(("c", "n", "k"), [(-1, 3, 1), (4, 3, 1), (2, 3, 0), (2, 3, 4)])
def test_m3_pass_hat_k_refuses_impossible_arguments(c, n, k):
    with pytest.raises(ValueError):
        pass_hat_k(c, n, k)


# -- McNemar --------------------------------------------------------------------------------

# Exact two-sided McNemar = binom.test(min(b, c), b + c) in R, i.e. exact2x2::mcnemar.exact:
# 10 vs 2 discordant pairs: 2 * (1 + 12 + 66) / 4096 = 0.0385742; 5 vs 0 cannot reach 0.05.
MCNEMAR_KNOWN = [
    (10, 2, Fraction(2 * 79, 4096)),
    (2, 10, Fraction(2 * 79, 4096)),
    (5, 0, Fraction(2, 32)),
    (6, 0, Fraction(2, 64)),
    (3, 3, Fraction(1)),
    (0, 0, Fraction(1)),
    (7, 1, Fraction(2 * 9, 256)),
]


@pytest.mark.parametrize(("b", "c", "p"), MCNEMAR_KNOWN)
def test_m3_mcnemar_exact_matches_the_binomial_test(b, c, p):
    assert mcnemar_exact(b, c) == pytest.approx(float(p), rel=1e-15)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 40), st.integers(0, 40))
def test_m3_mcnemar_is_the_two_sided_binomial_test_at_one_half(b, c):
    # R's binom.test: sum of the probabilities no larger than the observed one.
    m = b + c
    probs = [Fraction(comb(m, i), 2**m) for i in range(m + 1)]
    observed = probs[b]
    expected = min(Fraction(1), sum((q for q in probs if q <= observed), Fraction(0)))
    assert mcnemar_exact(b, c) == pytest.approx(float(expected), rel=1e-12)


def test_m3_mcnemar_refuses_negative_counts():
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


# -- Holm -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "adjusted"),
    [
        # p.adjust(c(0.01, 0.02, 0.03, 0.04, 0.05), "holm") in R.
        ([0.01, 0.02, 0.03, 0.04, 0.05], [0.05, 0.08, 0.09, 0.09, 0.09]),
        # Order kept: p.adjust(c(0.04, 0.005, 0.03, 0.01), "holm") = 0.06 0.02 0.06 0.03.
        ([0.04, 0.005, 0.03, 0.01], [0.06, 0.02, 0.06, 0.03]),
        ([0.5, 0.6], [1.0, 1.0]),
        ([0.02], [0.02]),
        ([], []),
    ],
)
def test_m3_holm_matches_r_p_adjust(raw, adjusted):
    assert holm(raw) == pytest.approx(adjusted, abs=1e-15)


def test_m3_holm_leaves_missing_p_values_out_of_the_family():
    assert holm([None, 0.01, None, 0.04]) == [None, pytest.approx(0.02), None, pytest.approx(0.04)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 1), max_size=30))
def test_m3_holm_never_lowers_a_p_value_and_keeps_their_order(raw):
    adjusted = holm(raw)
    for p, q in zip(raw, adjusted, strict=True):
        assert p <= q <= 1.0
    for i in range(len(raw)):
        for j in range(len(raw)):
            if raw[i] < raw[j]:
                assert adjusted[i] <= adjusted[j]

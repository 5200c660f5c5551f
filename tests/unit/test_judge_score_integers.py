"""J4-J6 (issue 24): the score in integers gives exactly the numbers of the Fractions form."""

from fractions import Fraction
from math import floor
from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from harness.judge.summary import (
    DS_WEIGHT,
    FAIL,
    FAIL_SCORE_CAP,
    FH_WEIGHT,
    NOT_TESTED,
    PASS,
    Verdict,
    score,
)


def _fractions_score(known: int, duplicates: int, fh_sum: int, fh_count: int, v: str) -> Any:
    """J4-J6 as they are stated: Fractions, rounded half up, percentages to one decimal."""
    ds = Fraction(100 * (known - duplicates), known) if known else None
    fh = Fraction(fh_sum, fh_count) if fh_count else None
    if v == NOT_TESTED or (ds is None and fh is None):
        return None, None, None, False
    if ds is None or fh is None:
        overall = floor((ds if fh is None else fh) + Fraction(1, 2))
    else:
        overall = floor(DS_WEIGHT * ds + FH_WEIGHT * fh + Fraction(1, 2))
    capped = v == FAIL and overall > FAIL_SCORE_CAP
    return (
        FAIL_SCORE_CAP if capped else overall,
        None if ds is None else round(float(ds), 1),
        None if fh is None else round(float(fh), 1),
        capped,
    )


def _judge(known: int, duplicates: int, fh_sum: int, fh_count: int) -> Any:
    totals = SimpleNamespace(known=known, duplicates=duplicates, fh_sum=fh_sum, fh_count=fh_count)
    return SimpleNamespace(totals=totals, faults_injected=fh_count)


def _check(known: int, duplicates: int, fh_sum: int, fh_count: int, v: str) -> None:
    got = score(_judge(known, duplicates, fh_sum, fh_count), Verdict(v, ""))
    expected = _fractions_score(known, duplicates, fh_sum, fh_count, v)
    assert (got["overall"], got["duplicateSafety"], got["failureHandling"], got["capped"]) == (
        expected
    ), (known, duplicates, fh_sum, fh_count, v)
    assert got["baseline"] is (expected[0] is not None and fh_count == 0)


def test_j5_integer_score_equals_the_fractions_one_on_every_small_session():
    # Failure Handling per operation is 0, 50 or 100 (J5), so its sum is a multiple of 50;
    # every other value is tried too, as a sum of any shares would be.
    for known in range(0, 13):
        for duplicates in range(0, known + 1):
            for fh_count in range(0, 7):
                for fh_sum in range(0, 100 * fh_count + 1, 5 if fh_count else 1):
                    for v in (PASS, FAIL):
                        _check(known, duplicates, fh_sum, fh_count, v)
    _check(3, 1, 0, 0, NOT_TESTED)


@given(
    st.integers(0, 60_000),
    st.integers(0, 60_000),
    st.integers(0, 60_000),
    st.sampled_from([PASS, FAIL, NOT_TESTED]),
)
def test_j4_integer_score_equals_the_fractions_one_at_session_sizes(known, dup, fh_count, v):
    duplicates = dup % (known + 1)
    fh_sum = (dup * 7 + known) % (100 * fh_count + 1)
    _check(known, duplicates, fh_sum, fh_count, v)


def test_j6_ties_round_half_up_in_integers():
    # 3/5 * 50 + 2/5 * 50 = 50 exactly; 100 * 1/8 = 12.5 -> 13 (half up), 12.5 as the percent
    assert score(_judge(8, 7, 0, 0), Verdict(PASS, ""))["overall"] == 13
    assert score(_judge(8, 7, 0, 0), Verdict(PASS, ""))["duplicateSafety"] == 12.5
    assert score(_judge(2, 1, 50, 1), Verdict(PASS, ""))["overall"] == 50

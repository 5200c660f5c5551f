"""`runs-needed` at the edges (issue 22): a significance level below what a double can carry
is one clear line, and small rates keep their digits ("0.01% vs 0.02%", not "0% vs 0%")."""

from __future__ import annotations

import pytest

from runner.html.formatting import pct


@pytest.mark.parametrize(
    ("rate", "shown"),
    [
        (0.0001, "0.01%"),
        (0.0002, "0.02%"),
        (0.00055, "0.055%"),
        (0.05, "5%"),
        (0.055, "5.5%"),
        (0.6, "60%"),
        (0.0, "0%"),
    ],  # fmt: skip
)
def test_the_report_shows_small_rates_with_their_digits(rate: float, shown: str) -> None:
    assert pct(rate) == shown

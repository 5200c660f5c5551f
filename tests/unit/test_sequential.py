"""The stopping rule of a cell (M3): a Wilson interval wholly on one side of a threshold."""

from __future__ import annotations

import pytest

from runner.analysis.sequential import decided, z_for
from runner.analysis.stats import Z95


@pytest.mark.parametrize(
    ("k", "n", "min_runs", "side"),
    [
        (0, 5, 5, "below"),  # Wilson [0%, 43.4%]
        (5, 5, 5, "above"),  # [56.6%, 100%]
        (0, 4, 5, None),  # too few runs, however clear
        (0, 4, 4, "below"),  # [0%, 49.0%]
        (0, 3, 3, None),  # [0%, 56.2%] still reaches 50%
        (2, 5, 5, None),
    ],
)
def test_m3_a_cell_is_decided_when_its_interval_clears_the_threshold(k, n, min_runs, side):
    assert decided(k, n, 0.5, min_runs) == side


def test_m3_a_higher_confidence_decides_later():
    # 1 of 10: Wilson 95% [1.8%, 40.4%] lies below 50%; at 99% [1.2%, 50.7%] it does not.
    assert decided(1, 10, 0.5, confidence=0.95) == "below"
    assert decided(1, 10, 0.5, confidence=0.99) is None


def test_m3_z_for_a_confidence_is_the_two_sided_normal_quantile():
    assert z_for(0.95) == pytest.approx(Z95, abs=1e-12)
    assert z_for(0.99) == pytest.approx(2.5758293035489, abs=1e-12)
    with pytest.raises(ValueError):
        z_for(1.0)

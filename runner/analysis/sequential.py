"""Sequential stopping per cell (M3, optional): stop running a cell once its duplicate rate
is clearly on one side of a threshold.

After each finished run, the cell's Wilson interval (at the rule's confidence) is computed
over the runs that ran; once at least `min_runs` ran and the interval lies wholly below or
wholly above the threshold, the cell is decided and its remaining repetitions are not run.
Looking after every run is many looks, so the chance of a wrong side is higher than a single
interval's; bench/sim_sequential_stop.py measures it and README states the figures.
"""

from __future__ import annotations

from statistics import NormalDist
from typing import Literal

from runner.analysis.stats import wilson_interval

Side = Literal["below", "above"]


def z_for(confidence: float) -> float:
    """The two-sided normal quantile of a confidence level (0.95 -> 1.96)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    return NormalDist().inv_cdf(1 - (1 - confidence) / 2)


def decided(
    k: int, n: int, threshold: float, min_runs: int = 5, confidence: float = 0.95
) -> Side | None:
    """Which side of `threshold` k duplicates in n runs put the cell on, if clearly one."""
    if n < min_runs:
        return None
    interval = wilson_interval(k, n, z_for(confidence))
    if interval is None:
        return None
    if interval.high < threshold:
        return "below"
    if interval.low > threshold:
        return "above"
    return None

"""Analysis of stored runs with polars (R6): rates, Wilson intervals, Fisher's exact test."""

from runner.analysis.analyse import analyse
from runner.analysis.model import (
    CELL_KEYS,
    CONDITION_KEYS,
    ROW_KEYS,
    UNPATCHED,
    Analysis,
    ArmResult,
    BeforeAfterRow,
    Count,
    ExperimentInfo,
    Overview,
    RunDetail,
)
from runner.analysis.stats import Interval, fisher_exact, wilson_interval

__all__ = [
    "CELL_KEYS",
    "CONDITION_KEYS",
    "ROW_KEYS",
    "UNPATCHED",
    "Analysis",
    "ArmResult",
    "BeforeAfterRow",
    "Count",
    "ExperimentInfo",
    "Interval",
    "Overview",
    "RunDetail",
    "analyse",
    "fisher_exact",
    "wilson_interval",
]

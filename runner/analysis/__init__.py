"""Analysis of stored runs with polars (R6): rates, Wilson intervals, Fisher's exact test.

The names below are loaded when first used (PEP 562), so that importing one light module of
the package (the planner `runner.analysis.power`, which `runs-needed` uses) loads neither
polars nor DuckDB.
"""

from __future__ import annotations

import sys
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_HOME = {
    "analyse": "runner.analysis.analyse",
    **dict.fromkeys(
        (
            "CELL_KEYS",
            "CONDITION_KEYS",
            "ROW_KEYS",
            "UNPATCHED",
            "Analysis",
            "ArmResult",
            "BeforeAfterRow",
            "Count",
            "ExperimentInfo",
            "Overview",
            "RunDetail",
        ),
        "runner.analysis.model",
    ),
    **dict.fromkeys(("Interval", "fisher_exact", "wilson_interval"), "runner.analysis.stats"),
}

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


class _Package(ModuleType):
    """`analyse` names both a submodule and its function: importing the submodule sets the
    package's attribute to the module, which here becomes the function, as the eager
    `from runner.analysis.analyse import analyse` of before left it."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, ModuleType) and _HOME.get(name) == value.__name__:
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value

"""The sweep's side of sequential stopping (M3): counts per cell, and which cells are decided.

The rule itself is `runner.analysis.sequential.decided`; this keeps the running counts of a
sweep, seeded from the runs a store already holds (a resumed sweep knows what it decided).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from runner.analysis.sequential import Side, decided
from runner.experiment import StopEarly
from runner.experiment.records import RunRecord


class EarlyStop:
    """Duplicate counts per cell_id; `side(cell_id)` once a cell's rate is decided."""

    def __init__(self, rule: StopEarly, stored: Iterable[tuple[str, str, bool | None]] = ()):
        self.rule = rule
        self._counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for cell_id, status, duplicate in stored:
            self._add(cell_id, status, duplicate)

    def _add(self, cell_id: str, status: str, duplicate: bool | None) -> None:
        # Like the report's rates: only runs that ran and were judged count.
        if status != "error" and duplicate is not None:
            counts = self._counts[cell_id]
            counts[0] += bool(duplicate)
            counts[1] += 1

    def add(self, cell_id: str, record: RunRecord) -> None:
        """Count a finished run of the cell."""
        self._add(cell_id, record.status, record.duplicate_found)

    def side(self, cell_id: str) -> Side | None:
        """Which side of the threshold the cell's duplicate rate is on, once it is clear."""
        k, n = self._counts.get(cell_id, (0, 0))
        rule = self.rule
        return decided(k, n, rule.threshold, rule.min_runs, rule.confidence)

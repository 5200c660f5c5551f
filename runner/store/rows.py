"""Run records -> columns, table by table: the one form the store writes (R5).

`RunBatch.of(records)` builds the same columns for one run or for 100,000: each stored
column is one Python list, read from the records' fields once, redacted as a column (V3,
`Redactor.column`) and turned into one Arrow array for DuckDB's bulk insert. The columns and
their types come from `runner.store.schema` (derived from the records).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from runner.records import RunRecord
from runner.store.schema import CHILD_TABLES, RUNS, ChildTable, ColumnSpec, TableSpec

_TS = pa.timestamp("us")
# The C library's allocator for the batch's Arrow arrays (N2): with pyarrow's default
# (mimalloc) the first 100,000 runs in a process took 0.6-0.7 s of CPU to convert, the same
# lists a second time 0.3 s (fresh memory, touched page by page); with this one 0.3 s both
# times. The arrays live only until DuckDB has inserted them.
_POOL = pa.system_memory_pool()

Columns = dict[str, list[Any]]  # column name -> its values, one per row


def utc_naive(moment: datetime) -> datetime:
    """A timestamp as naive UTC: aware times are converted, naive ones are taken as UTC."""
    if moment.tzinfo is None:
        return moment
    return moment.astimezone(UTC).replace(tzinfo=None)


def _columns(rows: list[dict[str, Any]], spec: tuple[ColumnSpec, ...]) -> Columns:
    # The fields as stored (a model's __dict__), without pydantic's __iter__.
    return {c.name: [row[c.field] for row in rows] for c in spec}


def _child_columns(child: ChildTable, runs: list[dict[str, Any]]) -> Columns:
    run_ids: list[str] = []
    positions: list[int] = []
    items: list[dict[str, Any]] = []
    field = child.field
    for run in [run for run in runs if run[field]]:
        for position, item in enumerate(run[field]):
            fields = item.__dict__
            # Findings of both kinds share a list; each kind keeps its place in it as idx.
            if child.kind is None or fields["kind"] == child.kind:
                run_ids.append(run["run_id"])
                positions.append(position)
                items.append(fields)
    columns: Columns = {"run_id": run_ids}
    if child.positions:
        columns["idx"] = positions
    columns.update(_columns(items, child.spec.from_model))
    return columns


@dataclass
class RunBatch:
    """Runs as columns, table by table (`runs` and every child table), ready to store."""

    tables: dict[str, Columns]

    @classmethod
    def of(cls, records: Iterable[RunRecord]) -> RunBatch:
        """The columns of some runs; within them the last record of a run id wins."""
        runs = list({r.run_id: r.__dict__ for r in records}.values())
        tables = {"runs": _columns(runs, RUNS.from_model)}
        for child in CHILD_TABLES:
            tables[child.name] = _child_columns(child, runs)
        return cls(tables)

    @property
    def run_ids(self) -> list[str]:
        """The batch's run ids, in order."""
        return self.tables["runs"]["run_id"]

    def __len__(self) -> int:
        return len(self.run_ids)

    def arrow(self, saved_at: datetime) -> dict[str, pa.Table]:
        """One Arrow table per store table (empty tables included), `saved_at` on every run."""
        runs = _arrow(RUNS, self.tables["runs"])
        stamp = pa.repeat(pa.scalar(utc_naive(saved_at), type=_TS), len(self), memory_pool=_POOL)
        tables = {"runs": runs.append_column("saved_at", stamp)}
        for child in CHILD_TABLES:
            tables[child.name] = _arrow(child.spec, self.tables[child.name])
        return tables


def _arrow(spec: TableSpec, columns: Columns) -> pa.Table:
    # Arrow turns aware datetimes into UTC for a zone-less timestamp type.
    return pa.table(
        {
            c.name: pa.array(columns[c.name], type=c.arrow, memory_pool=_POOL)
            for c in spec.columns
            if c.name in columns
        }
    )

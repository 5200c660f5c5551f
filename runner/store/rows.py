"""Run records -> columns, table by table: the one form the store writes (R5).

`RunBatch.of(records)` builds the same columns for one run or for 100,000: each stored
column is one Python list, read from the records' fields once, redacted as a column (V3,
`Redactor.column`) and turned into Arrow record batches of a few thousand rows for DuckDB's
bulk insert (`runner.store.feed`). The columns and their types come from
`runner.store.schema` (derived from the records).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from runner.experiment.records import RunRecord
from runner.store.schema import CHILD_TABLES, RUNS, ChildTable, ColumnSpec

_TS = pa.timestamp("us")
# The C library's allocator for the batch's Arrow arrays (N2): with pyarrow's default
# (mimalloc) the first 100,000 runs in a process took 0.6-0.7 s of CPU to convert, the same
# lists a second time 0.3 s (fresh memory, touched page by page); with this one 0.3 s both
# times. The arrays live only until DuckDB has inserted them.
_POOL = pa.system_memory_pool()

Columns = dict[str, list[Any]]  # column name -> its values, one per row
# (table, column, values) -> the values as stored: applied to every text column of a slice
Clean = Callable[[str, str, list[Any]], list[Any]]
_CHILD_SPECS = {child.name: child.spec for child in CHILD_TABLES}


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

    def rows(self, table: str) -> int:
        """How many rows one of the batch's tables holds."""
        return len(self.tables[table]["run_id"])

    def arrow_schema(self, table: str) -> pa.Schema:
        """The Arrow schema of one table's record batches (`saved_at` last on the runs)."""
        fields = [pa.field(c.name, c.arrow) for c in _stored(table, self.tables[table])]
        if table == "runs":
            fields.append(pa.field("saved_at", _TS))
        return pa.schema(fields)

    def arrow_slices(
        self, table: str, saved_at: datetime, size: int, clean: Clean | None = None
    ) -> Iterator[pa.RecordBatch]:
        """One table's rows as Arrow record batches of at most `size` rows, in order, with
        `saved_at` on every run; `clean(table, column, values)` is applied to each text
        column's values of a slice before they are converted (the store's redaction, V3)."""
        columns = self.tables[table]
        specs = _stored(table, columns)
        schema = self.arrow_schema(table)
        stamp = pa.scalar(utc_naive(saved_at), type=_TS)
        total = self.rows(table)
        for start in range(0, total, size):
            end = min(start + size, total)
            arrays = []
            for c in specs:
                values = columns[c.name][start:end]
                if clean is not None and c.sql == "VARCHAR":
                    values = clean(table, c.name, values)
                # Arrow turns aware datetimes into UTC for a zone-less timestamp type.
                arrays.append(pa.array(values, type=c.arrow, memory_pool=_POOL))
            if table == "runs":
                arrays.append(pa.repeat(stamp, end - start, memory_pool=_POOL))
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)


def _stored(table: str, columns: Columns) -> list[ColumnSpec]:
    spec = RUNS if table == "runs" else _CHILD_SPECS[table]
    return [c for c in spec.columns if c.name in columns]

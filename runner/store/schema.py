"""The store's tables, derived from the run record's pydantic models (one definition, R5).

Every column list the code needs comes from here: the Arrow rows of a bulk insert
(`rows.py`), the child tables the store writes and reads (`store.py`), the run columns the
aggregation loads (`analysis`), and the check that the numbered migrations produce exactly
these tables (`schema_differences`, run by the tests). The migrations stay literal SQL: a
released migration never changes, even when a model does.

To add a column: a field on the model in `runner/experiment/records.py` (with a `Column` marker if its
SQL type, name or bulkiness is not the default) and a migration that adds it.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from datetime import datetime

import duckdb
import pyarrow as pa
from pydantic import BaseModel

from runner.experiment.records import (
    Column,
    DuplicateRow,
    FindingRow,
    OperationRow,
    PatchRow,
    RunRecord,
    TranscriptEntry,
)

ARROW_TYPES: dict[str, pa.DataType] = {
    "VARCHAR": pa.string(),
    "INTEGER": pa.int32(),
    "BIGINT": pa.int64(),
    "DOUBLE": pa.float64(),
    "BOOLEAN": pa.bool_(),
    "TIMESTAMP": pa.timestamp("us"),  # naive UTC (see rows.utc_naive)
}

# The SQL type of a field whose Column marker names none. bool before int: bool is an int.
_DEFAULT_SQL: tuple[tuple[type, str], ...] = (
    (bool, "BOOLEAN"),
    (int, "INTEGER"),
    (float, "DOUBLE"),
    (str, "VARCHAR"),
    (datetime, "TIMESTAMP"),
)


@dataclass(frozen=True)
class ColumnSpec:
    """One stored column: its name, SQL type, nullability and the model field it holds."""

    name: str
    sql: str
    nullable: bool
    field: str | None = None  # None: filled by the store (run_id of a child row, saved_at)
    bulk: bool = False

    @property
    def arrow(self) -> pa.DataType:
        """The Arrow type of the column in a bulk insert."""
        return ARROW_TYPES[self.sql]


@dataclass(frozen=True)
class TableSpec:
    """One table: its columns in order."""

    name: str
    columns: tuple[ColumnSpec, ...]

    def names(self, *, bulk: bool = True) -> tuple[str, ...]:
        """The column names; without the bulk text columns when bulk is False."""
        return tuple(c.name for c in self.columns if bulk or not c.bulk)

    @property
    def from_model(self) -> tuple[ColumnSpec, ...]:
        """The columns filled from a model's fields, in order."""
        return tuple(c for c in self.columns if c.field is not None)


@dataclass(frozen=True)
class ChildTable:
    """A table of child rows: one row per item of a list field of RunRecord."""

    spec: TableSpec
    field: str  # the RunRecord field holding the items
    positions: bool  # idx is the item's place in the run's list (the model has no idx)
    kind: str | None = None  # FindingRow only: the kind of finding this table keeps

    @property
    def name(self) -> str:
        """The table name."""
        return self.spec.name


def _sql_type(
    annotation: object, marker: Column | None, where: str
) -> tuple[str, bool, Column | None]:
    """The SQL type, nullability and Column marker of a field's annotation."""
    nullable = False
    args = typing.get_args(annotation)
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        rest = [a for a in args if a is not type(None)]
        nullable = len(rest) < len(args)
        if len(rest) != 1:
            raise TypeError(f"{where}: a column holds one type, not {annotation}")
        annotation = rest[0]
    if typing.get_origin(annotation) is typing.Annotated:
        # `Alias | None` with an Annotated alias: pydantic leaves the marker inside.
        annotation, *metadata = typing.get_args(annotation)
        marker = marker or _marker(metadata)
    if marker is not None and marker.sql is not None:
        return marker.sql, nullable, marker
    if typing.get_origin(annotation) is typing.Literal:
        if all(isinstance(a, str) for a in typing.get_args(annotation)):
            return "VARCHAR", nullable, marker
    for python_type, sql in _DEFAULT_SQL:
        if annotation is python_type:
            return sql, nullable, marker
    raise TypeError(f"{where}: no SQL type for {annotation}; give the field a Column(sql=...)")


def _marker(metadata: list[object]) -> Column | None:
    return next((m for m in metadata if isinstance(m, Column)), None)


def _is_child_list(annotation: object) -> bool:
    return typing.get_origin(annotation) is list


def model_columns(model: type[BaseModel], skip: tuple[str, ...] = ()) -> tuple[ColumnSpec, ...]:
    """The columns of a model's scalar fields, in field order (list fields are child tables)."""
    columns = []
    for field_name, info in model.model_fields.items():
        if field_name in skip or _is_child_list(info.annotation):
            continue
        marker = _marker(info.metadata)
        sql, nullable, marker = _sql_type(
            info.annotation, marker, f"{model.__name__}.{field_name}"
        )
        columns.append(
            ColumnSpec(
                name=(marker.name if marker and marker.name else field_name),
                sql=sql,
                nullable=nullable,
                field=field_name,
                bulk=bool(marker and marker.bulk),
            )
        )
    return tuple(columns)


_RUN_ID = ColumnSpec("run_id", "VARCHAR", nullable=False)
_POSITION = ColumnSpec("idx", "INTEGER", nullable=False)

RUNS = TableSpec(
    "runs",
    (*model_columns(RunRecord), ColumnSpec("saved_at", "TIMESTAMP", nullable=False)),
)


def _child(name: str, field: str, model: type[BaseModel], positions: bool,
           kind: str | None = None) -> ChildTable:
    skip = ("kind",) if kind is not None else ()
    head = (_RUN_ID, _POSITION) if positions else (_RUN_ID,)
    spec = TableSpec(name, (*head, *model_columns(model, skip)))
    return ChildTable(spec, field, positions, kind)


# A finding's idx is its place in the run's whole finding list, so that the merged order of
# violations and observations can be restored; SPEC J1/J2 name the two apart, so do we.
CHILD_TABLES: tuple[ChildTable, ...] = (
    _child("operations", "operations", OperationRow, positions=False),
    _child("violations", "findings", FindingRow, positions=True, kind="violation"),
    _child("observations", "findings", FindingRow, positions=True, kind="observation"),
    _child("patches", "patches", PatchRow, positions=True),
    _child("transcripts", "transcript", TranscriptEntry, positions=False),
    _child("duplicates", "duplicates", DuplicateRow, positions=True),
)

EXPERIMENTS = TableSpec(
    "experiments",
    (
        ColumnSpec("name", "VARCHAR", nullable=False),
        ColumnSpec("spec_path", "VARCHAR", nullable=True),
        ColumnSpec("spec_text", "VARCHAR", nullable=True),
        ColumnSpec("first_started", "TIMESTAMP", nullable=False),
        ColumnSpec("last_started", "TIMESTAMP", nullable=False),
    ),
)

TABLES: tuple[TableSpec, ...] = (EXPERIMENTS, RUNS, *(c.spec for c in CHILD_TABLES))

# What information_schema calls the types (aliases such as INT or STRING are resolved there).
_Shape = dict[str, dict[str, tuple[str, bool]]]


def expected_schema() -> _Shape:
    """Table -> column -> (SQL type, nullable), as the models define it."""
    return {t.name: {c.name: (c.sql, c.nullable) for c in t.columns} for t in TABLES}


def stored_schema(con: duckdb.DuckDBPyConnection) -> _Shape:
    """Table -> column -> (SQL type, nullable) of the store's tables (the ledger left out)."""
    rows = con.execute(
        "SELECT table_name, column_name, data_type, is_nullable = 'YES' "
        "FROM information_schema.columns WHERE table_name <> 'schema_migrations' "
        "ORDER BY table_name, ordinal_position"
    ).fetchall()
    shape: _Shape = {}
    for table, column, sql, nullable in rows:
        shape.setdefault(table, {})[column] = (sql, nullable)
    return shape


def schema_differences(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Where the store's tables differ from the models' (empty when they agree), one line each."""
    want, have = expected_schema(), stored_schema(con)
    lines = []
    for table in sorted(want.keys() | have.keys()):
        if table not in have:
            lines.append(f"table {table}: missing in the store")
            continue
        if table not in want:
            lines.append(f"table {table}: in the store, not in the models")
            continue
        for column in sorted(want[table].keys() | have[table].keys()):
            w, h = want[table].get(column), have[table].get(column)
            if w != h:
                lines.append(f"{table}.{column}: models say {w}, store has {h}")
    return lines

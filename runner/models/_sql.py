"""SQL as a scripted model reads and writes it (the corpus's statement tools, Z1/Z2).

A model asked to run an `INSERT` through `execute_sql` checks on it the way a person would: it
counts the rows with those values through the same tool (`SELECT count(*) AS found ...`). Its
respellings are the ones agents make when they send a statement again: numbers written with
decimals, the columns in another order, keywords in other case with other white space and a
comment, a new request id column. The model reads SQL with sqlglot, as the harness does, but
knows nothing of the harness's classifier.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runner.models._jsontext import json_values


@dataclass(frozen=True)
class Insert:
    """A one-row `INSERT INTO table (columns) VALUES (...)` with literal values."""

    table: str
    columns: tuple[str, ...]
    values: tuple[Any, ...]  # str, int, float or None
    text: str

    @property
    def record(self) -> dict[str, Any]:
        return dict(zip(self.columns, self.values, strict=True))


def insert_of(text: str) -> Insert | None:
    """The INSERT a statement is, if it is one a model can check on."""
    import sqlglot
    from sqlglot import exp

    try:
        statements = [s for s in sqlglot.parse(text) if s is not None]
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        return None
    if len(statements) != 1 or not isinstance(statements[0], exp.Insert):
        return None
    insert = statements[0]
    if not isinstance(insert.this, exp.Schema) or not isinstance(insert.expression, exp.Values):
        return None
    rows = insert.expression.expressions
    if len(rows) != 1 or not isinstance(rows[0], exp.Tuple):
        return None
    values: list[Any] = []
    for cell in rows[0].expressions:
        if not isinstance(cell, exp.Literal):
            return None
        values.append(cell.this if cell.is_string else _number(cell.this))
    columns = tuple(c.name for c in insert.this.expressions)
    if len(columns) != len(values):
        return None
    return Insert(insert.this.this.sql(), columns, tuple(values), text)


def _number(text: str) -> int | float:
    number = float(text)
    return int(number) if number.is_integer() and "." not in text else number


def _literal(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return "NULL" if value is None else str(value)


def count_check(insert: Insert, skip: frozenset[str] = frozenset()) -> str:
    """`SELECT count(*) AS found FROM t WHERE a = 1 AND b = 'x'`: whether the row exists."""
    where = " AND ".join(
        f"{c} = {_literal(v)}" for c, v in insert.record.items() if c not in skip and v is not None
    )
    return f"SELECT count(*) AS found FROM {insert.table}" + (f" WHERE {where}" if where else "")


def count_in(text: str) -> int | None:
    """The `found` count in a result, however the server lays out its rows."""
    for value in json_values(text):
        found = _find_count(value)
        if found is not None:
            return found
    return None


def _find_count(value: Any) -> int | None:
    if isinstance(value, Mapping):
        if "found" in value and not isinstance(value["found"], (Mapping, list)):
            return _int(value["found"])
        columns, rows = value.get("columns"), value.get("rows")
        if isinstance(columns, list) and "found" in columns and isinstance(rows, list) and rows:
            row = rows[0]
            if isinstance(row, list) and len(row) > columns.index("found"):
                return _int(row[columns.index("found")])
        for item in value.values():
            found = _find_count(item)
            if found is not None:
                return found
    elif isinstance(value, list):
        for item in value:
            found = _find_count(item)
            if found is not None:
                return found
    elif isinstance(value, str) and value.lstrip().startswith(("{", "[")):
        return count_in(value)  # a result nested as text (fastmcp's `result`)
    return None


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


SQL_RESPELLINGS = ("sql-numbers", "sql-columns", "sql-case", "sql-request-id")


def respell(insert: Insert, how: str) -> str:
    """The same INSERT as an agent sends it again (Z2): `sql-numbers` writes whole numbers
    with decimals (129 as 129.00), `sql-columns` reverses the columns with their values,
    `sql-case` changes the case of keywords and identifiers and the white space and adds a
    comment, `sql-request-id` adds a fresh `request_id` column (a possible duplicate)."""
    columns, values = list(insert.columns), list(insert.values)
    if how == "sql-numbers":
        shown = [f"{v}.00" if isinstance(v, int) and not isinstance(v, bool) else _literal(v)
                 for v in values]  # fmt: skip
        return f"INSERT INTO {insert.table} ({', '.join(columns)}) VALUES ({', '.join(shown)})"
    if how == "sql-columns":
        columns.reverse()
        values.reverse()
    elif how == "sql-case":
        cols = ",".join(c.upper() for c in columns)
        vals = ",  ".join(_literal(v) for v in values)
        return f"insert\n  into {insert.table.upper()} ({cols})\nvalues ({vals}) -- sent again"
    elif how == "sql-request-id":
        columns.append("request_id")
        values.append("req-" + hashlib.sha256(insert.text.encode()).hexdigest()[:8])
    vals = ", ".join(_literal(v) for v in values)
    return f"INSERT INTO {insert.table} ({', '.join(columns)}) VALUES ({vals})"

"""Statement tools (Z1, Z2): the effect of a call named by the SQL in one of its arguments.

A tool such as `execute_sql(sql)` runs every statement: a `SELECT count(*)` poll and an
`INSERT` go through the same tool. Each call is classified from its statement, parsed with
sqlglot (a maintained SQL parser with dialects; never regular expressions):

- reads: `SELECT` (without `INTO`), `WITH ... SELECT`, set operations, `SHOW`, `EXPLAIN`,
  `DESCRIBE`, a `PRAGMA` without an assignment, transaction control and session settings;
- idempotent writes (E1: an exact repeat leaves the state of one execution): `INSERT ... ON
  CONFLICT DO NOTHING / DO UPDATE` (and `INSERT OR IGNORE / OR REPLACE`), `MERGE`, `UPDATE`
  whose new values are literals, `DELETE` without a subquery or limit, `CREATE ... IF NOT
  EXISTS`, `DROP ... IF EXISTS`;
- writes: everything else, `INSERT`, `COPY`, `CALL`, an `UPDATE` that reads its own target
  (`SET n = n + 1`), and a statement that does not parse (the report says so).

Several statements in one call take the strongest class (write > idempotent > read).

Identity (Z2): the statement after normalisation: comments and white space gone, numbers by
value (`129.00` is `129`), unquoted identifiers folded as the dialect folds them, and an
`INSERT ... VALUES` as its rows of column -> value, so the order of the columns does not
matter and J9 compares the values field by field (a new `request_id` column is a possible
duplicate, never another operation that passes). A column named like a key field (K1, K5) is
the statement's key: it carries the key and is left out of the operation.

sqlglot is imported when the first statement is parsed, never at start-up (it takes ~80 ms).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from harness.operations.keys import normalise_field_name

StatementClass = Literal["read", "idempotent", "write"]
_STRENGTH = {"read": 0, "idempotent": 1, "write": 2}

# A statement longer than this is not parsed (bounded cost per call, X7): it is a write and
# its identity is its text with white space collapsed.
MAX_PARSED_CHARS = 100_000
# Commands sqlglot keeps as text (`Command`), by their first word.
_READ_COMMANDS = frozenset({"SHOW", "EXPLAIN", "DESCRIBE", "DESC"})

_sqlglot: Any = None


def _parser() -> Any:
    """sqlglot, imported once, with its fall-back warnings silenced (they are not ours)."""
    global _sqlglot
    if _sqlglot is None:
        import sqlglot

        logging.getLogger("sqlglot").setLevel(logging.ERROR)
        _sqlglot = sqlglot
    return _sqlglot


@dataclass(frozen=True)
class Parsed:
    """What one statement argument amounts to."""

    kind: StatementClass
    what: str  # the statements' kinds, e.g. "INSERT" or "SELECT; SELECT"
    identity: Any  # the normalised statement(s), as JSON data
    keys: tuple[tuple[str, Any], ...] = ()  # (column, value) of key columns (Z2)
    unparsed: str | None = None  # why the text could not be parsed (then kind is write)


_CACHE: OrderedDict[tuple[str | None, frozenset[str], str], Parsed] = OrderedDict()
_CACHE_SIZE = 256


def parse_statement(text: str, dialect: str | None, key_names: frozenset[str]) -> Parsed:
    """Z1/Z2: the class, identity and key columns of the SQL in `text` (`dialect`: sqlglot's
    name, None for its generic one)."""
    cache_key = (dialect, key_names, text)
    found = _CACHE.get(cache_key)
    if found is not None:
        _CACHE.move_to_end(cache_key)
        return found
    parsed = _parse(text, dialect, key_names)
    _CACHE[cache_key] = parsed
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return parsed


def _unparsed(text: str, why: str) -> Parsed:
    return Parsed("write", "unparsed SQL", {"sql": " ".join(text.split())}, (), why)


def _parse(text: str, dialect: str | None, key_names: frozenset[str]) -> Parsed:
    if len(text) > MAX_PARSED_CHARS:
        return _unparsed(text, f"the statement is longer than {MAX_PARSED_CHARS} characters")
    sqlglot = _parser()
    from sqlglot import exp

    try:
        statements = [s for s in sqlglot.parse(text, read=dialect) if s is not None]
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return _unparsed(text, f"the statement does not parse: {first[:160]}")
    except RecursionError:
        return _unparsed(text, "the statement is nested too deeply to parse")
    statements = [s for s in statements if not isinstance(s, exp.Semicolon)]
    if not statements:
        return _unparsed(text, "the argument holds no statement")
    kinds: list[tuple[StatementClass, str]] = []
    identities: list[Any] = []
    keys: list[tuple[str, Any]] = []
    for statement in statements:
        kind = _classify(statement, exp)
        if kind is None:
            return _unparsed(text, f"{statement.key.upper()} is not a statement")
        kinds.append(kind)
        identity, found = _identity(statement, dialect, key_names, exp)
        identities.append(identity)
        keys += found
    strongest = max((k for k, _ in kinds), key=_STRENGTH.__getitem__)
    what = "; ".join(w for _, w in kinds)
    whole = identities[0] if len(identities) == 1 else {"statements": identities}
    return Parsed(strongest, what, whole, tuple(keys))


def _classify(statement: Any, exp: Any) -> tuple[StatementClass, str] | None:
    """Z1: the class of one parsed statement and its kind in words; None for an expression
    that is no statement (`Ann Example` parses as a column with an alias)."""
    if isinstance(statement, (exp.Select, exp.SetOperation)):
        if statement.args.get("into") is not None:
            return "write", "SELECT INTO"
        return "read", "SELECT"
    if isinstance(statement, (exp.Describe, exp.Show)):
        return "read", type(statement).__name__.upper()
    if isinstance(statement, exp.Pragma):
        if isinstance(statement.this, exp.EQ) and "=" in statement.sql():
            return "write", "PRAGMA assignment"
        return "read", "PRAGMA"
    if isinstance(statement, (exp.Transaction, exp.Commit, exp.Rollback, exp.Set, exp.Use)):
        return "read", type(statement).__name__.upper()  # no effect on data of its own
    if isinstance(statement, exp.Command):
        word = str(statement.this).upper()
        return ("read", word) if word in _READ_COMMANDS else ("write", word)
    if isinstance(statement, exp.Insert):
        conflict = statement.args.get("conflict")
        alternative = str(statement.args.get("alternative") or "").upper()
        if alternative in ("IGNORE", "REPLACE") or statement.args.get("ignore"):
            return "idempotent", f"INSERT OR {alternative or 'IGNORE'}"
        if conflict is not None:
            if any(_reads_own_row(e, exp) for e in conflict.args.get("expressions") or ()):
                return "write", "INSERT ON CONFLICT DO UPDATE from the row itself"
            return "idempotent", "INSERT ON CONFLICT"
        return "write", "INSERT"
    if isinstance(statement, exp.Merge):
        return "idempotent", "MERGE"
    if isinstance(statement, exp.Update):
        if any(_reads_own_row(e, exp) for e in statement.expressions):
            return "write", "UPDATE from its own values"
        return "idempotent", "UPDATE with literal values"
    if isinstance(statement, exp.Delete):
        if statement.find(exp.Subquery, exp.Limit, exp.Order) is not None:
            return "write", "DELETE with a subquery or limit"
        return "idempotent", "DELETE"
    if isinstance(statement, exp.Create):
        if statement.args.get("exists"):
            return "idempotent", "CREATE IF NOT EXISTS"
        return "write", "CREATE"
    if isinstance(statement, exp.Drop):
        if statement.args.get("exists"):
            return "idempotent", "DROP IF EXISTS"
        return "write", "DROP"
    if isinstance(statement, (exp.Copy, exp.Alter, exp.TruncateTable, exp.Grant)):
        return "write", statement.key.upper()
    if isinstance(statement, (exp.Column, exp.Alias, exp.Literal, exp.Identifier)):
        return None
    return "write", statement.key.upper()


def _reads_own_row(assignment: Any, exp: Any) -> bool:
    """`SET n = n + 1`: a new value computed from a column (an upsert's `excluded.x` is the
    new row, not the stored one) or a subquery."""
    value = assignment.expression if isinstance(assignment, exp.EQ) else assignment
    if value is None:
        return False
    if value.find(exp.Subquery, exp.Select) is not None:
        return True
    return any(
        str(column.table or "").lower() != "excluded" for column in value.find_all(exp.Column)
    )


def _identity(
    statement: Any, dialect: str | None, key_names: frozenset[str], exp: Any
) -> tuple[Any, list[tuple[str, Any]]]:
    """Z2: the normalised statement as JSON data, and its key columns."""
    from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

    statement = normalize_identifiers(statement.copy(), dialect=dialect)
    for node in list(statement.walk()):
        node.comments = None
        if isinstance(node, exp.Literal) and not node.is_string:
            number = _number(node.this)
            if number is not None:
                node.replace(exp.Literal.number(_number_text(number)))
    rows = _insert_rows(statement, dialect, exp)
    if rows is None:
        return {"sql": statement.sql(dialect=dialect, comments=False)}, []
    table, columns, values, rest = rows
    keys: list[tuple[str, Any]] = []
    key_columns = {c for c in columns if normalise_field_name(c) in key_names}
    for column in columns:
        if column in key_columns and values:
            keys.append((column, values[0][columns.index(column)]))
    records = [
        {c: v for c, v in zip(columns, row, strict=True) if c not in key_columns}
        for row in values
    ]
    identity: dict[str, Any] = {"insert": table, "rows": records}
    if rest:
        identity["then"] = rest
    return identity, keys


def _insert_rows(statement: Any, dialect: str | None, exp: Any) -> Any:
    """(table, columns, rows of JSON values, the rest as SQL) of `INSERT INTO t (cols) VALUES
    ...` with literal values; None for any other statement."""
    if not isinstance(statement, exp.Insert) or not isinstance(statement.this, exp.Schema):
        return None
    values = statement.expression
    if not isinstance(values, exp.Values):
        return None
    columns = [c.name for c in statement.this.expressions]
    if len(set(columns)) != len(columns):
        return None
    rows: list[list[Any]] = []
    for row in values.expressions:
        cells = row.expressions if isinstance(row, exp.Tuple) else [row]
        if len(cells) != len(columns):
            return None
        rows.append([_value(cell, dialect, exp) for cell in cells])
    table = statement.this.this.sql(dialect=dialect, comments=False)
    rest = statement.copy()
    rest.set("this", exp.to_table("t"))
    rest.set("expression", None)
    tail = rest.sql(dialect=dialect, comments=False)
    # Only what follows the VALUES (ON CONFLICT ..., RETURNING ...) belongs to the rest.
    plain = exp.Insert(this=exp.to_table("t")).sql(dialect=dialect)
    return table, columns, rows, tail[len(plain):].strip() if tail.startswith(plain) else tail


def _value(cell: Any, dialect: str | None, exp: Any) -> Any:
    """A VALUES cell as JSON data: a string, a number by value, null, a boolean; any other
    expression as its SQL text."""
    if isinstance(cell, exp.Literal):
        if cell.is_string:
            return cell.this
        number = _number(cell.this)
        if number is not None:
            return int(number) if number == number.to_integral_value() else number
    if isinstance(cell, exp.Null):
        return None
    if isinstance(cell, exp.Boolean):
        return bool(cell.this)
    if isinstance(cell, exp.Neg) and isinstance(cell.this, exp.Literal) and not cell.this.is_string:
        number = _number(cell.this.this)
        if number is not None:
            number = -number
            return int(number) if number == number.to_integral_value() else number
    return {"sql": cell.sql(dialect=dialect, comments=False)}


def _number(text: Any) -> Decimal | None:
    try:
        number = Decimal(str(text))
    except (InvalidOperation, ValueError):
        return None
    return number if number.is_finite() else None


def _number_text(number: Decimal) -> str:
    """`129.00` -> `129`, `1.50` -> `1.5`, `1e3` -> `1000` (numbers by value, E6)."""
    if number == number.to_integral_value():
        return str(int(number))
    return format(number.normalize(), "f")


def stronger(a: StatementClass, b: StatementClass) -> StatementClass:
    """The stronger of two classes (several statements: Z1)."""
    return a if _STRENGTH[a] >= _STRENGTH[b] else b


__all__ = ["MAX_PARSED_CHARS", "Parsed", "StatementClass", "parse_statement", "stronger"]

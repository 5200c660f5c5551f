"""Effects named by arguments (Z1-Z3): which argument of a tool names what a call does.

A tool's plan is found once, when its list arrives (`effect_plan`): an SQL statement (a string
property named like `sql`, `query` or `statement`: `sql` in its name says so itself, `query` and
`statement` need the tool to speak of SQL or a database; or `--statement-tools`, or a profile),
a key-value command line (a `command` property of a tool that speaks of Redis or Valkey), or an
HTTP method (a `method` property whose enum holds HTTP methods, or beside a `url` or `path`).
Each call is then classified from that argument (`effect_of`): its class, whether it is an
idempotent write, its identity (the argument normalised) and its key fields. A call whose
argument is missing or names nothing known keeps the tool's own class.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from harness.operations.commands import command_of, command_table, http_method
from harness.operations.keys import normalise_field_name

EffectKind = Literal["sql", "command", "http"]

# Z1: property names that hold a statement (normalised: lower case, no `_` or `-`).
_SQL_NAMES = frozenset({"sql", "sqlquery", "sqlstatement", "sqltext", "rawsql"})
_MAYBE_SQL_NAMES = frozenset({"query", "statement", "statements", "querytext", "querystring"})
# Words that say a `query` is SQL (in the tool's name, its description or the property's).
_SQL_WORDS = frozenset({
    "sql", "select", "database", "databases", "db", "table", "tables", "duckdb", "sqlite",
    "postgres", "postgresql", "mysql", "mariadb", "motherduck", "insert", "ddl", "dml",
})  # fmt: skip
_KV_WORDS = frozenset({"redis", "valkey", "keydb", "dragonfly"})
_COMMAND_NAMES = frozenset({"command", "cmd", "commandline"})
_METHOD_NAMES = frozenset({"method", "httpmethod", "verb"})
_URL_NAMES = frozenset({"url", "uri", "path", "endpoint", "href"})
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class EffectPlan:
    """Which top-level argument names a tool's effect, and how to read it."""

    kind: EffectKind
    argument: str
    dialect: str | None = None  # sqlglot's dialect for `sql` (None: its generic one)
    declared_by: str = ""  # why this tool is a statement tool


@dataclass(frozen=True)
class CallEffect:
    """What one call does, read from its argument."""

    tool_class: Literal["read", "write"]
    idempotent: str | None  # E1: why a repeat is harmless (writes only)
    reason: str  # what the argument says, e.g. "SQL INSERT in `sql`"
    identity: Any  # the argument's normalised value, in place of the value as sent
    keys: tuple[tuple[str, Any], ...] = ()  # (path, value) of key fields inside the argument
    note: str | None = None  # e.g. the statement did not parse (then it is a write)


def _words(text: Any) -> set[str]:
    return set(_WORD.findall(str(text).lower())) if text else set()


def _string_property(schema: Any) -> bool:
    if not isinstance(schema, Mapping):
        return False
    kind = schema.get("type")
    kinds = set(kind) if isinstance(kind, list) else {kind}
    return "string" in kinds or (kind is None and "enum" not in schema)


def effect_plan(tool: Mapping[str, Any], declared: str | None = None,
                dialect: str | None = None) -> EffectPlan | None:  # fmt: skip
    """Z1/Z3: the argument that names this tool's effect, or None. `declared`: why it is a
    statement tool already (`--statement-tools`, a profile), then its `sql`-like property (the
    first string property when none is named so) holds the statement."""
    schema = tool.get("inputSchema")
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        properties = {}
    names = {normalise_field_name(str(n)): str(n) for n in properties}
    if declared is not None:
        for wanted in (_SQL_NAMES, _MAYBE_SQL_NAMES, _COMMAND_NAMES):
            found = next((names[n] for n in names if n in wanted), None)
            if found is not None:
                kind: EffectKind = "command" if wanted is _COMMAND_NAMES else "sql"
                return EffectPlan(kind, found, dialect, declared)
        first = next((str(n) for n, s in properties.items() if _string_property(s)), None)
        return EffectPlan("sql", first, dialect, declared) if first is not None else None
    about = _words(tool.get("name")) | _words(tool.get("description"))
    for normal, name in names.items():
        prop = properties[name]
        if not _string_property(prop):
            continue
        if normal in _SQL_NAMES:
            return EffectPlan("sql", name, dialect, f"its argument `{name}` holds SQL")
        if normal in _MAYBE_SQL_NAMES and (about | _words(_description(prop))) & _SQL_WORDS:
            return EffectPlan("sql", name, dialect, f"its argument `{name}` holds SQL")
        if normal in _COMMAND_NAMES and (about | _words(_description(prop))) & _KV_WORDS:
            return EffectPlan("command", name, None,
                              f"its argument `{name}` names a {command_table().label} command")  # fmt: skip
        if normal in _METHOD_NAMES and _names_http(prop, names):
            return EffectPlan("http", name, None, f"its argument `{name}` names an HTTP method")
    return None


def _description(schema: Any) -> Any:
    return schema.get("description") if isinstance(schema, Mapping) else None


def _names_http(prop: Mapping[str, Any], names: Mapping[str, str]) -> bool:
    enum = prop.get("enum")
    if isinstance(enum, list) and enum:
        return all(http_method(v) is not None for v in enum)
    return any(n in _URL_NAMES for n in names)


def effect_of(plan: EffectPlan, arguments: Any, key_names: frozenset[str]) -> CallEffect | None:
    """Z1-Z3: the class, idempotence, identity and keys of one call from its argument; None
    when the argument is missing or names nothing known (the tool's own class stands)."""
    if not isinstance(arguments, Mapping):
        return None
    value = arguments.get(plan.argument)
    if not isinstance(value, str):
        return None
    where = f"in `{plan.argument}`"
    if plan.kind == "sql":
        from harness.operations.statements import parse_statement

        parsed = parse_statement(value, plan.dialect, key_names)
        keys = tuple((f"{plan.argument}.{column}", v) for column, v in parsed.keys)
        if parsed.unparsed is not None:
            return CallEffect("write", None, f"SQL {where} that does not parse", parsed.identity,
                              keys, f"{parsed.unparsed}: judged as a write")  # fmt: skip
        reason = f"SQL {parsed.what} {where}"
        if parsed.kind == "read":
            return CallEffect("read", None, reason, parsed.identity, keys)
        idempotent = f"idempotent statement ({parsed.what})" if parsed.kind == "idempotent" else None
        return CallEffect("write", idempotent, reason, parsed.identity, keys)
    if plan.kind == "command":
        command, words = command_of(value)
        if command is None:
            return None
        label = command_table().label
        reason = f"{label} command {command.name.upper()} {where}"
        idempotent = f"{label} command table: {command.name.upper()}" if (
            command.tool_class == "write" and command.idempotent) else None  # fmt: skip
        return CallEffect(command.tool_class, idempotent, reason, [command.name, *words[1:]])
    found = http_method(value)
    if found is None:
        return None
    method = value.strip().upper()
    tool_class, idempotent = found
    why = f"HTTP {method} is idempotent" if idempotent else None
    return CallEffect(tool_class, why, f"HTTP {method} {where}", method)


__all__ = ["CallEffect", "EffectKind", "EffectPlan", "effect_of", "effect_plan"]

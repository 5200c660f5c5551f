"""Built-in reference MCP servers backed by SQLite, so real rows can be counted (SPEC R4).

Kinds: `booking` (not idempotent, search by guest and date), `booking-nosearch` (lookup by id
only) and `payment` (idempotency keys). Serve one over stdio with
`python -m runner.upstreams KIND --db PATH` (add `--http 127.0.0.1:0` for streamable HTTP), or
in process with `serve(...)`; ask the ledger
what really happened with `ground_truth(...)` and `real_rows(...)`.
"""

from runner.upstreams._fields import clean_text, match_key, to_minor_units
from runner.upstreams._registry import (
    BUILTIN_UPSTREAMS,
    BuiltinUpstream,
    builtin,
    ground_truth,
    http_command,
    ledger_facts,
    real_rows,
    serve,
    stdio_command,
)

__all__ = [
    "BUILTIN_UPSTREAMS",
    "BuiltinUpstream",
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

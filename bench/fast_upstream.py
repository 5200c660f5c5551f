"""A minimal stdio MCP server for the proxy benchmark: answers in microseconds, no SDK.

    python bench/fast_upstream.py

Reads newline-delimited JSON-RPC on stdin, answers `initialize`, `tools/list`, `tools/call`
and `ping` on stdout, ignores notifications. `create_booking` (a write by name, C4) and
`search_bookings` (a read by prefix, C5) answer a small fixed-shape result. Nothing is stored:
it exists so that the benchmark measures the proxy, not the upstream.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a plain script

from harness.simulate import BOOKING_TOOLS  # noqa: E402

# The simulated booking service's tools: a write by name (C4) and reads by prefix (C5).
TOOLS = BOOKING_TOOLS


def answer(message: dict) -> dict | None:
    method = message.get("method")
    if "id" not in message or method is None:
        return None  # a notification, or an answer to a request we never send
    params = message.get("params") or {}
    if method == "initialize":
        result: dict = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "bench-fast-upstream", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": json.dumps({"id": message["id"]})}]}
    else:
        result = {}
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def main() -> None:
    """Serve stdin/stdout until EOF."""
    read, write, flush = sys.stdin.buffer.readline, sys.stdout.buffer.write, sys.stdout.flush
    while line := read():
        if not line.strip():
            continue
        reply = answer(json.loads(line))
        if reply is not None:
            write(json.dumps(reply, separators=(",", ":")).encode() + b"\n")
            flush()


if __name__ == "__main__":
    main()

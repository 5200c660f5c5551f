"""A cheap MCP upstream over stdio for the listener's bounds: counts what it executed, floods.

    python flood_upstream.py TRUTH.jsonl [--slow-ms MS]

No SDK (it starts in tens of milliseconds, so a test can have dozens). Each request is served
in a thread of its own, so slow calls run side by side. Every call that executes appends one
JSON line to TRUTH.jsonl, flushed before anything is answered (ground truth); its first line
is `{"started": PID}`. Tools:

    book        a write: executes, answers at once with its arguments
    slow_book   a write: executes, answers --slow-ms later (progress every 50 ms meanwhile when
                the request carries a progressToken)
    flood       a read: sends `count` notifications of `size` bytes for the request (progress
                when it carries a progressToken, else notifications/message), then answers
    search      a read: the executed bookings

Speaks whatever protocol revision the client asks for (2025-06-18 and later, 2026-07-28's
server/discover too).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

MODERN_KEY = "io.modelcontextprotocol/protocolVersion"
TOOLS = [
    {"name": "book", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": False}},
    {
        "name": "slow_book",
        "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": False},
    },
    {"name": "flood", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    {"name": "search", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
]


class Upstream:
    def __init__(self, truth_path: str, slow_ms: int) -> None:
        self.truth = open(truth_path, "a", encoding="utf-8")  # noqa: SIM115
        self.slow_s = slow_ms / 1000
        self.lock = threading.Lock()
        self.modern: dict[str, bool] = {}
        self.record({"started": os.getpid()})

    def record(self, entry: dict) -> None:
        with self.lock:
            self.truth.write(json.dumps(entry) + "\n")
            self.truth.flush()

    def send(self, body: dict) -> None:
        data = json.dumps(body, separators=(",", ":")).encode() + b"\n"
        with self.lock:
            try:
                sys.stdout.buffer.write(data)
                sys.stdout.buffer.flush()
            except (BrokenPipeError, ValueError):
                os._exit(0)

    def answer(self, rpc_id: object, result: dict) -> None:
        if self.modern.get(json.dumps(rpc_id)):  # 2026-07-28 results say they are complete
            result = {**result, "resultType": "complete"}
        self.send({"jsonrpc": "2.0", "id": rpc_id, "result": result})

    def serve(self, message: dict) -> None:
        rpc_id, method = message["id"], message["method"]
        params = message.get("params") or {}
        meta = params.get("_meta") or {}
        self.modern[json.dumps(rpc_id)] = MODERN_KEY in meta
        if method == "initialize":
            version = params.get("protocolVersion", "2025-06-18")
            self.answer(
                rpc_id,
                {
                    "protocolVersion": version,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "flood-upstream", "version": "0"},
                },
            )
        elif method == "server/discover":
            self.answer(
                rpc_id,
                {
                    "supportedVersions": ["2026-07-28"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "flood-upstream", "version": "0"},
                },
            )
        elif method == "tools/list":
            self.answer(rpc_id, {"tools": TOOLS, "ttlMs": 0, "cacheScope": "private"})
        elif method == "tools/call":
            self.call(rpc_id, params)
        elif method == "ping":
            self.answer(rpc_id, {})
        else:
            self.send(
                {
                    "jsonrpc": "2.0",
                    "id": rpc_id,
                    "error": {"code": -32601, "message": f"no method {method}"},
                }
            )

    def call(self, rpc_id: object, params: dict) -> None:
        name, args = params.get("name"), params.get("arguments") or {}
        meta = params.get("_meta") or {}
        token = meta.get("progressToken")
        text = {"content": [{"type": "text", "text": json.dumps(args)}]}
        if name == "book":
            self.record({"tool": name, "arguments": args})
            self.answer(rpc_id, text)
        elif name == "slow_book":
            self.record({"tool": name, "arguments": args})
            deadline = time.monotonic() + self.slow_s
            step = 0
            while time.monotonic() < deadline:
                if token is not None:
                    step += 1
                    self.send(
                        {
                            "jsonrpc": "2.0",
                            "method": "notifications/progress",
                            "params": {"progressToken": token, "progress": step},
                        }
                    )
                time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
            self.answer(rpc_id, text)
        elif name == "flood":
            count, size = int(args.get("count", 100)), int(args.get("size", 1000))
            pad = "x" * size
            for i in range(count):
                if token is not None:
                    body = {
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {"progressToken": token, "progress": i, "message": pad},
                    }
                else:
                    body = {
                        "jsonrpc": "2.0",
                        "method": "notifications/message",
                        "params": {"level": "info", "data": pad},
                    }
                self.send(body)
            self.record({"tool": name, "arguments": args, "sent": count})
            self.answer(rpc_id, {"content": [{"type": "text", "text": f"sent {count}"}]})
        elif name == "search":
            self.answer(rpc_id, text)
        else:
            self.send(
                {
                    "jsonrpc": "2.0",
                    "id": rpc_id,
                    "error": {"code": -32602, "message": f"unknown tool {name}"},
                }
            )


def main() -> None:
    slow_ms = int(sys.argv[sys.argv.index("--slow-ms") + 1]) if "--slow-ms" in sys.argv else 1000
    upstream = Upstream(sys.argv[1], slow_ms)
    for raw in sys.stdin.buffer:
        try:
            message = json.loads(raw)
        except ValueError:
            continue
        if isinstance(message, dict) and "method" in message and "id" in message:
            threading.Thread(target=upstream.serve, args=(message,), daemon=True).start()
    os._exit(0)


if __name__ == "__main__":
    main()

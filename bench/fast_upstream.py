"""A minimal MCP server for the proxy benchmarks: answers in microseconds, no SDK.

    python bench/fast_upstream.py                     # stdio
    python bench/fast_upstream.py --http 127.0.0.1:0  # streamable HTTP, plain JSON answers

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

from harness.benchmark.simulate import BOOKING_TOOLS  # noqa: E402

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


def serve_http(address: str) -> None:
    """The same answers over streamable HTTP (aiohttp), one session, JSON bodies."""
    import asyncio

    from aiohttp import web

    host, _, port = address.rpartition(":")

    async def post(request: web.Request) -> web.Response:
        reply = answer(json.loads(await request.read()))
        if reply is None:
            return web.Response(status=202)
        headers = {"Mcp-Session-Id": "bench"} if "protocolVersion" in reply["result"] else {}
        body = json.dumps(reply, separators=(",", ":"))
        return web.Response(text=body, content_type="application/json", headers=headers)

    async def get(request: web.Request) -> web.Response:
        return web.Response(status=405)

    async def run() -> None:
        app = web.Application()
        app.router.add_post("/mcp", post)
        app.router.add_get("/mcp", get)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host or "127.0.0.1", int(port))
        await site.start()
        bound = site._server.sockets[0].getsockname()[1]  # noqa: SLF001
        print(f"listening on http://{host or '127.0.0.1'}:{bound}/mcp", file=sys.stderr, flush=True)
        await asyncio.Event().wait()

    asyncio.run(run())


def main() -> None:
    """Serve stdin/stdout until EOF (or HTTP with --http HOST:PORT)."""
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        serve_http(sys.argv[2])
        return
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

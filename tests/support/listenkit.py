"""Helpers for the tests of the proxy's HTTP bounds (V9-V12, V14, E5): the proxy as a process
with its stderr counted, its memory and child processes read from /proc, a raw HTTP agent.

Memory is read from /proc/PID/status: `VmHWM` is the process's peak resident set size, so a
test can state a ceiling for everything that happened before it looks, without timing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from tests.support.httpkit import Running, running

HERE = Path(__file__).resolve().parent
FLOOD_UPSTREAM = HERE / "servers" / "flood_upstream.py"
DEADLINE_S = 60.0
LISTENING = re.compile(r"listening on (http://\S+)")
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
MODERN = "2026-07-28"


def flood_upstream(truth: Path, *extra: str) -> list[str]:
    """Proxy flags that start the flood upstream (stdio) recording into `truth`."""
    args = [str(FLOOD_UPSTREAM), str(truth), *extra]
    return ["--upstream-command", sys.executable, *(f"--upstream-arg={a}" for a in args)]


def truth_rows(truth: Path, tool: str | None = None) -> list[dict[str, Any]]:
    """What the upstream really executed (its ground-truth file)."""
    if not truth.exists():
        return []
    rows = [json.loads(line) for line in truth.read_text().splitlines() if line.strip()]
    return [r for r in rows if "tool" in r and (tool is None or r["tool"] == tool)]


async def until(condition: Callable[[], bool], what: str, deadline_s: float = DEADLINE_S) -> None:
    """Wait (bounded) for `condition` to hold; polling, for conditions outside this process."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while not condition():
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


# -- the proxy process ---------------------------------------------------------------------


Proxy = Running  # a running proxy: its url, its stderr lines and their bytes, stop()


@contextlib.asynccontextmanager
async def proxy_process(
    argv: list[str],
    *,
    listen: bool = True,
    stdin: Any = asyncio.subprocess.DEVNULL,
    stdout: Any = asyncio.subprocess.DEVNULL,
    preexec_fn: Any = None,
) -> AsyncIterator[Proxy]:
    """Start `argv`; with `listen`, wait for its 'listening on URL' line."""
    async with running(
        argv, url=listen, pattern=LISTENING, stdin=stdin, stdout=stdout,
        preexec_fn=preexec_fn, limit=4 << 20,
    ) as proxy:  # fmt: skip
        yield proxy


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set size so far (VmHWM), in MB."""
    status = Path(f"/proc/{pid}/status").read_text()
    kb = int(re.search(r"^VmHWM:\s+(\d+) kB", status, re.M).group(1))  # type: ignore[union-attr]
    return kb / 1024


def children(pid: int) -> list[str]:
    """The command lines of `pid`'s living child processes."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            state = stat.rsplit(")", 1)[1].split()[0]
            if ppid == pid and state != "Z":
                found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except (OSError, ValueError, IndexError):
            continue
    return found


def upstreams(pid: int) -> int:
    """How many flood upstream processes `pid` has running."""
    return sum(1 for command in children(pid) if FLOOD_UPSTREAM.name in command)


def report_of(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


# -- a raw HTTP agent --------------------------------------------------------------------------


def rpc(rpc_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": rpc_id, "method": method}
    if params is not None:
        body["params"] = params
    return body


def stdio_opening() -> list[dict[str, Any]]:
    """What a stdio agent sends first: initialize (2025-06-18, id 1) and initialized."""
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    return [init_body(1, "2025-06-18"), note]


def init_body(rpc_id: Any = 1, version: str = "2025-11-25") -> dict[str, Any]:
    return rpc(rpc_id, "initialize", {"protocolVersion": version, "capabilities": {},
                                      "clientInfo": {"name": "raw", "version": "1"}})  # fmt: skip


def call_body(rpc_id: Any, tool: str, arguments: dict[str, Any], **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if meta:
        params["_meta"] = meta
    return rpc(rpc_id, "tools/call", params)


def answers(kind: str, text: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages of one HTTP answer body (JSON, or SSE events)."""
    if kind.startswith("application/json"):
        parsed = json.loads(text)
        return parsed if isinstance(parsed, list) else [parsed]
    out = []
    for block in text.split("\n\n"):
        data = [line[5:].lstrip() for line in block.split("\n") if line.startswith("data:")]
        if data and "".join(data).strip():
            out.append(json.loads("\n".join(data)))
    return out


async def open_session(http: aiohttp.ClientSession, url: str, version: str = "2025-11-25") -> str:
    """initialize + notifications/initialized; the session id."""
    async with http.post(url, json=init_body(1, version), headers=ACCEPT) as resp:
        assert resp.status == 200, await resp.text()
        sid = resp.headers["Mcp-Session-Id"]
        await resp.read()
    headers = {**ACCEPT, "Mcp-Session-Id": sid, "MCP-Protocol-Version": version}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    async with http.post(url, json=note, headers=headers) as resp:
        assert resp.status == 202
    return sid


def session_headers(sid: str, version: str = "2025-11-25") -> dict[str, str]:
    return {**ACCEPT, "Mcp-Session-Id": sid, "MCP-Protocol-Version": version}


async def post(
    http: aiohttp.ClientSession, url: str, body: Any, headers: dict[str, str]
) -> tuple[int, list[dict[str, Any]]]:
    """POST and read the whole answer: its status and its messages."""
    async with http.post(url, json=body, headers=headers) as resp:
        text = await resp.text()
        kind = resp.headers.get("Content-Type", "")
        return resp.status, answers(kind, text) if text.strip() else []


# -- HTTP upstreams in the test's own process ---------------------------------------------------


@contextlib.asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[str]:
    """Serve `app` on a free loopback port; its base URL (http://127.0.0.1:PORT)."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # noqa: SLF001
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def handshake(
    message: dict[str, Any], tools: list[dict[str, Any]], name: str
) -> web.Response | None:
    """A minimal MCP server's answer to a notification (202), `initialize` and `tools/list`;
    None for anything else (the test's upstream answers that itself)."""
    rpc_id, method = message.get("id"), message.get("method")
    if rpc_id is None:
        return web.Response(status=202)
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": name, "version": "0"},
        }
    elif method == "tools/list":
        result = {"tools": tools}
    else:
        return None
    return web.json_response({"jsonrpc": "2.0", "id": rpc_id, "result": result})

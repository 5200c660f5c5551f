"""Helpers for the streamable HTTP end-to-end tests: processes that print where they listen.

`running(argv)` starts a process, keeps its stderr lines, and (with `url=True`) waits for its
"listening on URL" line, so a server or a proxy can bind port 0 and tell us the real port.
`mcp_client(...)` opens an SDK client session over stdio or HTTP, the way an agent would;
`Agent` is a raw streamable HTTP client that shows what each POST answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import anyio

from tests.support import launcher
from tests.support.paths import COUNTING_SERVER
from tests.support.proxyproc import BOOK

SERVER = COUNTING_SERVER
DEADLINE_S = 60
_URL = re.compile(r"listening on (http://\S+)")


@dataclass
class Running:
    """A process, the stderr lines it has written so far (the first 10,000) and their bytes."""

    proc: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)
    url: str = ""
    returncode: int | None = None
    stderr_bytes: int = 0
    _seen: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def stderr(self) -> str:
        return "\n".join(self.lines)

    async def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signal it and wait (bounded) for its exit code."""
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)
        with anyio.fail_after(DEADLINE_S):
            self.returncode = await self.proc.wait()
        return self.returncode


@contextlib.asynccontextmanager
async def running(
    argv: list[str], *, url: bool = True, pattern: re.Pattern[str] = _URL, **kwargs: Any
) -> AsyncIterator[Running]:
    """Start `argv`; with `url`, wait until its output says where it listens (`pattern`).

    stderr is read; a process that announces itself on stdout is started with
    `stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT`.
    """
    kwargs.setdefault("stderr", asyncio.subprocess.PIPE)
    kwargs.setdefault("stdin", asyncio.subprocess.DEVNULL)
    proc = await launcher.create_subprocess_exec(*argv, **kwargs)
    run = Running(proc)

    async def drain() -> None:
        stream = proc.stderr if proc.stderr is not None else proc.stdout
        assert stream is not None
        while line := await stream.readline():
            run.stderr_bytes += len(line)
            text = line.decode("utf-8", "replace").rstrip("\n")
            if len(run.lines) < 10_000:
                run.lines.append(text)
            found = pattern.search(text)
            if found and not run.url:
                run.url = found.group(1)
            run._seen.set()
        run._seen.set()

    reader = asyncio.create_task(drain())
    try:
        if url:
            with anyio.fail_after(DEADLINE_S):
                while not run.url:
                    if proc.returncode is not None or reader.done():
                        raise AssertionError(f"{argv[0]} exited before listening:\n{run.stderr}")
                    run._seen.clear()
                    await run._seen.wait()
        yield run
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                with anyio.fail_after(DEADLINE_S):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()
        with anyio.fail_after(DEADLINE_S):
            await reader


def counting_server_argv(truth: Path, *extra: str) -> list[str]:
    """The counting server over streamable HTTP on a free port."""
    return [sys.executable, str(SERVER), f"--ground-truth={truth}", "--http", "127.0.0.1:0", *extra]


def counting_stdio_args(truth: Path, *extra: str) -> list[str]:
    """Proxy flags that start the counting server over stdio."""
    return ["--upstream-command", sys.executable, f"--upstream-arg={SERVER}",
            f"--upstream-arg=--ground-truth={truth}", *(f"--upstream-arg={e}" for e in extra)]  # fmt: skip


async def counting_upstream(
    stack: contextlib.AsyncExitStack, kind: str, truth: Path, *extra: str
) -> tuple[list[str], Running | None]:
    """Proxy flags for the counting server over `kind`: "http" starts it here (on `stack`; its
    process is returned), "stdio" leaves it to the proxy."""
    if kind == "http":
        server = await stack.enter_async_context(running(counting_server_argv(truth, *extra)))
        return ["--upstream-url", server.url], server
    return counting_stdio_args(truth, *extra), None


def executions(truth: Path, tool: str | None = None) -> list[dict[str, Any]]:
    """What the counting server really executed (its ground-truth file)."""
    import json

    if not truth.exists():
        return []
    rows = [json.loads(line) for line in truth.read_text().splitlines() if line.strip()]
    return [r for r in rows if "tool" in r and (tool is None or r["tool"] == tool)]


@contextlib.asynccontextmanager
async def mcp_client(
    *, url: str | None = None, argv: list[str] | None = None, modern: bool = False, **session: Any
) -> AsyncIterator[Any]:
    """An initialised SDK client session over HTTP (`url`) or stdio (`argv`).

    `modern`: speak 2026-07-28 (`server/discover`, `_meta` on every request) instead of
    `initialize`.
    """
    from mcp.client.session import ClientSession

    if url is not None:
        from mcp.client.streamable_http import streamable_http_client

        transport = streamable_http_client(url)
    else:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        assert argv is not None
        transport = stdio_client(StdioServerParameters(command=argv[0], args=argv[1:]))
    async with transport as (read, write), ClientSession(read, write, **session) as client:
        with anyio.fail_after(DEADLINE_S):
            if modern:
                await client.discover()
            else:
                await client.initialize()
        yield client


ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


_AGENT_INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "raw", "version": "1"}}}  # fmt: skip


class Agent:
    """A raw streamable HTTP client: what each POST answered, status, headers and messages."""

    def __init__(self, http: aiohttp.ClientSession, url: str) -> None:
        self.http, self.url, self.session = http, url, ""

    async def initialize(self, version: str = "2025-11-25") -> str:
        """Open a session; the protocol version the upstream agreed to."""
        init = {**_AGENT_INIT, "params": {**_AGENT_INIT["params"], "protocolVersion": version}}
        self.session = ""
        status, headers, messages = await self.post(init)
        assert status == 200
        self.session = headers["Mcp-Session-Id"]
        await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return messages[0]["result"]["protocolVersion"]

    async def post(self, message: dict[str, Any]) -> tuple[int, Any, list[dict[str, Any]]]:
        """POST one message; (status, headers, the JSON-RPC messages that came back)."""
        headers = {**ACCEPT, **({"Mcp-Session-Id": self.session} if self.session else {})}
        async with self.http.post(self.url, json=message, headers=headers) as resp:
            body = await resp.text()
            if resp.headers.get("Content-Type", "").startswith("text/event-stream"):
                data = [line[5:].strip() for line in body.splitlines() if line.startswith("data:")]
                messages = [json.loads(d) for d in data if d]
            else:
                messages = [json.loads(body)] if body.strip() else []
            return resp.status, resp.headers, messages

    async def book(self, rpc_id: int) -> tuple[int, Any, list[dict[str, Any]]]:
        call = {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call",
                "params": {"name": "create_booking", "arguments": BOOK}}  # fmt: skip
        return await self.post(call)

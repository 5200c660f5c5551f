"""One real MCP server process for many runs, one after the other (the T2 corpus).

A third-party stdio server takes 0.3 s (node) to 1 s (Python) of CPU to start; the corpus
runs hundreds of runs. Every server of the corpus answers a second `initialize` on the same
stdio stream as a new session, so one process serves run after run: each run hosts the real
`Proxy` in this process (`in_process_connection`, the same code as the subprocess) and its
upstream is a bridge to the shared process. The bridge gives each run's request ids a prefix
of its own and drops any answer that arrives for an earlier run, so a late answer can never
reach the wrong run. Between runs, `request` asks the server directly (tools/list,
resources/list), outside any run.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

DEADLINE_S = 60.0
_LIMIT = 64 * 1024 * 1024  # bytes of one line from the server


class SharedServer:
    """A stdio MCP server process serving runs one at a time."""

    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str] | None = None,
                 stderr: Path) -> None:  # fmt: skip
        self.argv, self.cwd, self.env, self.stderr_path = argv, cwd, env or {}, stderr
        self.proc: asyncio.subprocess.Process | None = None
        self._pump: asyncio.Task[None] | None = None
        self._run = 0  # the run being served (0: none)
        self._to_run: asyncio.Queue[dict[str, Any] | None] | None = None
        self._ids: dict[str, Any] = {}  # a run's prefixed request id -> its own id
        self._direct: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._numbers = itertools.count(1)
        self.stale = 0  # answers that came after their run had ended (dropped)

    async def __aenter__(self) -> SharedServer:
        with self.stderr_path.open("wb") as err:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv, cwd=self.cwd, env={**os.environ, **self.env},
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=err,
                limit=_LIMIT, start_new_session=True,
            )  # fmt: skip
        self._pump = asyncio.create_task(self._read())
        await self.request("initialize", {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "corpus", "version": "1"},
        })  # fmt: skip
        await self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self

    async def __aexit__(self, *exc: Any) -> None:
        proc = self.proc
        if proc is not None and proc.returncode is None:
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), 5)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, 9)
                await proc.wait()
        if self._pump is not None:
            await self._pump

    async def _send(self, message: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        await self.proc.stdin.drain()

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A request of the corpus itself, outside any run; the server's answer."""
        key = f"corpus:{next(self._numbers)}"
        answer = asyncio.get_running_loop().create_future()
        self._direct[key] = answer
        await self._send({"jsonrpc": "2.0", "id": key, "method": method, "params": params or {}})
        return await asyncio.wait_for(answer, DEADLINE_S)

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            try:
                message = json.loads(line)
            except ValueError:
                continue  # a server's stray output is no message
            if not isinstance(message, dict):
                continue
            rpc_id = message.get("id")
            if "method" not in message and isinstance(rpc_id, str):
                if rpc_id in self._direct:
                    self._direct.pop(rpc_id).set_result(message)
                    continue
                if rpc_id in self._ids:
                    message["id"] = self._ids.pop(rpc_id)
                elif rpc_id.startswith("run"):
                    self.stale += 1  # an earlier run's answer: that run is gone
                    continue
            if self._to_run is not None:
                await self._to_run.put(message)
        if self._to_run is not None:
            await self._to_run.put(None)

    async def serve(self, read: Any, write: Any) -> None:
        """One run's upstream: the proxy's messages to the process, its answers back."""
        import mcp_types as types
        from mcp.shared.message import SessionMessage

        assert self._to_run is None, "the shared server serves one run at a time"
        run = self._run = self._run + 1
        self._to_run = queue = asyncio.Queue()

        async def answers() -> None:
            while (message := await queue.get()) is not None:
                await write.send(SessionMessage(types.jsonrpc_message_adapter.validate_python(
                    message, by_name=False)))  # fmt: skip

        back = asyncio.create_task(answers())
        try:
            async for item in read:
                if isinstance(item, Exception):
                    continue
                message = json.loads(item.message.model_dump_json(by_alias=True,
                                                                  exclude_unset=True))  # fmt: skip
                if "method" in message and "id" in message:
                    own = f"run{run}:{json.dumps(message['id'])}"
                    self._ids[own] = message["id"]
                    message["id"] = own
                await self._send(message)
        finally:
            self._to_run = None
            back.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await back
            self._ids = {k: v for k, v in self._ids.items() if not k.startswith(f"run{run}:")}

    def connect(self) -> Any:
        """`execute_run(..., connect=...)`: the proxy in process in front of this server."""
        from runner.execute.connect import in_process_connection

        return functools.partial(in_process_connection, upstream=self.serve)


@contextlib.asynccontextmanager
async def shared(argv: list[str], folder: Path, **env: str) -> AsyncIterator[SharedServer]:
    """A started SharedServer running in `folder` (its stderr in folder/server.stderr)."""
    async with SharedServer(argv, cwd=folder, env=env, stderr=folder / "server.stderr") as server:
        yield server

"""Helpers of the differential transparency test (X3, X9, X13): a raw JSON-RPC line client and
the record of both ends of a conversation.

The client writes the bytes itself (no SDK between the test and the wire), so the conversation
sent is the same byte for byte whether it goes to a server directly or through the proxy. A
recording relay (tests/support/servers/stdio_tap.py) in front of the server keeps what the server
really received and sent, in both runs at the same place of the wire.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from harness.wire.transport import StreamLineReader, StreamLineWriter
from tests.support import launcher
from tests.support.linetap import READ_LIMIT
from tests.support.paths import SERVERS

TAP = SERVERS / "stdio_tap.py"
WAIT_S = 30.0  # any single wait for a message; far above what the slowest step needs
Found = Callable[[dict[str, Any]], bool]


def tapped(record: Path, server: list[str]) -> list[str]:
    """argv: `server` behind the recording relay, which writes RECORD.in and RECORD.out."""
    return [sys.executable, str(TAP), str(record), "--", *server]


def through_proxy(bin_path: Path, upstream: list[str], report: Path) -> list[str]:
    """argv: `agent-harness proxy` in front of `upstream`, no scenario, no audit tools (X3)."""
    return [
        str(bin_path), "proxy", "--audit-tools", "off", "--report-file", str(report),
        f"--upstream-command={upstream[0]}", *(f"--upstream-arg={a}" for a in upstream[1:]),
    ]  # fmt: skip


@dataclass
class RawClient:
    """One stdio process spoken to in JSON-RPC lines; every line both ways is kept as bytes."""

    proc: asyncio.subprocess.Process
    sent: list[bytes] = field(default_factory=list)
    received: list[bytes] = field(default_factory=list)
    _taken: set[int] = field(default_factory=set)
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._writer = StreamLineWriter(self.proc.stdin)
        self._reader = StreamLineReader(self.proc.stdout, READ_LIMIT)
        self._reading = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        while (line := await self._reader.read_line()) is not None:
            self.received.append(line)
            self._arrived.set()
        self._arrived.set()

    async def send(self, body: dict[str, Any]) -> None:
        line = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
        self.sent.append(line)
        await self._writer.write_line(line)

    async def take(self, found: Found) -> dict[str, Any]:
        """The first received message not taken before for which `found` holds (waits)."""
        with anyio.fail_after(WAIT_S):
            while True:
                for index, line in enumerate(self.received):
                    if index not in self._taken and found(message := json.loads(line)):
                        self._taken.add(index)
                        return message
                if self._reading.done():
                    raise AssertionError("the server side closed before the message came")
                self._arrived.clear()
                await self._arrived.wait()

    async def answer_of(self, rpc_id: Any) -> dict[str, Any]:
        return await self.take(lambda m: "method" not in m and m.get("id") == rpc_id)

    async def request(self, rpc_id: Any, method: str, params: dict[str, Any] | None = None):
        """Send a request and wait for its answer."""
        await self.notify(method, params, rpc_id=rpc_id)
        return await self.answer_of(rpc_id)

    async def notify(
        self, method: str, params: dict[str, Any] | None = None, *, rpc_id: Any = None
    ) -> None:
        body: dict[str, Any] = {"jsonrpc": "2.0"}
        if rpc_id is not None:
            body["id"] = rpc_id
        body["method"] = method
        if params is not None:
            body["params"] = params
        await self.send(body)

    async def server_request(self, method: str) -> dict[str, Any]:
        """The next request the server sent the client (sampling, elicitation, roots)."""
        return await self.take(lambda m: m.get("method") == method and "id" in m)

    async def reply(self, request: dict[str, Any], result: dict[str, Any]) -> None:
        await self.send({"jsonrpc": "2.0", "id": request["id"], "result": result})

    async def close(self, terminate: bool) -> int:
        """End the conversation: EOF on the other side's input, then its exit code.

        With `terminate` a SIGTERM follows at once, as a proxy does to its upstream after the
        EOF (X6): a server with timers of its own (server-everything's task store) does not
        exit at EOF.
        """
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        if terminate:
            self.proc.terminate()
        with anyio.fail_after(WAIT_S):
            await self._reading
            return await self.proc.wait()


async def spawn(argv: list[str], stderr: Path, cwd: Path) -> RawClient:
    with stderr.open("ab") as err:
        proc = await launcher.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=err,
            limit=READ_LIMIT, cwd=cwd,
        )  # fmt: skip
    return RawClient(proc)


def lines_of(path: Path) -> list[bytes]:
    """The lines of a tap record, without their line ending."""
    return [line.rstrip(b"\n") for line in path.read_bytes().splitlines(keepends=True)]


def own_ids(lines: list[bytes]) -> set[Any]:
    """Ids of the requests the proxy itself sent (C7: its own tools/list, named agent-harness-)."""
    ids = set()
    for line in lines:
        message = json.loads(line)
        rpc_id = message.get("id") if isinstance(message, dict) else None
        if isinstance(rpc_id, str) and rpc_id.startswith("agent-harness-") and "method" in message:
            ids.add(rpc_id)
    return ids


def without(lines: list[bytes], ids: set[Any]) -> list[bytes]:
    """`lines` less the requests with those ids and the answers to them."""
    kept = []
    for line in lines:
        message = json.loads(line)
        if not (isinstance(message, dict) and message.get("id") in ids):
            kept.append(line)
    return kept


class Normaliser:
    """Replaces the values a server itself varies from run to run, the same way in every line.

    Each pattern is one value the server makes up anew in every run; nothing else is touched,
    so everything else must match byte for byte.
    """

    PATTERNS = (
        # Random UUIDs: elicitation ids (server-everything's trigger-url-elicitation uses
        # randomUUID). The same value gets the same placeholder wherever it occurs.
        ("uuid", rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"),
        # Task ids: 16 random bytes in hex (the SDK's InMemoryTaskStore). The same id gets the
        # same placeholder wherever it occurs, so a client that echoes a task id back in
        # tasks/result must echo the one the server gave in this run.
        ("task", rb"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])"),
        # Wall-clock timestamps of a task (createdAt, lastUpdatedAt): the time of the run.
        # All get one placeholder: whether two of them fall into the same millisecond is
        # chance too.
        ("time", rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z"),
    )
    UNNUMBERED = frozenset({"time"})

    def __init__(self) -> None:
        self.seen: dict[tuple[str, bytes], bytes] = {}

    def __call__(self, line: bytes) -> bytes:
        for name, pattern in self.PATTERNS:
            line = re.sub(pattern, lambda m, n=name: self._placeholder(n, m.group(0)), line)
        return line

    def _placeholder(self, name: str, value: bytes) -> bytes:
        if name in self.UNNUMBERED:
            return f"<{name}>".encode()
        key = (name, value)
        if key not in self.seen:
            number = sum(1 for n, _ in self.seen if n == name) + 1
            self.seen[key] = f"<{name}-{number}>".encode()
        return self.seen[key]

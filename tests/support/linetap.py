"""Test helpers: keep every JSON-RPC line that passed a point and wait for a given message."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import anyio

from harness.wire.transport import StreamLineReader

Found = Callable[[dict[str, Any]], bool]
READ_LIMIT = 64 * 1024 * 1024  # our side of a proxy's stdout: never the bottleneck


class LineTap:
    """Every line seen so far, and a wait for the first message that matches."""

    def __init__(self, deadline_s: float) -> None:
        self.lines: list[bytes] = []
        self.deadline_s = deadline_s
        self._new_line = asyncio.Event()

    def record(self, line: bytes) -> None:
        self.lines.append(line)
        self._new_line.set()

    async def wait_for(self, found: Found) -> dict[str, Any]:
        """The first message (already seen or still to come) for which `found` is true."""
        seen = 0
        with anyio.fail_after(self.deadline_s):
            while True:
                for line in self.lines[seen:]:
                    message = json.loads(line)
                    if found(message):
                        return message
                seen = len(self.lines)
                self._new_line = asyncio.Event()
                await self._new_line.wait()

    def messages(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines]


class TapReader(LineTap):
    """A line reader that also keeps every line it read (what the client really got)."""

    def __init__(self, inner: StreamLineReader, deadline_s: float) -> None:
        super().__init__(deadline_s)
        self.inner = inner

    async def read_line(self) -> bytes | None:
        line = await self.inner.read_line()
        if line is not None:
            self.record(line)
        return line

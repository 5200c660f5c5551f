"""Answers to a JSON-RPC batch, gathered and sent back to the client as one batch (X10)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

Reply = Callable[[bytes], Awaitable[None]]  # where the answer to one request goes


class BatchReply:
    """Collects the answers to one batch's requests; sends them as one array when complete.

    `expect()` is called once per element that will be answered, while the batch is being
    taken apart; answers may arrive before that is done, so nothing is sent before `seal()`.
    A batch of notifications only gets no answer at all (JSON-RPC 2.0).
    """

    def __init__(self, send: Reply) -> None:
        self._send = send
        self._answers: list[bytes] = []
        self._expected = 0
        self._sealed = False
        self._sent = False

    def expect(self) -> None:
        self._expected += 1

    async def add(self, line: bytes) -> None:
        self._answers.append(line)
        await self._flush()

    async def seal(self) -> None:
        self._sealed = True
        await self._flush()

    async def _flush(self) -> None:
        if self._sent or not self._sealed or len(self._answers) < self._expected:
            return
        self._sent = True
        if self._answers:
            await self._send(b"[" + b",".join(self._answers) + b"]")

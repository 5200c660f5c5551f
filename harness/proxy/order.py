"""The order of the upstream's messages on their way to the client (X9).

Most upstream messages are passed on at once by the upstream loop, but an answer to a judged
`tools/call` (and a task's status or result, X12) is sent by a task of its own after some
bookkeeping, so a message the upstream sent after it could overtake it: a notification
before the answer it followed, a task's status before the task was created. Each message
handed to such a task takes a `Turn`; a message that comes later waits for the turns before
it, and is sent at once when there are none (the common case costs nothing).
"""

from __future__ import annotations

import asyncio
import contextlib

from harness.proxy.batch import Reply


class Turn:
    """One upstream message's place in the order to the client."""

    def __init__(self, before: asyncio.Future[None] | None) -> None:
        self.before = before
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wrap(self, reply: Reply) -> InTurn:
        """`reply`, sent after the messages before this one; the turn ends once it is sent."""
        return InTurn(self, reply)

    def release(self) -> None:
        """This message is sent or will not be: the next one may go once the earlier ones
        went (a turn ended early never lets a later message overtake an earlier one)."""
        if self.done.done():
            return
        if self.before is None or self.before.done():
            self.done.set_result(None)
        else:
            self.before.add_done_callback(lambda _: self.release())


class InTurn:
    """A reply that waits for the turns before its own, and ends its turn when sent."""

    def __init__(self, turn: Turn, reply: Reply) -> None:
        self.turn = turn
        self.reply = reply

    async def __call__(self, line: bytes) -> None:
        before = self.turn.before
        if before is not None and not before.done():
            await asyncio.shield(before)
        try:
            await self.reply(line)
        finally:
            self.turn.release()

    def release(self) -> None:
        """Let later messages go before this reply (it is the proxy's own, sent later)."""
        self.turn.release()


# V11: bytes of messages waiting for their turn, at most; past it the reader of the upstream
# waits (up to --upstream-timeout, so that a turn that needs the upstream cannot deadlock it).
WAITING_BYTES = 4 * 1024 * 1024


class Order:
    """The turns still open in one session, as a chain."""

    def __init__(self) -> None:
        self._tail: asyncio.Future[None] | None = None
        self.waiting = 0  # bytes of messages handed to tasks that wait for their turn
        self._room = asyncio.Event()
        self._room.set()

    def hold(self, size: int) -> None:
        self.waiting += size
        if self.waiting > WAITING_BYTES:
            self._room.clear()

    def release(self, size: int) -> None:
        self.waiting -= size
        if self.waiting <= WAITING_BYTES:
            self._room.set()

    async def room(self, timeout_s: float) -> None:
        """Until the messages waiting for their turn hold no more than WAITING_BYTES."""
        if not self._room.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._room.wait(), timeout_s)

    def clear(self) -> bool:
        """No message handed over earlier is still waiting to be sent."""
        return self._tail is None or self._tail.done()

    def turn(self) -> Turn:
        """The next place in the order."""
        turn = Turn(None if self.clear() else self._tail)
        self._tail = turn.done
        return turn

"""What the router and its concerns share: the session's requests in flight, by id.

The router (router.py) reads both streams and routes each message; call delivery (calls.py),
the task book (tasks.py), the listing (listing.py) and the refusals (refusals.py) each do one
job and are handed only what they need. What more than one of them must see lives here, and
only that: which ids are taken by what, who waits for which answer, and whether the upstream
and the event log can still be used.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from harness.base.errors import ReportFileError
from harness.proxy.batch import Reply
from harness.proxy.messages import Message, UpstreamGone
from harness.proxy.order import Turn
from harness.session import Ticket

Key = tuple[str, Any]  # a JSON-RPC id as a dict key (messages.id_key)
# What the router lends its concerns.
Spawn = Callable[[Awaitable[None]], asyncio.Task[None]]  # a task the router ends with it
Ask = Callable[[str, dict[str, Any]], Awaitable[Message]]  # a request of the proxy's own


class Flight:
    """The requests of one session that are in flight, and what became of its two peers."""

    def __init__(self) -> None:
        # Answers awaited from the upstream: judged calls and the proxy's own requests.
        self.pending: dict[Key, asyncio.Future[Message]] = {}
        self.calls: set[Key] = set()  # tools/call ids taken and not yet answered (X10)
        self.call_tasks: dict[Key, asyncio.Task[None]] = {}  # each open call's handling (X16)
        # Client requests passed through as they came: id and where their answer goes.
        self.forwarded: dict[Key, tuple[Any, Reply]] = {}
        self.cancelled: set[Key] = set()  # ids the client cancelled (X15)
        # E5: calls answered with a timeout whose late answer is still recorded (their ticket;
        # None when only the id stays taken)
        self.abandoned: dict[Key, Ticket | None] = {}
        self.turns: dict[Key, Turn] = {}  # X9: a call's answer, handed to its task in its place
        self.holding: dict[Key, asyncio.Event] = {}  # F9: set when the held call is cancelled
        self.settled = asyncio.Event()  # a request in flight was answered or given up
        self.call_ended = asyncio.Event()  # a call ended or was cancelled: maybe room (X16)
        self.upstream_gone: UpstreamGone | None = None
        self.unrecordable: ReportFileError | None = None  # the event log cannot be written
        self._token = secrets.token_hex(4)
        self._own_ids = 0

    def id_in_use(self, key: Key) -> bool:
        """X10: an id that a request in flight (or its late answer) still holds."""
        return (
            key in self.calls
            or key in self.forwarded
            or key in self.abandoned
            or key in self.pending
        )

    def own_id(self, prefix: str) -> str:
        """A fresh id of the proxy's own (a request, a task), unlike any a client would use."""
        self._own_ids += 1
        return f"{prefix}{self._token}-{self._own_ids}"

    def waited_for(self) -> tuple[bool, bool]:
        """Whether a call, and whether a request passed through, is open that the client did
        not cancel: what the end of a session waits for (X6, X15)."""
        cancelled = self.cancelled
        calls = any(k not in cancelled for k in self.call_tasks)
        passed = any(k not in cancelled for k in self.forwarded)
        return calls, passed

"""A lane: one agent session over HTTP, with its own router and its own upstream connection.

Each `initialize` (2025-06-18, 2025-11-25) opens a lane with a new `Mcp-Session-Id`; every
2026-07-28 request, having no session, goes through one shared lane. All lanes of a proxy feed
the same judged session (one run, one report), so a write repeated in a new session after a
fault is judged like any other repeat.

The router writes lines to the lane as it would to stdout; the lane decides which HTTP answer
each goes to. A response goes to the POST that carried its request. A message from an HTTP
upstream goes to the stream of the request it arrived for. Otherwise (a stdio upstream cannot
say) progress goes by its token, a listen stream's notifications by their subscription id, list
changes to the session's GET stream, and anything else to the one request still open, or to
the GET stream when there are several or none.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from harness.wire.http.ids import IdScope
from harness.wire.http.lines import LineQueue, has_related, id_key, peek, related_of, settle
from harness.wire.http.streams import UNREAD, Stream
from harness.wire.transport import StreamClosed

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
BACKLOG_BYTES = 4 * 1024 * 1024  # V11: messages kept for a GET stream not open yet (newest)
INBOX_BYTES = 4 * 1024 * 1024  # V11: the agent's messages read ahead of the router, at most
_UNRELATED = frozenset(
    {
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
        "notifications/resources/updated",
    }
)


class Lane:
    """One agent session: its streams, and the line pair its router reads and writes."""

    settles_receipts = True  # E5: it says whether each answer reached the agent (lines.settle)

    def __init__(self, session_id: str | None) -> None:
        self.session_id = session_id
        self.modern = session_id is None
        self.scope = IdScope() if self.modern else None  # V12: ids scoped per HTTP request
        self.version: str | None = None
        self.inbox = LineQueue(max_bytes=INBOX_BYTES)  # the router's client_in (V11)
        self.streams: dict[tuple[str, Any], Stream] = {}
        self.by_stream_id: dict[str, Stream] = {}
        self.standalone: Stream | None = None
        self.backlog: deque[bytes] = deque()
        self.backlog_bytes = 0
        self.initialize_id: tuple[str, Any] | None = None
        self._progress: dict[tuple[str, Any], Stream] = {}
        self._server_requests: dict[tuple[str, Any], Stream] = {}
        self._unread_ids: dict[tuple[str, Any], str] = {}  # requests whose stream was not read
        self.closed = False
        self.busy = 0  # V10: requests of this session in progress (a held stream counts)
        self.last_active = time.monotonic()  # V10: when the last of them ended
        self.task: asyncio.Task[Any] | None = None
        # V10/V11: a limit met, said once per condition (the listener's Conditions.hit)
        self.warn: Callable[[str, str], None] = lambda name, line: None
        self.upstream: Any = None

    # -- agent -> router ---------------------------------------------------------------------

    def open(self, stream: Stream, messages: list[Any]) -> None:
        """Register a POST's stream for its requests (and their progress tokens)."""
        self.by_stream_id[stream.id] = stream
        for message in messages:
            if not isinstance(message, dict) or "id" not in message or "method" not in message:
                continue
            self.streams[id_key(message["id"])] = stream
            params = message.get("params")
            meta = params.get("_meta") if isinstance(params, dict) else None
            token = meta.get("progressToken") if isinstance(meta, dict) else None
            if token is not None:
                self._progress[id_key(token)] = stream

    def send(self, line: bytes) -> None:
        """A message of the proxy's own for the router (a cancellation): never waits."""
        self.inbox.put(line)

    async def submit(self, line: bytes) -> None:
        """A message from the agent, on to the router; waits while the router is behind (V11:
        the agent's POST is answered later, its body is not piled up)."""
        await self.inbox.put_wait(line)

    def forget(self, stream: Stream) -> None:
        """A stream that is finished: drop what points at it."""
        self.by_stream_id.pop(stream.id, None)
        if self.scope is not None:
            self.scope.forget(stream.waiting)
        for table in (self.streams, self._progress, self._server_requests):
            for key in [k for k, s in table.items() if s is stream]:
                del table[key]
        if self.standalone is stream:
            self.standalone = None

    # -- router -> agent (the router's client_out) ---------------------------------------------

    async def write_line(self, line: bytes) -> None:
        if self.closed:
            raise StreamClosed("the agent's session ended")
        message = peek(line)
        first = message[0] if isinstance(message, list) and message else message
        if isinstance(first, dict) and "method" not in first and "id" in first:
            batch = message if isinstance(message, list) else [first]
            self._answer(line, first, [m for m in batch if isinstance(m, dict)])
            return
        target = self._target(line, first)
        if isinstance(first, dict) and "id" in first and target is not None:
            self._server_requests[id_key(first["id"])] = target
        if target is not None:
            target.put(line)
            if target.overflowed:
                self._unread(target)
        elif not self.modern:
            self._keep(line)  # for the GET stream when the agent opens one

    def _keep(self, line: bytes) -> None:
        """V11: the backlog keeps the newest BACKLOG_BYTES (the oldest go first)."""
        self.backlog.append(line)
        self.backlog_bytes += len(line)
        while self.backlog_bytes > BACKLOG_BYTES and len(self.backlog) > 1:
            self.backlog_bytes -= len(self.backlog.popleft())

    def _unread(self, stream: Stream) -> None:
        """V11: a stream closed because its agent did not read it: nothing goes there again."""
        for key in [k for k, s in self.streams.items() if s is stream]:
            self._unread_ids[key] = UNREAD  # E5: why its answer will not be delivered
        self.forget(stream)
        self.warn(
            "unread",
            "closed an agent's stream it did not read (4 MiB waiting): the answers on it count "
            "as not delivered; further ones are closed without a line",
        )

    async def close(self) -> None:
        """The router is done writing; nothing to close at the HTTP level here."""

    def _answer(self, line: bytes, message: dict[str, Any], batch: list[dict[str, Any]]) -> None:
        """A response, or a batch of them (X10: a batch's answers come back as one line, on
        the stream of the POST that carried the batch: every id of it is answered)."""
        key = id_key(message.get("id"))
        if key == self.initialize_id:
            result = message.get("result")
            if isinstance(result, dict) and isinstance(result.get("protocolVersion"), str):
                self.version = result["protocolVersion"]
        keys = [id_key(m.get("id")) for m in batch] or [key]
        streams = [s for s in (self.streams.pop(k, None) for k in keys) if s is not None]
        if self.scope is not None:
            line = self.scope.restore(line)  # V12: the agent's own id again
        unread = [why for why in (self._unread_ids.pop(k, None) for k in keys) if why]
        if not streams:  # E5: its stream is gone (closed, reset, cancelled, not read)
            settle(line, unread[0] if unread else "the agent's stream for it had closed")
            return
        stream = streams[0]
        stream.put(line, answers=keys)
        if stream.overflowed:
            self._unread(stream)

    def _target(self, line: bytes, message: Any) -> Stream | None:
        if has_related(line):
            related = related_of(line)
            stream = self.streams.get(id_key(related)) if related is not None else None
            return stream or self.standalone
        if not isinstance(message, dict):
            return self._only_open() or self.standalone
        method = message.get("method")
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        if method == "notifications/progress" and "progressToken" in params:
            return self._progress.get(id_key(params["progressToken"])) or self.standalone
        meta = params.get("_meta")
        if isinstance(meta, dict) and SUBSCRIPTION_ID in meta:
            return self.streams.get(id_key(meta[SUBSCRIPTION_ID]))
        if method == "notifications/cancelled" and "requestId" in params:
            return self._server_requests.get(id_key(params["requestId"])) or self.standalone
        if method in _UNRELATED:
            return self.standalone
        return self._only_open() or self.standalone

    def _only_open(self) -> Stream | None:
        """The one request stream still waiting for its answer, if exactly one is."""
        open_streams = {id(s): s for s in self.streams.values() if s.waiting and not s.listen}
        return next(iter(open_streams.values())) if len(open_streams) == 1 else None

    def attach_standalone(self, stream: Stream) -> None:
        """The agent's GET stream: it gets the backlog first."""
        self.standalone = stream
        while self.backlog:
            stream.put(self.backlog.popleft())
        self.backlog_bytes = 0

    def end(self) -> None:
        """The session is over: every open stream closes, the router sees EOF."""
        if self.closed:
            return
        self.closed = True
        self.inbox.put(None)
        self.inbox.unbound()  # a POST still waiting to hand its message over goes on
        for stream in {id(s): s for s in self.by_stream_id.values()}.values():
            stream.close()
        if self.standalone is not None:
            self.standalone.close()

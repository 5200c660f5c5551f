"""One HTTP answer to the agent: a JSON body, or an SSE stream that can be resumed.

A `Stream` is what the agent holds open for a POST (its requests' answers and what relates to
them) or for a GET (messages outside any request). Messages are queued on it as the router
writes them; whoever holds the HTTP response pumps them out. Under a handshake revision from
2025-11-25 on, SSE events are numbered and kept: when the agent's connection breaks, a GET
with `Last-Event-ID` replays what came after that id and carries on.

JSON or SSE: a response that comes before anything else goes back as plain JSON when the
upstream answered it that way (HTTP upstream), or under 2026-07-28 (its errors then carry
their HTTP status); otherwise the answer is an SSE stream, as the SDKs' servers do by default.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections import deque
from collections.abc import Mapping
from typing import Any

from aiohttp import web
from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS

from harness.wire.http import sse
from harness.wire.http.lines import id_key, peek, settle

REPLAY_EVENTS = 1000  # events kept per stream for an agent that reconnects, at most
REPLAY_BYTES = 4 * 1024 * 1024  # V11: and at most this much of them (the last one always)
STREAM_BYTES = 4 * 1024 * 1024  # V11: messages waiting for the agent to read, at most
UNREAD = "the agent did not read its stream (closed after 4 MiB unread)"
SSE_HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache, no-transform",
    "Connection": "keep-alive",
    "X-Accel-Buffering": "no",
}
_Item = tuple[bytes, bool] | None  # a message and whether it is the last one; None: closed


class Stream:
    """The answer channel of one POST (or of the session's GET).

    V11: what it holds is bounded whatever the agent's reading speed. At most `STREAM_BYTES`
    of messages wait to be written (one message always fits): an agent that does not read its
    stream gets it closed (its connection ends, it cannot be resumed) and every answer that
    was waiting on it, or comes for it later, is recorded as not delivered (E5). Events kept
    for resumption are the latest `REPLAY_BYTES` (at least the last one); resuming from an
    event older than those kept is refused (404).
    """

    def __init__(
        self,
        request_ids: set[tuple[str, Any]],
        *,
        sse_ok: bool = True,
        prime: bool = False,
        modern: bool = False,
        listen: bool = False,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.id = secrets.token_hex(8)
        self.waiting = set(request_ids)  # requests whose answer has not come yet
        self.is_batch = len(request_ids) > 1
        self.sse_ok = sse_ok
        self.prime = prime
        self.modern = modern
        self.listen = listen  # 2026-07-28 subscriptions/listen: stays open after its answer
        self.standalone = not request_ids and not listen
        self.headers = dict(headers or {})
        self.queue: asyncio.Queue[_Item] = asyncio.Queue()
        self.queued = 0  # bytes waiting to be written
        self.sent: deque[tuple[int, bytes]] = deque(maxlen=REPLAY_EVENTS)
        self.sent_bytes = 0
        self.count = 0
        self.done = False  # nothing more will come
        self.expired = False  # it answered that the session has expired
        self.attached = False  # an HTTP response is being written from it right now
        self.overflowed = False  # V11: closed because the agent did not read it
        self._transport: Any = None  # the attached connection

    def put(self, line: bytes, *, answers: list[tuple[str, Any]] | None = None) -> None:
        """Queue a message; `answers`: the requests it is the response (or batch) to."""
        for key in answers or ():
            self.waiting.discard(key)
        if self.done or self.overflowed:
            settle(line, "its stream had already ended")
            return
        if self.queued and self.queued + len(line) > STREAM_BYTES:
            self.overflow()
            settle(line, UNREAD)
            return
        self.queued += len(line)
        last = answers is not None and not self.waiting and not self.listen
        self.queue.put_nowait((line, last))

    def close(self) -> None:
        """No more messages: the lane ended, or the answer will never come. A connection that
        is attached still gets what is queued; otherwise that is not delivered."""
        self.waiting.clear()
        if not self.attached:
            self._drop_queued("the session ended before the agent read it")
            self._drop_sent("the session ended before the agent read it")
        self.queue.put_nowait(None)

    def overflow(self) -> None:
        """V11: the agent does not read: end the stream and its connection."""
        if self.overflowed:
            return
        self.overflowed = True
        self.waiting.clear()
        self._drop_queued(UNREAD)
        self._drop_sent(UNREAD)
        self.queue.put_nowait(None)
        if self._transport is not None:
            self._transport.abort()

    def _drop_queued(self, reason: str) -> None:
        while not self.queue.empty():
            item = self.queue.get_nowait()
            if item is not None:
                settle(item[0], reason)
        self.queued = 0

    def _drop_sent(self, reason: str) -> None:
        for _, line in self.sent:
            settle(line, reason)
        self.sent.clear()
        self.sent_bytes = 0

    async def _next(self) -> _Item:
        item = await self.queue.get()
        if item is not None:
            self.queued -= len(item[0])
        return item

    # -- answering the HTTP request ------------------------------------------------------------

    async def answer(self, request: web.BaseRequest) -> web.StreamResponse:
        """The HTTP answer: JSON when the response came first and should, else an SSE stream."""
        first = await self._next()
        if first is None:
            self.done = True
            return web.json_response(
                {"jsonrpc": "2.0", "id": None,
                 "error": {"code": -32000, "message": "the session ended before the answer came"}},
                status=503, headers=self.headers,
            )  # fmt: skip
        line, last = first
        if getattr(line, "stream_cut", False):
            return await self._cut(request)
        if not self.sse_ok:
            return await self._json_only(request, line, last)
        if last and not self.is_batch and self._prefers_json(line):
            self.done = True
            self.expired = getattr(line, "session_expired", False)
            extra = getattr(line, "http_headers", None) or {}
            response = web.Response(
                body=line, status=self._status(line), content_type="application/json",
                headers={**self.headers, **extra},
            )  # fmt: skip
            return await _written(request, response, [line])
        if last:  # the whole stream is known: one response, no chunked writes
            self.done = True
            body = sse.priming(f"{self.id}_0") if self.prime else b""
            response = web.Response(
                body=body + self._event(line), headers={**SSE_HEADERS, **self.headers}
            )
            return await _written(request, response, [line])
        response = await self._open(request)
        try:
            if self.prime:
                await response.write(sse.priming(f"{self.id}_0"))
            await self._send(response, line)
            await self.pump(response)
        except BaseException:
            self._broken(line)
            raise
        finally:
            self._detach()
        return response

    async def pump(self, response: web.StreamResponse) -> None:
        """Write queued messages until the last one; raises when the agent has left."""
        while (item := await self._next()) is not None:
            line, last = item
            if getattr(line, "stream_cut", False):
                break  # the stream ends without the answer, as the upstream's did
            try:
                await self._send(response, line)
            except BaseException:
                self._broken(line)
                raise
            if last:
                break
        self.done = True
        with contextlib.suppress(ConnectionError, RuntimeError):
            await response.write_eof()

    def _broken(self, line: bytes) -> None:
        """The agent's connection broke while `line` was written. A resumable stream keeps it
        (and what is queued) for a resume; any other stream lost it."""
        if not self.prime:
            settle(line, "the agent's connection broke")
            self._drop_queued("the agent's connection broke")

    async def resume(self, request: web.BaseRequest, after: int) -> web.StreamResponse:
        """A GET with Last-Event-ID: replay what came after `after`, then carry on."""
        oldest = self.sent[0][0] if self.sent else self.count + 1
        if after + 1 < oldest and after < self.count:  # V11: those events are no longer kept
            return web.json_response(
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message":
                 "Not Found: the events after that id are no longer kept"}},
                status=404,
            )  # fmt: skip
        response = await self._open(request)
        try:
            for number, data in list(self.sent):
                if number > after:
                    await response.write(sse.encode(data, event_id=f"{self.id}_{number}"))
                    settle(data)
            if self.done:
                with contextlib.suppress(ConnectionError, RuntimeError):
                    await response.write_eof()
            else:
                await self.pump(response)
        finally:
            self._detach()
        return response

    async def _cut(self, request: web.BaseRequest) -> web.StreamResponse:
        """An SSE stream that ends at once, without an answer."""
        response = await self._open(request)
        self._detach()
        self.done = True
        self.sent.clear()
        self.sent_bytes = 0
        with contextlib.suppress(ConnectionError, RuntimeError):
            await response.write_eof()
        return response

    async def _open(self, request: web.BaseRequest) -> web.StreamResponse:
        response = web.StreamResponse(status=200, headers={**SSE_HEADERS, **self.headers})
        await response.prepare(request)
        self.attached = True
        self._transport = request.transport
        return response

    def _detach(self) -> None:
        self.attached = False
        self._transport = None

    async def _json_only(
        self, request: web.BaseRequest, line: bytes, last: bool
    ) -> web.StreamResponse:
        """An agent that accepts only JSON: every answer of the POST in one body."""
        lines = [line]
        while not last:
            item = await self._next()
            if item is None:
                break
            line, last = item
            lines.append(line)
        self.done = True
        body = lines[-1] if not self.is_batch else b"[" + b",".join(lines) + b"]"
        response = web.Response(
            body=body, status=self._status(lines[-1]), content_type="application/json",
            headers=self.headers,
        )  # fmt: skip
        return await _written(request, response, lines)

    async def _send(self, response: web.StreamResponse, line: bytes) -> None:
        await response.write(self._event(line))
        settle(line)  # written: delivered as far as the proxy can know

    def _event(self, line: bytes) -> bytes:
        """The SSE event for a message; numbered and kept for replay when resumable."""
        self.count += 1
        event_id = None
        if self.prime:
            event_id = f"{self.id}_{self.count}"
            self.sent.append((self.count, line))
            self.sent_bytes += len(line)
            while self.sent_bytes > REPLAY_BYTES and len(self.sent) > 1:  # V11
                _, old = self.sent.popleft()
                self.sent_bytes -= len(old)
        return sse.encode(line, event_id=event_id)

    def _prefers_json(self, line: bytes) -> bool:
        if (getattr(line, "http_status", None) or 0) >= 400:
            return True  # an HTTP error status: a plain answer, never a stream
        kind = getattr(line, "content_type", None)
        return kind == "json" if kind is not None else self.modern

    def _status(self, line: bytes) -> int:
        status = getattr(line, "http_status", None)
        if status is not None:
            return status
        if self.modern:  # 2026-07-28: some JSON-RPC errors have their own HTTP status
            message = peek(line)
            error = message.get("error") if isinstance(message, dict) else None
            code = error.get("code") if isinstance(error, dict) else None
            if isinstance(code, int):
                return ERROR_CODE_HTTP_STATUS.get(code, 200)
        return 200


async def _written(
    request: web.BaseRequest, response: web.Response, lines: list[bytes]
) -> web.Response:
    """Write a whole answer now, so that whether it reached the agent is known (E5)."""
    try:
        await response.prepare(request)
        await response.write_eof()
    except BaseException:
        for line in lines:
            settle(line, "the agent's connection broke")
        raise
    for line in lines:
        settle(line)
    return response


def request_ids(messages: list[Any]) -> set[tuple[str, Any]]:
    """The ids of the requests among `messages` (their answers go back on this POST)."""
    return {
        id_key(m["id"])
        for m in messages
        if isinstance(m, dict) and "method" in m and "id" in m and m["id"] is not None
    }

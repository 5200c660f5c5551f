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
from harness.wire.http.lines import id_key, peek

REPLAY_EVENTS = 1000  # events kept per stream for an agent that reconnects
SSE_HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache, no-transform",
    "Connection": "keep-alive",
    "X-Accel-Buffering": "no",
}
_Item = tuple[bytes, bool] | None  # a message and whether it is the last one; None: closed


class Stream:
    """The answer channel of one POST (or of the session's GET)."""

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
        self.sent: deque[tuple[int, bytes]] = deque(maxlen=REPLAY_EVENTS)
        self.count = 0
        self.done = False  # nothing more will come
        self.expired = False  # it answered that the session has expired
        self.attached = False  # an HTTP response is being written from it right now

    def put(self, line: bytes, *, answers: tuple[str, Any] | None = None) -> None:
        """Queue a message; `answers` is the request it is the response to."""
        if answers is not None:
            self.waiting.discard(answers)
        last = answers is not None and not self.waiting and not self.listen
        self.queue.put_nowait((line, last))

    def close(self) -> None:
        """No more messages: the lane ended, or the answer will never come."""
        self.waiting.clear()
        self.queue.put_nowait(None)

    # -- answering the HTTP request ------------------------------------------------------------

    async def answer(self, request: web.BaseRequest) -> web.StreamResponse:
        """The HTTP answer: JSON when the response came first and should, else an SSE stream."""
        first = await self.queue.get()
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
            return await self._json_only(line, last)
        if last and not self.is_batch and self._prefers_json(line):
            self.done = True
            self.expired = getattr(line, "session_expired", False)
            extra = getattr(line, "http_headers", None) or {}
            return web.Response(
                body=line, status=self._status(line), content_type="application/json",
                headers={**self.headers, **extra},
            )  # fmt: skip
        if last:  # the whole stream is known: one response, no chunked writes
            self.done = True
            body = sse.priming(f"{self.id}_0") if self.prime else b""
            return web.Response(body=body + self._event(line), headers={**SSE_HEADERS, **self.headers})
        response = await self._open(request)
        try:
            if self.prime:
                await response.write(sse.priming(f"{self.id}_0"))
            await self._send(response, line)
            await self.pump(response)
        finally:
            self.attached = False
        return response

    async def pump(self, response: web.StreamResponse) -> None:
        """Write queued messages until the last one; raises when the agent has left."""
        while (item := await self.queue.get()) is not None:
            line, last = item
            if getattr(line, "stream_cut", False):
                break  # the stream ends without the answer, as the upstream's did
            await self._send(response, line)
            if last:
                break
        self.done = True
        with contextlib.suppress(ConnectionError, RuntimeError):
            await response.write_eof()

    async def resume(self, request: web.BaseRequest, after: int) -> web.StreamResponse:
        """A GET with Last-Event-ID: replay what came after `after`, then carry on."""
        response = await self._open(request)
        try:
            for number, data in list(self.sent):
                if number > after:
                    await response.write(sse.encode(data, event_id=f"{self.id}_{number}"))
            if self.done:
                with contextlib.suppress(ConnectionError, RuntimeError):
                    await response.write_eof()
            else:
                await self.pump(response)
        finally:
            self.attached = False
        return response

    async def _cut(self, request: web.BaseRequest) -> web.StreamResponse:
        """An SSE stream that ends at once, without an answer."""
        response = await self._open(request)
        self.attached = False
        self.done = True
        self.sent.clear()
        with contextlib.suppress(ConnectionError, RuntimeError):
            await response.write_eof()
        return response

    async def _open(self, request: web.BaseRequest) -> web.StreamResponse:
        response = web.StreamResponse(status=200, headers={**SSE_HEADERS, **self.headers})
        await response.prepare(request)
        self.attached = True
        return response

    async def _json_only(self, line: bytes, last: bool) -> web.Response:
        """An agent that accepts only JSON: every answer of the POST in one body."""
        lines = [line]
        while not last:
            item = await self.queue.get()
            if item is None:
                break
            line, last = item
            lines.append(line)
        self.done = True
        body = lines[-1] if not self.is_batch else b"[" + b",".join(lines) + b"]"
        return web.Response(
            body=body, status=self._status(lines[-1]), content_type="application/json",
            headers=self.headers,
        )  # fmt: skip

    async def _send(self, response: web.StreamResponse, line: bytes) -> None:
        await response.write(self._event(line))

    def _event(self, line: bytes) -> bytes:
        """The SSE event for a message; numbered and kept for replay when resumable."""
        self.count += 1
        event_id = None
        if self.prime:
            event_id = f"{self.id}_{self.count}"
            self.sent.append((self.count, bytes(line)))
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


def request_ids(messages: list[Any]) -> set[tuple[str, Any]]:
    """The ids of the requests among `messages` (their answers go back on this POST)."""
    return {
        id_key(m["id"])
        for m in messages
        if isinstance(m, dict) and "method" in m and "id" in m and m["id"] is not None
    }

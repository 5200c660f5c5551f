"""`--listen HOST:PORT`: streamable HTTP for the agent at http://HOST:PORT/mcp (H1).

POST carries the agent's messages (a request's answer comes back as JSON or as an SSE stream,
a notification or a response gets `202`), GET opens the session's stream for messages outside
any request, DELETE ends the session. `initialize` (2025-06-18, 2025-11-25) opens a session:
an `Mcp-Session-Id` and a lane of its own (a router and a new upstream connection); every later
request must name it. A 2026-07-28 request has no session: its `MCP-Protocol-Version`,
`Mcp-Method` and `Mcp-Name` headers must match its body, and closing its stream cancels it.

Only local pages may talk to it: the `Host` of a request to a loopback address must be a
loopback name, and an `Origin`, when sent, must be a loopback origin or one allowed by
`--allowed-origin` (DNS rebinding). Bind to a loopback address unless you mean otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web
from mcp.shared.inbound import HEADER_MISMATCH, classify_inbound_request

from harness.base.errors import UpstreamError
from harness.wire.http import headers as h
from harness.wire.http.accept import Acceptor, Conditions
from harness.wire.http.lanes import Lane
from harness.wire.http.limits import ListenLimits
from harness.wire.http.lines import id_key, peek, tagged
from harness.wire.http.sse import one_line
from harness.wire.http.streams import Stream, request_ids

PATH = "/mcp"
_EVENT_NUMBER = re.compile(r"[0-9]{1,18}", re.ASCII)  # the proxy's own event numbers
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
StartLane = Callable[[Lane], Awaitable[None]]


def _error(status: int, code: int, text: str, rpc_id: Any = None, **headers: str) -> web.Response:
    body = {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": code, "message": text}}
    return web.json_response(body, status=status, headers=headers or None)


def is_loopback(host: str) -> bool:
    """A host name or address that only this machine can reach."""
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Listener:
    """The HTTP endpoint and its sessions."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        start_lane: StartLane,
        max_bytes: int,
        allowed_origins: tuple[str, ...] = (),
        limits: ListenLimits | None = None,
        log: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.host, self.port = host, port
        self._start_lane = start_lane
        self._max = max_bytes
        self.limits = limits or ListenLimits()
        self._conditions = Conditions(log)
        self._acceptor: Acceptor | None = None
        self._starting = 0  # sessions whose upstream is starting (they count against the cap)
        self._janitor: asyncio.Task[None] | None = None
        self._allowed_origins = {o.rstrip("/").lower() for o in allowed_origins}
        self._log = log
        self.lanes: dict[str, Lane] = {}
        self._modern: Lane | None = None
        self._modern_lock = asyncio.Lock()
        self._runner: web.AppRunner | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self.url = ""

    async def start(self) -> str:
        """Bind and serve; the URL the agent should use (the real port when 0 was asked)."""
        app = web.Application(client_max_size=self._max + 1, middlewares=[self._watch])
        app.router.add_route("POST", PATH, self._post)
        app.router.add_route("GET", PATH, self._get)
        app.router.add_route("DELETE", PATH, self._delete)
        self._runner = web.AppRunner(
            app, handler_cancellation=True, access_log=None,
            keepalive_timeout=self.limits.idle_timeout_s,
        )  # fmt: skip
        await self._runner.setup()
        assert self._runner.server is not None
        self._acceptor = Acceptor(
            self._runner.server,
            max_connections=self.limits.max_connections,
            header_timeout_s=self.limits.header_timeout_s,
            conditions=self._conditions,
        )
        port = self._acceptor.bind(self.host, self.port)
        self._acceptor.start()
        self._janitor = asyncio.create_task(self._expire_idle())
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{shown}:{port}{PATH}"
        return self.url

    async def stop(self) -> None:
        """End every session (their routers drain), then stop serving."""
        if self._janitor is not None:
            self._janitor.cancel()
        lanes = list(self.lanes.values()) + ([self._modern] if self._modern else [])
        await asyncio.gather(
            *(self._end(lane) for lane in lanes), *self._closing, return_exceptions=True
        )
        if self._acceptor is not None:
            await self._acceptor.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @web.middleware
    async def _watch(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """V10: a request's head arrived: its connection's header timer stops until it ends."""
        watched = self._acceptor.watched.get(request.transport) if self._acceptor else None
        if watched is not None:
            watched.request_began()
        try:
            return await handler(request)
        finally:
            if watched is not None:
                watched.request_ended()

    # -- sessions: the cap and idle expiry (V10) ---------------------------------------------

    def _session_count(self) -> int:
        modern = self._modern is not None and not self._modern.closed
        return sum(1 for lane in self.lanes.values() if not lane.closed) + self._starting + modern

    def _over_cap(self, rpc_id: Any) -> web.Response | None:
        cap = self.limits.max_sessions
        if self._session_count() < cap:
            self._conditions.clear("sessions", "new sessions are accepted again")
            return None
        self._conditions.hit(
            "sessions",
            f"the session cap is reached ({cap} sessions, --max-sessions): new sessions are "
            "answered 503 until one ends (DELETE, or idle for --session-idle-timeout)",
        )
        return _error(
            503, -32000,
            f"Service Unavailable: too many sessions ({cap}); end one with DELETE or try later",
            rpc_id, **{"Retry-After": "5"},
        )  # fmt: skip

    @contextlib.contextmanager
    def _using(self, lane: Lane) -> Iterator[None]:
        """A request of `lane` is in progress: it is not idle."""
        lane.busy += 1
        try:
            yield
        finally:
            lane.busy -= 1
            lane.last_active = time.monotonic()

    async def _expire_idle(self) -> None:
        """End the sessions without a request for --session-idle-timeout: their upstreams stop."""
        idle_s = self.limits.session_idle_s
        while True:
            await asyncio.sleep(max(0.05, min(idle_s / 4, 5.0)))
            now = time.monotonic()
            lanes = list(self.lanes.values()) + ([self._modern] if self._modern else [])
            idle = [
                lane for lane in lanes
                if not lane.closed and lane.busy == 0 and now - lane.last_active >= idle_s
            ]  # fmt: skip
            if not idle:
                continue
            await asyncio.gather(*(self._end(lane) for lane in idle), return_exceptions=True)
            self._log(
                f"ended {len(idle)} idle session{'s' if len(idle) > 1 else ''} (no request for "
                f"{idle_s:g} s, --session-idle-timeout); their upstreams stopped"
            )

    async def _end(self, lane: Lane) -> None:
        lane.end()
        if lane.session_id is not None:
            self.lanes.pop(lane.session_id, None)
        if lane.task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await lane.task

    # -- checks common to every method ----------------------------------------------------------

    def _refused(self, request: web.BaseRequest) -> web.Response | None:
        """DNS rebinding: a foreign Origin, or a foreign Host on a loopback listener."""
        origin = request.headers.get("Origin")
        if origin is not None:
            parts = urlsplit(origin)
            local = (
                is_loopback(self.host)
                and parts.hostname is not None
                and is_loopback(parts.hostname)
            )
            if not local and origin.rstrip("/").lower() not in self._allowed_origins:
                return _error(403, -32000, f"Forbidden: origin {origin!r} is not allowed")
        if is_loopback(self.host):
            host = urlsplit(f"//{request.headers.get('Host', '')}").hostname
            if host is None or not is_loopback(host):
                return _error(403, -32000, "Forbidden: Host is not a local name")
        return None

    @staticmethod
    def _accepts(request: web.BaseRequest) -> tuple[bool, bool]:
        accept = request.headers.get("Accept", "").lower()
        anything = "*/*" in accept
        return anything or "application/json" in accept, anything or "text/event-stream" in accept

    def _session(self, request: web.BaseRequest) -> tuple[Lane | None, web.Response | None]:
        """The lane a request names with Mcp-Session-Id, or the error to answer."""
        sid = request.headers.get(h.SESSION_HEADER)
        if sid is None:
            if h.is_modern(request.headers.get(h.VERSION_HEADER)):
                return None, web.Response(status=405, headers={"Allow": "POST"})
            return None, _error(400, -32000, "Bad Request: Mcp-Session-Id header is required")
        lane = self.lanes.get(sid)
        if lane is None or lane.closed:
            return None, _error(404, -32001, "Session not found")
        return lane, None

    # -- POST ----------------------------------------------------------------------------------

    async def _post(self, request: web.Request) -> web.StreamResponse:
        refused = self._refused(request)
        if refused is not None:
            return refused
        try:
            raw = await asyncio.wait_for(request.read(), self.limits.body_timeout_s)
        except TimeoutError:  # V10: a body that trickles in is not waited for
            self._conditions.hit(
                "body-timeout",
                f"closed a connection whose request body did not arrive within "
                f"{self.limits.body_timeout_s:g} s; further ones are closed without a line",
            )
            slow = _error(408, -32000, "Request Timeout: the body did not arrive in time")
            slow.force_close()
            return slow
        wants_json, wants_sse = self._accepts(request)
        if not wants_json or not wants_sse:
            return _error(
                406, -32000,
                "Not Acceptable: the client must accept application/json and text/event-stream",
            )  # fmt: skip
        if request.content_type != "application/json":
            return _error(415, -32000, "Unsupported Media Type: use application/json")
        body = one_line(raw)
        parsed = peek(body)
        if parsed is None:
            return _error(400, -32700, "Parse error")
        messages = parsed if isinstance(parsed, list) else [parsed]
        if not messages or not all(isinstance(m, dict) for m in messages):
            return _error(400, -32600, "Invalid Request: not a JSON-RPC message")
        if any(_untrackable(m) for m in messages):  # its answer could name no request
            return _error(400, -32600, "Invalid Request: a request id must be a string or a number")
        lane, refusal = await self._lane_for(request, messages)
        if refusal is not None:
            return refusal
        assert lane is not None
        with self._using(lane):
            return await self._post_to(lane, request, body, messages, wants_sse)

    async def _post_to(
        self,
        lane: Lane,
        request: web.Request,
        body: bytes,
        messages: list[dict[str, Any]],
        wants_sse: bool,
    ) -> web.StreamResponse:
        line = self._line(request, body)
        if lane.scope is not None:  # V12: a 2026-07-28 request's ids are its own
            scoped = lane.scope.scope(line, messages)
            if scoped is None:  # a cancellation of an id several agents are waiting on
                return web.Response(status=202)
            line, messages = scoped
        ids = request_ids(messages)
        session_headers = {"Mcp-Session-Id": lane.session_id} if lane.session_id else {}
        if not ids:
            await lane.submit(line)
            return web.Response(status=202, headers=session_headers)
        stream = Stream(
            ids,
            sse_ok=wants_sse,
            prime=not lane.modern
            and h.at_least(self._version(request, messages, lane), h.PRIMING_FROM),
            modern=lane.modern,
            listen=any(m.get("method") == "subscriptions/listen" for m in messages),
            headers=session_headers,
        )
        lane.open(stream, messages)
        try:
            await lane.submit(line)
            response = await stream.answer(request)
            if lane.version is None and lane.session_id is not None and not lane.modern:
                await self._end(lane)  # initialize failed: no session to keep
            elif stream.expired:  # F7: the id is unknown from now on; the agent starts anew
                lane.end()
                self._closing.add(task := asyncio.create_task(self._end(lane)))
                task.add_done_callback(self._closing.discard)
            return response
        except (asyncio.CancelledError, ConnectionError):
            if lane.modern and not lane.closed:
                for message in messages:  # 2026-07-28: closing the stream cancels the request
                    if id_key(message.get("id")) in stream.waiting:
                        lane.send(_cancel(message["id"]))
            if not stream.prime:
                lane.forget(stream)
            raise
        finally:
            if stream.done:
                lane.forget(stream)

    async def _lane_for(
        self, request: web.BaseRequest, messages: list[dict[str, Any]]
    ) -> tuple[Lane | None, web.Response | None]:
        initialize = [m for m in messages if m.get("method") == "initialize"]
        if initialize:
            if len(messages) > 1:
                return None, _error(400, -32600, "Invalid Request: initialize must be sent alone")
            return await self._open_session(initialize[0])
        if request.headers.get(h.SESSION_HEADER) is not None:
            lane, refusal = self._session(request)
            header = request.headers.get(h.VERSION_HEADER)
            if refusal is None and header is not None and not h.is_known(header):
                return None, _error(
                    400, -32000, f"Bad Request: unsupported protocol version {header!r}"
                )
            return lane, refusal
        if h.is_modern(request.headers.get(h.VERSION_HEADER)) or any(
            h.envelope_version(m) for m in messages
        ):
            mismatch = self._header_mismatch(request, messages)
            if mismatch is not None:
                return None, mismatch
            return await self._modern_lane(messages)
        return None, _error(400, -32000, "Bad Request: Mcp-Session-Id header is required")

    async def _open_session(
        self, message: dict[str, Any]
    ) -> tuple[Lane | None, web.Response | None]:
        over = self._over_cap(message.get("id"))
        if over is not None:
            return None, over
        lane = Lane(secrets.token_hex(16))
        lane.warn = self._conditions.hit
        lane.initialize_id = id_key(message.get("id"))
        refusal = await self._start(lane, message.get("id"))
        if refusal is not None:
            return None, refusal
        assert lane.session_id is not None
        self.lanes[lane.session_id] = lane
        return lane, None

    async def _start(self, lane: Lane, rpc_id: Any) -> web.Response | None:
        """Start a session's upstream; the answer to give when it could not start."""
        self._starting += 1
        try:
            await self._start_lane(lane)
        except (UpstreamError, OSError) as exc:
            cause = exc if isinstance(exc, OSError) else exc.__cause__
            if isinstance(cause, OSError) and cause.errno in (errno.EMFILE, errno.ENFILE):
                self._conditions.hit(
                    "descriptors",
                    "out of file descriptors: new sessions and connections are answered 503 "
                    "until some close",
                )
                return _error(503, -32000, "Service Unavailable: out of file descriptors", rpc_id)
            self._log(f"ERROR: {exc}")
            return _error(502, -32000, f"the upstream did not start: {exc}", rpc_id)
        finally:
            self._starting -= 1
        return None

    async def _modern_lane(
        self, messages: list[dict[str, Any]]
    ) -> tuple[Lane | None, web.Response | None]:
        async with self._modern_lock:
            if self._modern is None or self._modern.closed:
                rpc_id = next((m.get("id") for m in messages if "id" in m), None)
                over = self._over_cap(rpc_id)
                if over is not None:
                    return None, over
                lane = Lane(None)
                lane.warn = self._conditions.hit
                refusal = await self._start(lane, rpc_id)
                if refusal is not None:
                    return None, refusal
                self._modern = lane
            return self._modern, None

    @staticmethod
    def _header_mismatch(
        request: web.BaseRequest, messages: list[dict[str, Any]]
    ) -> web.Response | None:
        """2026-07-28: headers that disagree with the body are refused (HeaderMismatch)."""
        headers = {k.lower(): v for k, v in request.headers.items()}
        for message in messages:
            if "id" not in message or "method" not in message:
                continue
            verdict = classify_inbound_request(message, headers=headers)
            if getattr(verdict, "code", None) == HEADER_MISMATCH:
                return _error(400, HEADER_MISMATCH, verdict.message, message.get("id"))  # type: ignore[union-attr]
        return None

    @staticmethod
    def _version(
        request: web.BaseRequest, messages: list[dict[str, Any]], lane: Lane
    ) -> str | None:
        for message in messages:
            if message.get("method") == "initialize":
                params = message.get("params")
                version = params.get("protocolVersion") if isinstance(params, dict) else None
                return version if isinstance(version, str) else None
        return request.headers.get(h.VERSION_HEADER) or lane.version

    @staticmethod
    def _line(request: web.BaseRequest, body: bytes) -> bytes:
        """The body as a line, with the agent's MCP headers to send upstream as they came."""
        said = {k.lower(): v for k, v in request.headers.items() if h.is_mcp_header(k)}
        return tagged(body, mcp_headers=said)

    # -- GET and DELETE ------------------------------------------------------------------------

    async def _get(self, request: web.Request) -> web.StreamResponse:
        refused = self._refused(request)
        if refused is not None:
            return refused
        lane, refusal = self._session(request)
        if refusal is not None:
            return refusal
        assert lane is not None
        with self._using(lane):
            return await self._get_from(lane, request)

    async def _get_from(self, lane: Lane, request: web.Request) -> web.StreamResponse:
        if not self._accepts(request)[1]:
            return _error(406, -32000, "Not Acceptable: the client must accept text/event-stream")
        last = request.headers.get(h.LAST_EVENT_ID_HEADER)
        if last is not None:
            stream_id, _, number = last.rpartition("_")
            if not _EVENT_NUMBER.fullmatch(number):  # V14: "²" and 5,000 digits are no number
                return _error(400, -32000, "Bad Request: Last-Event-ID is not an event id")
            stream = lane.by_stream_id.get(stream_id)
            if stream is None or stream.attached:
                return _error(404, -32000, "Not Found: no stream to resume with that event id")
            return await stream.resume(request, int(number))
        if lane.standalone is not None and lane.standalone.attached:
            return _error(409, -32000, "Conflict: only one GET stream is allowed per session")
        stream = lane.standalone or Stream(
            set(),
            prime=h.at_least(lane.version, h.PRIMING_FROM),
            headers={"Mcp-Session-Id": lane.session_id or ""},
        )
        lane.by_stream_id[stream.id] = stream
        lane.attach_standalone(stream)
        return await stream.resume(request, after=stream.count)

    async def _delete(self, request: web.Request) -> web.StreamResponse:
        refused = self._refused(request)
        if refused is not None:
            return refused
        lane, refusal = self._session(request)
        if refusal is not None:
            return refusal
        assert lane is not None
        await self._end(lane)
        return web.Response(status=200)


def _untrackable(message: dict[str, Any]) -> bool:
    """A request whose id is an object, an array or a boolean: JSON-RPC answers it with id
    null, so no answer could be matched to it (X10)."""
    return "method" in message and isinstance(message.get("id"), (dict, list, bool))


def _cancel(rpc_id: Any) -> bytes:
    import json

    body = {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": rpc_id, "reason": "the client closed the response stream"},
    }
    return json.dumps(body, separators=(",", ":")).encode()

"""The upstream over streamable HTTP, as the line pair the proxy core reads and writes.

Every line the router writes becomes a POST: a request's answer (one JSON body, or an SSE
stream of related notifications and requests ending with the response) comes back as lines,
each tagged with the request it arrived for; a notification or a response gets `202`. The body
is the very line the agent sent (X9), and the answer's data is passed on as it came.

Handshake revisions (2025-06-18, 2025-11-25): the session id from `initialize` and the
negotiated `MCP-Protocol-Version` go on every later request; a GET stream carries what the
server sends outside any request; a response stream that breaks after an event id is resumed
with `Last-Event-ID` (that is the transport's own recovery, not a re-send: nothing is POSTed
twice); `DELETE` ends the session. 2026-07-28: no session; each request's headers mirror its
`_meta` version, method, name and `x-mcp-header` parameters; cancelling a request closes its
stream instead of POSTing `notifications/cancelled`.

A failed connection or an HTTP error fails that one message (the agent gets a JSON-RPC error,
which the judge counts as an unknown outcome); the next message tries again. Auth headers come
from flags or the environment and are never printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from harness.base.errors import UpstreamError
from harness.wire.http import headers as h
from harness.wire.http.client import PolicyClient, RedirectRefused, redact_url
from harness.wire.http.lines import HttpLine, LineQueue, id_key, peek, tagged
from harness.wire.http.sse import EventTooLarge, SseParser, one_line
from harness.wire.transport import MessageTooLarge

CONNECTION_CLOSED = -32000
INVALID_REQUEST = -32600
INTERNAL_ERROR = -32603
DEFAULT_RETRY_MS = 1000
RESUME_ATTEMPTS = 2  # consecutive failed reconnections before a stream is given up
CONNECT_TIMEOUT_S = 10.0
INBOX_BYTES = 4 * 1024 * 1024  # V11: upstream messages read ahead of the router, at most


class HttpUpstream:
    """An MCP server behind a streamable HTTP endpoint (H1)."""

    def __init__(
        self,
        url: str,
        auth: Mapping[str, str],
        *,
        max_bytes: int,
        log: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.url = url
        self._auth = dict(auth)
        self._max = max_bytes
        self._log = log
        # V11: a flooding upstream is read no faster than the proxy passes its messages on
        self._inbox = LineQueue(max_bytes=INBOX_BYTES)
        self.reader = self._inbox
        self.writer = self
        self.session_id: str | None = None
        self.version: str | None = None  # negotiated by initialize (handshake revisions)
        self.last_error: str | None = None
        self._params = h.ParamHeaders()
        self._posts: dict[tuple[str, Any], tuple[asyncio.Task[None], bool]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._get_started = False
        self._closed = False
        # A stdio agent cannot open a new session when the upstream forgets its own: the
        # proxy repeats the agent's initialize for it (H1). An HTTP agent gets the 404.
        self._handshake: dict[str, Any] | None = None
        self._agent_on_http = False
        self._session_ready = asyncio.Event()
        self._session_ready.set()
        self._renewals = 0
        # V9: every request goes through one redirect policy (client.py)
        self._http = PolicyClient(
            aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S),
                auto_decompress=True,
            ),
            log,
        )

    @classmethod
    async def start(
        cls,
        url: str,
        auth: Mapping[str, str],
        *,
        max_bytes: int,
        log: Callable[[str], None] = lambda line: None,
    ) -> HttpUpstream:
        """Check that the endpoint's host accepts connections (X8), then return the client."""
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            _, writer = await asyncio.wait_for(
                asyncio.open_connection(parts.hostname, port), CONNECT_TIMEOUT_S
            )
        except (OSError, TimeoutError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            raise UpstreamError(f"cannot reach upstream {redact_url(url)}: {reason}") from exc
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return cls(url, auth, max_bytes=max_bytes, log=log)

    # -- the LineWriter side: the router's lines become POSTs ---------------------------------

    async def write_line(self, line: bytes) -> None:
        """Send one message; a request's answer arrives later through `reader`."""
        if self._closed:
            return
        message = peek(line)
        if isinstance(message, dict) and "method" in message and "id" in message:
            self._spawn_request(line, message)
            return
        if isinstance(message, dict) and self._cancels_modern(message):
            return
        await self._post_other(line, message)
        if (
            isinstance(message, dict)
            and message.get("method") == "notifications/initialized"
            and self.session_id is not None
            and not self._get_started
        ):
            self._get_started = True
            self._spawn(self._get_stream())

    async def close(self) -> None:
        """Stop every stream, end the session with DELETE, and let the reader see EOF."""
        if self._closed:
            return
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.session_id is not None:
            with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
                async with self._http.request(
                    "DELETE",
                    self.url,
                    headers=self._base_headers(),
                    timeout=aiohttp.ClientTimeout(total=2),
                ):
                    pass
        await self._http.close()
        self._inbox.put(None)

    def describe_exit(self) -> str:
        """What went wrong last with the upstream, for stderr and the report (X5)."""
        detail = self.last_error or "closed the connection"
        return f"the upstream at {redact_url(self.url)}: {detail}"

    @property
    def returncode(self) -> int | None:
        return None

    # -- requests ------------------------------------------------------------------------------

    def _spawn(self, coro: Any) -> asyncio.Task[None]:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _spawn_request(self, line: bytes, message: dict[str, Any]) -> None:
        rpc_id = message["id"]
        if message.get("method") == "initialize":
            self._handshake = message
            self._agent_on_http = getattr(line, "mcp_headers", None) is not None
        key = id_key(rpc_id)
        modern = h.envelope_version(message) is not None
        task = self._spawn(self._post_request(line, message, rpc_id, key))
        previous = self._posts.get(key)
        if previous is not None:
            previous[0].cancel()  # a reused id: the old stream must not answer the new request
        self._posts[key] = (task, modern)

    def _cancels_modern(self, message: dict[str, Any]) -> bool:
        """2026-07-28 over HTTP: cancelling is closing the request's stream, not a POST."""
        if message.get("method") != "notifications/cancelled":
            return False
        params = message.get("params")
        request_id = params.get("requestId") if isinstance(params, dict) else None
        post = self._posts.get(id_key(request_id))
        if post is None or not post[1]:
            return False
        post[0].cancel()
        return True

    def _base_headers(self) -> dict[str, str]:
        out = {"Accept": "application/json, text/event-stream", **self._auth}
        if self.session_id is not None:
            out[h.SESSION_HEADER] = self.session_id
        if self.version is not None:
            out[h.VERSION_HEADER] = self.version
        return out

    def _headers_for(self, line: bytes, message: Any) -> dict[str, str]:
        said = getattr(line, "mcp_headers", None)
        if said is not None:  # an HTTP agent: its MCP headers exactly as it sent them
            out = {"Accept": "application/json, text/event-stream", **self._auth, **said}
            if self.session_id is not None and h.envelope_version(message) is None:
                out[h.SESSION_HEADER] = self.session_id
            return out
        if isinstance(message, dict) and message.get("method") == "initialize":
            return {"Accept": "application/json, text/event-stream", **self._auth}
        version = h.envelope_version(message)
        if version is None:
            return self._base_headers()
        out = {"Accept": "application/json, text/event-stream", **self._auth}
        out.update(h.request_metadata(message, version))
        if message.get("method") == "tools/call":
            out.update(self._params.for_call(message))
        return out

    async def _post_request(
        self, line: bytes, message: dict[str, Any], rpc_id: Any, key: tuple[str, Any]
    ) -> None:
        await self._session_ready.wait()
        headers = {**self._headers_for(line, message), "Content-Type": "application/json"}
        try:
            async with self._http.request(
                "POST", self.url, data=bytes(line), headers=headers
            ) as resp:
                await self._answer(resp, message, rpc_id)
        except RedirectRefused as exc:  # V9: said once by the client; the call fails here
            self.last_error = str(exc)
            self._error(rpc_id, INTERNAL_ERROR, str(exc))
        except (aiohttp.ClientError, OSError) as exc:
            self.last_error = f"{type(exc).__name__}: {exc}"
            self._error(rpc_id, CONNECTION_CLOSED, f"the upstream could not be reached ({exc})")
        except (EventTooLarge, MessageTooLarge) as exc:
            self._inbox.put(MessageTooLarge(str(exc)))
        finally:
            post = self._posts.get(key)
            if post is not None and post[0] is asyncio.current_task():
                del self._posts[key]

    async def _answer(
        self, resp: aiohttp.ClientResponse, message: dict[str, Any], rpc_id: Any
    ) -> None:
        method = message.get("method")
        if method == "initialize" and resp.status < 300:
            self.session_id = resp.headers.get(h.SESSION_HEADER) or self.session_id
        kind = resp.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if resp.status == 202:
            self._error(
                rpc_id, INVALID_REQUEST, "the upstream answered a request with 202 Accepted"
            )
            return
        if resp.status >= 400:
            await self._http_error(resp, kind, message, rpc_id)
            return
        if kind == "application/json":
            body = one_line(await self._read_all(resp))
            self._learn(method, body)
            await self._deliver(
                tagged(body, related=rpc_id, http_status=resp.status, content_type="json")
            )
        elif kind == "text/event-stream":
            await self._sse(resp, message, rpc_id)
        else:
            self._error(
                rpc_id, INVALID_REQUEST, f"the upstream answered with {kind or 'no'} content type"
            )

    async def _http_error(
        self, resp: aiohttp.ClientResponse, kind: str, message: dict[str, Any], rpc_id: Any
    ) -> None:
        status = resp.status
        body = one_line(await self._read_all(resp)) if kind == "application/json" else b""
        parsed = peek(body) if body else None
        if status == 404 and self.session_id is not None and h.envelope_version(message) is None:
            self.last_error = "the upstream ended the session (HTTP 404 for its session id)"
            self._log(f"WARNING: {self.describe_exit()}")
            if not self._agent_on_http and self._handshake is not None:
                self._spawn(self._renew_session(resp.request_info.headers.get(h.SESSION_HEADER)))
        if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
            if parsed.get("id") != rpc_id:  # a server that could not read the id says null
                parsed["id"] = rpc_id
                body = json.dumps(parsed, separators=(",", ":"), ensure_ascii=False).encode()
            await self._deliver(
                tagged(body, related=rpc_id, http_status=status, content_type="json")
            )
            return
        if status == 404 and self.session_id is not None and h.envelope_version(message) is None:
            self._error(rpc_id, INVALID_REQUEST, "Session terminated", status=404)
            return
        self.last_error = f"HTTP {status} {resp.reason or ''}".strip()
        self._error(
            rpc_id, INTERNAL_ERROR, f"the upstream answered {self.last_error}", status=status
        )

    async def _sse(
        self, resp: aiohttp.ClientResponse, message: dict[str, Any], rpc_id: Any
    ) -> None:
        parser = SseParser(self._max)
        if await self._relay(resp, parser, message, rpc_id):
            return
        failures = 0
        while parser.last_event_id is not None and failures < RESUME_ATTEMPTS:
            await asyncio.sleep((parser.retry_ms or DEFAULT_RETRY_MS) / 1000)
            headers = {**self._base_headers(), h.LAST_EVENT_ID_HEADER: parser.last_event_id}
            headers["Accept"] = "text/event-stream"
            try:
                async with self._http.request("GET", self.url, headers=headers) as again:
                    if again.status >= 400:
                        failures += 1
                        continue
                    failures = 0
                    if await self._relay(again, parser, message, rpc_id):
                        return
            except (aiohttp.ClientError, OSError):
                failures += 1
        self._error(
            rpc_id,
            CONNECTION_CLOSED,
            "the upstream closed the response stream without an answer",
            cut=True,
        )

    async def _relay(
        self, resp: aiohttp.ClientResponse, parser: SseParser, message: dict[str, Any], rpc_id: Any
    ) -> bool:
        """Pass a response stream's messages on; True once the request's answer came."""
        async for raw in self._lines(resp):
            event = parser.feed(raw)
            if event is None or not event.data.strip() or event.event != "message":
                continue
            data = one_line(event.data)
            parsed = peek(data)
            if (
                isinstance(parsed, dict)
                and "method" not in parsed
                and parsed.get("id") == rpc_id
                and ("result" in parsed or "error" in parsed)
            ):
                self._learn(message.get("method"), data, parsed)
                await self._deliver(
                    tagged(data, related=rpc_id, http_status=resp.status, content_type="sse")
                )
                return True
            await self._deliver(tagged(data, related=rpc_id))
        return False

    async def _renew_session(self, lost: str | None) -> None:
        """Open a new upstream session with the agent's own initialize (a stdio agent's).

        The request that met the 404 is not sent again: the agent got an error for it and
        decides. Later messages wait until the new session is there.
        """
        if lost is None or lost != self.session_id or not self._session_ready.is_set():
            return  # another request already renewed it, or is renewing it
        assert self._handshake is not None
        self._session_ready.clear()
        self._renewals += 1
        body = {**self._handshake, "id": f"agent-harness-renew-{self._renewals}"}
        try:
            async with self._http.request(
                "POST", self.url, data=json.dumps(body).encode(),
                headers={"Accept": "application/json, text/event-stream",
                         "Content-Type": "application/json", **self._auth},
            ) as resp:  # fmt: skip
                await resp.read()
                if resp.status >= 300 or h.SESSION_HEADER not in resp.headers:
                    self._log(f"WARNING: could not open a new upstream session: HTTP {resp.status}")
                    return
                self.session_id = resp.headers[h.SESSION_HEADER]
            notice = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            headers = {**self._base_headers(), "Content-Type": "application/json"}
            async with self._http.request(
                "POST", self.url, data=json.dumps(notice).encode(), headers=headers
            ):
                pass
            self._log("the upstream forgot its session: opened a new one with the agent's "
                      "initialize (the call that met the 404 was not sent again)")  # fmt: skip
            if self._get_started:
                self._spawn(self._get_stream())
        except (aiohttp.ClientError, OSError) as exc:
            self._log(f"WARNING: could not open a new upstream session: {exc}")
        finally:
            self._session_ready.set()

    # -- messages that are not requests --------------------------------------------------------

    async def _post_other(self, line: bytes, message: Any) -> None:
        await self._session_ready.wait()
        headers = {**self._headers_for(line, message), "Content-Type": "application/json"}
        try:
            async with self._http.request(
                "POST", self.url, data=bytes(line), headers=headers
            ) as resp:
                if resp.status >= 400:
                    self.last_error = f"HTTP {resp.status} {resp.reason or ''}".strip()
                    self._log(f"WARNING: the upstream refused a message: {self.last_error}")
        except RedirectRefused as exc:  # V9: the client said so once
            self.last_error = str(exc)
        except (aiohttp.ClientError, OSError) as exc:
            self.last_error = f"{type(exc).__name__}: {exc}"
            self._log(f"WARNING: could not send a message to the upstream: {exc}")

    async def _get_stream(self) -> None:
        """Handshake revisions: what the server sends outside any request, resumed on breaks."""
        parser = SseParser(self._max)
        failures = 0
        while not self._closed and failures < RESUME_ATTEMPTS:
            headers = {**self._base_headers(), "Accept": "text/event-stream"}
            if parser.last_event_id is not None:
                headers[h.LAST_EVENT_ID_HEADER] = parser.last_event_id
            try:
                async with self._http.request("GET", self.url, headers=headers) as resp:
                    if resp.status == 405 or resp.status >= 400:
                        return  # the server offers no such stream
                    failures = 0
                    async for raw in self._lines(resp):
                        event = parser.feed(raw)
                        if event is not None and event.data.strip() and event.event == "message":
                            await self._deliver(tagged(one_line(event.data), related=None))
            except (aiohttp.ClientError, OSError):
                failures += 1
            except (EventTooLarge, MessageTooLarge) as exc:
                self._inbox.put(MessageTooLarge(str(exc)))
                return
            await asyncio.sleep((parser.retry_ms or DEFAULT_RETRY_MS) / 1000)

    # -- helpers ---------------------------------------------------------------------------------

    async def _lines(self, resp: aiohttp.ClientResponse) -> Any:
        """The body's lines as they arrive, each bounded by the message size limit."""
        buffer = b""
        async for chunk in resp.content.iter_any():
            buffer += chunk
            while (end := buffer.find(b"\n")) >= 0:
                yield buffer[: end + 1]
                buffer = buffer[end + 1 :]
            if len(buffer) > self._max:
                raise EventTooLarge(f"a message is larger than {self._max} bytes")
        if buffer:
            yield buffer

    async def _read_all(self, resp: aiohttp.ClientResponse) -> bytes:
        chunks: list[bytes] = []
        size = 0
        async for chunk in resp.content.iter_any():
            size += len(chunk)
            if size > self._max:
                raise MessageTooLarge(f"a message is larger than {self._max} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    def _learn(self, method: Any, body: bytes, parsed: Any = None) -> None:
        """Keep the negotiated version and the tools' `x-mcp-header` maps."""
        if method not in ("initialize", "tools/list"):
            return
        parsed = parsed if parsed is not None else peek(body)
        result = parsed.get("result") if isinstance(parsed, dict) else None
        if not isinstance(result, dict):
            return
        if method == "initialize" and isinstance(result.get("protocolVersion"), str):
            self.version = result["protocolVersion"]
        elif method == "tools/list":
            self._params.learn(result.get("tools"))

    async def _deliver(self, line: HttpLine) -> None:
        await self._inbox.put_wait(line)  # V11: waits while the router is behind

    def _error(
        self, rpc_id: Any, code: int, text: str, status: int | None = None, cut: bool = False
    ) -> None:
        """A JSON-RPC error in place of an answer that did not come (the judge: unknown)."""
        body = {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": code, "message": text}}
        data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
        line = tagged(data, related=rpc_id, http_status=status, content_type="json")
        line.stream_cut = cut  # an HTTP agent then sees its stream close the same way
        self._inbox.put(line)  # small, one per request: never waits

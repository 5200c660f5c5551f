"""A recording HTTP relay for the end-to-end tests: what crossed a point of a streamable HTTP
connection, message by message.

`HttpTap(target)` listens on a free local port and forwards every request to `target`,
streaming the answer back as it comes (SSE included). It keeps each JSON-RPC message it saw,
with the session it belongs to (the request's `Mcp-Session-Id`, else the one the answer
assigns): the bodies the client sent, and the data of the answers (a JSON body, or each SSE
event's data), as the exact bytes. Two taps, one on each side of the proxy, show whether the
proxy passed messages through byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

# Headers that describe one hop, not the message: never relayed.
_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive"}


@dataclass
class Wire:
    """The messages of one session, each direction in the order the tap saw them."""

    sent: list[bytes] = field(default_factory=list)
    answered: list[bytes] = field(default_factory=list)

    def key(self) -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
        """Both directions as sorted tuples: streams of one session may interleave freely."""
        return tuple(sorted(self.sent)), tuple(sorted(self.answered))


@dataclass
class HttpTap:
    """A relay in front of `target` that records the messages in both directions."""

    target: str
    # (session id, direction, message): "sent" client -> server, "answered" server -> client
    messages: list[tuple[str, str, bytes]] = field(default_factory=list)
    # (HTTP method, headers with lower-case names, body) of every request relayed, in order
    requests: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    url: str = ""
    _runner: web.AppRunner | None = None
    _http: aiohttp.ClientSession | None = None

    async def start(self) -> str:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._relay)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # noqa: SLF001
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        self.url = f"http://127.0.0.1:{port}/mcp"
        return self.url

    def sessions(self) -> list[Wire]:
        """What each session carried (in the order sessions first appeared)."""
        found: dict[str, Wire] = {}
        for session, way, message in self.messages:
            wire = found.setdefault(session, Wire())
            (wire.sent if way == "sent" else wire.answered).append(message)
        return list(found.values())

    async def stop(self) -> None:
        if self._http is not None:
            await self._http.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _relay(self, request: web.Request) -> web.StreamResponse:
        assert self._http is not None
        body = await request.read()
        session = request.headers.get("Mcp-Session-Id", "")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        self.requests.append((request.method, {k.lower(): v for k, v in headers.items()}, body))
        async with self._http.request(
            request.method, self.target, data=body or None, headers=headers
        ) as upstream:
            out = web.StreamResponse(
                status=upstream.status,
                headers={k: v for k, v in upstream.headers.items() if k.lower() not in _HOP},
            )
            session = session or upstream.headers.get("Mcp-Session-Id", "")
            if body:
                self.messages.append((session, "sent", body))
            sse = upstream.headers.get("Content-Type", "").startswith("text/event-stream")
            buffer = b""
            try:
                await out.prepare(request)
                async for chunk in upstream.content.iter_any():
                    buffer += chunk
                    if sse:
                        buffer = self._events(session, buffer)
                    await out.write(chunk)
                if not sse and buffer.strip():
                    self.messages.append((session, "answered", buffer))
                await out.write_eof()
            except (ConnectionError, aiohttp.ClientError):
                pass  # the client left (a GET stream it closed): nothing more to relay
            return out

    def _events(self, session: str, buffer: bytes) -> bytes:
        """Record the data of every complete SSE event in `buffer`; return the rest."""
        buffer = buffer.replace(b"\r\n", b"\n")  # event data never holds a raw CR
        while (end := buffer.find(b"\n\n")) >= 0:
            event, buffer = buffer[:end], buffer[end + 2 :]
            data = [line[5:].removeprefix(b" ") for line in event.split(b"\n")
                    if line.startswith(b"data:")]  # fmt: skip
            if data and any(d.strip() for d in data):
                self.messages.append((session, "answered", b"\n".join(data)))
        return buffer

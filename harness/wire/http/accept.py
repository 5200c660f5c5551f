"""The listener's connections, accepted here and bounded (V10).

The proxy accepts connections itself instead of leaving it to asyncio's server, because
asyncio's accept loop logs a traceback for every failed `accept()` and answers nobody when the
process is out of file descriptors. Every bound below answers the agent `503 Service
Unavailable` with a JSON-RPC error body, and each condition is logged once when it begins and
once when it ends (with how many connections it refused), never once per connection:

- the connection cap (`max_connections`): a connection over it is answered at once and closed;
- the descriptor headroom: a connection whose descriptor lies within `HEADROOM` of the soft
  RLIMIT_NOFILE is answered the same way, so the proxy keeps descriptors for its report file,
  its event log and its upstreams; when `accept()` itself fails for want of descriptors, one
  reserve descriptor is given up for a moment to accept the connection and answer it;
- the header timeout: a connection that began a request's head and did not finish it within
  `header_timeout_s` is closed (slowloris);
- the idle timeout, aiohttp's keep-alive timeout: a connection without a request in progress
  (before its first request too) is closed after `idle_timeout_s`.
The body timeout is the listener's own (listen.py): it reads the body.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import resource
import socket
from collections.abc import Callable
from typing import Any

HEADROOM = 32  # descriptors kept free for the proxy's own files and upstreams
ACCEPT_BATCH = 64  # connections accepted per wake-up of the listening socket
REFUSING_AT_ONCE = 64  # refused connections whose request is read before the 503 goes out
REFUSAL_READ_S = 1.0  # how long a refused connection may take to send its request's head
_OUT_OF_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


def unavailable(reason: str) -> bytes:
    """A whole `503 Service Unavailable` HTTP answer with a JSON-RPC error body."""
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None,
         "error": {"code": -32000, "message": f"Service Unavailable: {reason}"}}
    ).encode()  # fmt: skip
    head = (
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


class Conditions:
    """Limits the listener ran into: one line when one begins, one when it ends."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self._log = log
        self._refused: dict[str, int] = {}

    def hit(self, name: str, line: str) -> None:
        if name not in self._refused:
            self._log(f"WARNING: {line}")
            self._refused[name] = 0
        self._refused[name] += 1

    def clear(self, name: str, line: str) -> None:
        refused = self._refused.pop(name, None)
        if refused is not None:
            self._log(f"{line} ({refused} refused meanwhile)")

    def active(self, name: str) -> bool:
        return name in self._refused


class _Watched(asyncio.Protocol):
    """aiohttp's protocol for one connection, with its header timer and its count."""

    def __init__(self, inner: Any, acceptor: Acceptor) -> None:
        self.inner = inner
        self.acceptor = acceptor
        self.busy = False  # a request's handler is running
        self.timer: asyncio.TimerHandle | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.acceptor.watched[transport] = self  # type: ignore[index]
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if not self.busy and self.timer is None:  # a request's head begins
            loop = asyncio.get_running_loop()
            self.timer = loop.call_later(self.acceptor.header_timeout_s, self._too_slow)
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timer()
        self.acceptor.lost(self)
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def request_began(self) -> None:
        self.busy = True
        self._stop_timer()

    def request_ended(self) -> None:
        self.busy = False

    def _stop_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _too_slow(self) -> None:
        self.timer = None
        if not self.busy and self.transport is not None:
            self.acceptor.conditions.hit(
                "header-timeout",
                f"closed a connection that did not send a request's head within "
                f"{self.acceptor.header_timeout_s:g} s (slow or stalled client); further ones "
                "are closed the same way without a line",
            )
            self.transport.abort()


class Acceptor:
    """Accepts on the listening sockets and hands each connection to aiohttp's server."""

    def __init__(
        self,
        factory: Callable[[], Any],
        *,
        max_connections: int,
        header_timeout_s: float,
        conditions: Conditions,
    ) -> None:
        self._factory = factory
        self.max_connections = max_connections
        self.header_timeout_s = header_timeout_s
        self.conditions = conditions
        self.watched: dict[Any, _Watched] = {}
        self.active = 0
        self._sockets: list[socket.socket] = []
        self._refusing: set[asyncio.Task[None]] = set()
        self._starting: set[asyncio.Task[Any]] = set()
        self._reserve: int | None = None
        self._paused = False
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        self._fd_limit = soft if soft != resource.RLIM_INFINITY else 1 << 20

    def bind(self, host: str, port: int) -> int:
        """Bind every address of `host` (one port for all); the port bound."""
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        seen: set[Any] = set()
        for family, kind, proto, _, address in infos:
            if (family, address[0]) in seen:
                continue
            seen.add((family, address[0]))
            if self._sockets:  # the port the first address got, for every other one
                address = (address[0], self._sockets[0].getsockname()[1], *address[2:])
            sock = socket.socket(family, kind, proto)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(address)
                sock.listen(128)
                sock.setblocking(False)
            except OSError:
                sock.close()
                if not self._sockets:
                    raise
                continue
            self._sockets.append(sock)
        return self._sockets[0].getsockname()[1]

    def start(self) -> None:
        with contextlib.suppress(OSError):
            self._reserve = os.open(os.devnull, os.O_RDONLY)
        self._resume()

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        for sock in self._sockets:
            with contextlib.suppress(ValueError, OSError):
                loop.remove_reader(sock.fileno())
            sock.close()
        self._sockets.clear()
        for task in (*self._refusing, *self._starting):
            task.cancel()
        await asyncio.gather(*self._refusing, *self._starting, return_exceptions=True)
        if self._reserve is not None:
            os.close(self._reserve)
            self._reserve = None

    # -- accepting ---------------------------------------------------------------------------

    def _resume(self) -> None:
        self._paused = False
        loop = asyncio.get_running_loop()
        for sock in self._sockets:
            loop.add_reader(sock.fileno(), self._on_readable, sock)

    def _pause(self, seconds: float) -> None:
        if self._paused:
            return
        self._paused = True
        loop = asyncio.get_running_loop()
        for sock in self._sockets:
            with contextlib.suppress(ValueError, OSError):
                loop.remove_reader(sock.fileno())
        loop.call_later(seconds, self._resume_if_open)

    def _resume_if_open(self) -> None:
        if self._sockets:
            self._resume()

    def _on_readable(self, sock: socket.socket) -> None:
        for _ in range(ACCEPT_BATCH):
            try:
                conn, _ = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in _OUT_OF_DESCRIPTORS:
                    self._out_of_descriptors(sock)
                    return
                continue  # the client left before it was accepted (ECONNABORTED, ...)
            self._admit(conn)

    def _admit(self, conn: socket.socket) -> None:
        conn.setblocking(False)
        if conn.fileno() >= self._fd_limit - HEADROOM:
            self._descriptors_short()
            self._refuse(conn, "out of file descriptors", wait=False)
            return
        self.conditions.clear("descriptors", "file descriptors are free again")
        if self.active >= self.max_connections:
            self.conditions.hit(
                "connections",
                f"the connection cap is reached ({self.max_connections} open, "
                "--max-connections): new connections are answered 503 until some close",
            )
            self._refuse(conn, f"too many connections ({self.max_connections})")
            return
        self.conditions.clear("connections", "connections are accepted again")
        self.active += 1
        loop = asyncio.get_running_loop()
        task = loop.create_task(
            loop.connect_accepted_socket(lambda: _Watched(self._factory(), self), conn)
        )
        self._starting.add(task)
        task.add_done_callback(self._started)

    def _started(self, task: asyncio.Task[Any]) -> None:
        self._starting.discard(task)
        if task.cancelled() or task.exception() is not None:
            self.active -= 1  # never became a connection

    def lost(self, watched: _Watched) -> None:
        self.active -= 1
        self.watched.pop(watched.transport, None)

    def _descriptors_short(self) -> None:
        self.conditions.hit(
            "descriptors",
            f"out of file descriptors (limit {self._fd_limit}, {HEADROOM} kept for the proxy's "
            "files and upstreams): new connections are answered 503 until some close",
        )

    def _out_of_descriptors(self, sock: socket.socket) -> None:
        """accept() failed for want of a descriptor: answer one connection with the reserve."""
        self._descriptors_short()
        if self._reserve is None:
            self._pause(0.1)
            return
        os.close(self._reserve)
        self._reserve = None
        try:
            conn, _ = sock.accept()
        except OSError:
            conn = None
        if conn is not None:
            self._refuse(conn, "out of file descriptors", wait=False)
        try:
            self._reserve = os.open(os.devnull, os.O_RDONLY)
        except OSError:
            self._pause(0.1)

    def _refuse(self, conn: socket.socket, reason: str, *, wait: bool = True) -> None:
        """503 and close. With `wait`, the request is read first (up to a second), so the
        client reads the answer instead of a reset; without, at once (descriptors are short)."""
        if not wait or len(self._refusing) >= REFUSING_AT_ONCE:
            _answer_now(conn, unavailable(reason))
            return
        task = asyncio.get_running_loop().create_task(_answer_after_head(conn, reason))
        self._refusing.add(task)
        task.add_done_callback(self._refusing.discard)


def _answer_now(conn: socket.socket, answer: bytes) -> None:
    with contextlib.suppress(OSError):
        with contextlib.suppress(BlockingIOError):
            conn.recv(65536)
        conn.send(answer)
        conn.shutdown(socket.SHUT_WR)
    conn.close()


async def _answer_after_head(conn: socket.socket, reason: str) -> None:
    loop = asyncio.get_running_loop()
    try:
        data = b""
        with contextlib.suppress(TimeoutError, OSError):
            async with asyncio.timeout(REFUSAL_READ_S):
                while b"\r\n\r\n" not in data and len(data) < 65536:
                    chunk = await loop.sock_recv(conn, 65536)
                    if not chunk:
                        break
                    data += chunk
        with contextlib.suppress(OSError):
            await asyncio.wait_for(loop.sock_sendall(conn, unavailable(reason)), REFUSAL_READ_S)
            conn.shutdown(socket.SHUT_WR)
    finally:
        conn.close()

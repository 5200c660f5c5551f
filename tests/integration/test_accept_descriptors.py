"""V10: when accept() itself fails for want of a file descriptor, the listener's acceptor gives
up its reserve descriptor for a moment, accepts the waiting connection and answers it 503, and
says so in one line however often it happens (harness/wire/http/accept.py, in this process:
the failure is injected into the listening socket's accept)."""

from __future__ import annotations

import asyncio
import errno
import os
import socket

import pytest

from harness.wire.http.accept import Acceptor, Conditions

pytestmark = pytest.mark.anyio


class Exhausted:
    """A listening socket whose accept() fails with EMFILE every other call, as a process at
    its descriptor limit sees it (the reserve, once closed, lets the next one through)."""

    def __init__(self, real: socket.socket) -> None:
        self.real = real
        self.calls = 0

    def accept(self) -> tuple[socket.socket, object]:
        self.calls += 1
        if self.calls % 2:
            raise OSError(errno.EMFILE, "Too many open files")
        return self.real.accept()

    def fileno(self) -> int:
        return self.real.fileno()


async def test_v10_accept_out_of_descriptors_answers_503_and_says_so_once():  # V10
    lines: list[str] = []
    acceptor = Acceptor(
        lambda: None, max_connections=10, header_timeout_s=5, conditions=Conditions(lines.append)
    )
    port = acceptor.bind("127.0.0.1", 0)
    # start() without its readers: this test decides when the socket is read
    acceptor._reserve = os.open(os.devnull, os.O_RDONLY)  # noqa: SLF001
    listening = Exhausted(acceptor._sockets[0])  # noqa: SLF001
    try:
        answers = []
        for _ in range(5):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
            acceptor._on_readable(listening)  # type: ignore[arg-type]  # noqa: SLF001
            answers.append(await asyncio.wait_for(reader.read(), 10))
            writer.close()
        assert all(a.startswith(b"HTTP/1.1 503 Service Unavailable") for a in answers), answers
        assert all(b"out of file descriptors" in a for a in answers)
        assert acceptor.active == 0  # none was handed to the server
        assert len(lines) == 1 and "out of file descriptors" in lines[0]
    finally:
        await acceptor.close()

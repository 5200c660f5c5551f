"""Line streams on file descriptors that asyncio's pipe transports refuse: regular files,
character devices that cannot be polled (`/dev/null`), descriptors that are not open.

`agent-harness proxy < requests.jsonl > answers.jsonl` gives the proxy regular files as stdin
and stdout; asyncio's `connect_read_pipe`/`connect_write_pipe` take only pipes, sockets and
character devices, and of those only what epoll accepts: `/dev/null` is a character device
that epoll refuses (EPERM), so `replay X </dev/null` never saw its end of input (V20). Such a
descriptor never blocks for long, so reading it in a worker thread and writing it directly is
enough; a descriptor that is not open is an empty input and a closed output.
"""

from __future__ import annotations

import asyncio
import os
import selectors
import stat


class MessageTooLarge(Exception):
    """A line longer than the message size limit (X7)."""


class StreamClosed(Exception):
    """The other side is gone (EOF on write, broken pipe)."""


CHUNK = 64 * 1024


def watchable(fd: int, event: int = selectors.EVENT_READ) -> bool:
    """Whether asyncio can watch `fd` for `event`: an open pipe, socket or character device
    that the event loop's selector accepts (a terminal yes, `/dev/null` no: V20)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False  # not open: read as an empty input, written as a closed output
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)):
        return False
    if not stat.S_ISCHR(mode):
        return True
    with selectors.DefaultSelector() as selector:
        try:
            selector.register(fd, event)
        except (OSError, ValueError):
            return False
    return True


class FileLineReader:
    """Lines from a regular file descriptor, read in a worker thread; the size limit holds."""

    def __init__(self, fd: int, max_bytes: int) -> None:
        self._fd = fd
        self._max = max_bytes
        self._buffer = bytearray()
        self._eof = False

    async def read_line(self) -> bytes | None:
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                return self._checked(line).rstrip(b"\r")
            if len(self._buffer) > self._max:
                raise MessageTooLarge(f"a message is larger than {self._max} bytes")
            if self._eof:
                if not self._buffer:
                    return None
                line, self._buffer = bytes(self._buffer), bytearray()
                return self._checked(line).rstrip(b"\r")
            try:
                chunk = await asyncio.to_thread(os.read, self._fd, CHUNK)
            except OSError:
                chunk = b""
            if not chunk:
                self._eof = True
            self._buffer += chunk

    def _checked(self, line: bytes) -> bytes:
        if len(line) > self._max:
            raise MessageTooLarge(f"a message is larger than {self._max} bytes")
        return line


class FileLineWriter:
    """Lines to a regular file descriptor, each written whole before the next one."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def write_line(self, line: bytes) -> None:
        view = memoryview(line + b"\n")
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as exc:
            raise StreamClosed(str(exc)) from exc

    async def close(self) -> None:
        return None

"""Newline-delimited JSON-RPC streams: stdio, in memory, and the upstream process.

The proxy only ever sees a `LineReader` and a `LineWriter` per side, so the same proxy core runs
over stdio in real use and over memory pipes in tests and in the runner (DESIGN: the stream pair
is the seam). `mcp_streams()` adapts a line pair to the MCP SDK's message streams, so an SDK
client or server can sit at either end.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
import signal
import sys
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from harness.base.errors import UpstreamError
from harness.base.reaper import ProcessTree, exited
from harness.base.textsafe import terminal
from harness.wire.fdlines import (
    FileLineReader,
    FileLineWriter,
    MessageTooLarge,
    StreamClosed,
    watchable,
)
from harness.wire.supervisor import GroupSupervisor

DEFAULT_MAX_MESSAGE_BYTES = 10 * 1024 * 1024


class LineReader(Protocol):
    async def read_line(self) -> bytes | None:
        """The next line without its newline; None at EOF; MessageTooLarge past the limit."""


class LineWriter(Protocol):
    async def write_line(self, line: bytes) -> None:
        """Write one line (a newline is added); StreamClosed when the reader is gone."""

    async def close(self) -> None:
        """No more lines: the reader sees EOF."""


class StreamLineReader:
    """Lines from an asyncio StreamReader, with the size limit enforced."""

    def __init__(self, reader: asyncio.StreamReader, max_bytes: int) -> None:
        self._reader = reader
        self._max = max_bytes

    async def read_line(self) -> bytes | None:
        try:
            line = await self._reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            line = exc.partial
            if not line:
                return None
        except asyncio.LimitOverrunError as exc:
            raise MessageTooLarge(f"a message is larger than {self._max} bytes") from exc
        except (ConnectionError, OSError):
            return None
        if len(line) > self._max + 1:
            raise MessageTooLarge(f"a message is larger than {self._max} bytes")
        return line.rstrip(b"\r\n")


class StreamLineWriter:
    """Lines to an asyncio StreamWriter; writes are serialised so lines never interleave."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._lock = asyncio.Lock()

    async def write_line(self, line: bytes) -> None:
        async with self._lock:
            try:
                self._writer.write(line + b"\n")
                await self._writer.drain()
            except (ConnectionError, OSError, RuntimeError) as exc:
                raise StreamClosed(str(exc)) from exc

    async def close(self) -> None:
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            self._writer.close()


@dataclass
class MemoryPipe:
    """One direction of an in-memory line stream (reader and writer in one object)."""

    max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    _queue: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)
    _closed: bool = False

    async def write_line(self, line: bytes) -> None:
        if self._closed:
            raise StreamClosed("memory pipe closed")
        await self._queue.put(line)

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            await self._queue.put(None)

    async def read_line(self) -> bytes | None:
        line = await self._queue.get()
        if line is None:
            self._queue.put_nowait(None)  # later reads see EOF too
            return None
        if len(line) > self.max_bytes:
            raise MessageTooLarge(f"a message is larger than {self.max_bytes} bytes")
        return line


async def stdio_lines(max_bytes: int) -> tuple[LineReader, LineWriter]:
    """The process's own stdin and stdout as line streams: pipes, sockets and terminals
    through the event loop; regular files, `/dev/null` and descriptors that are not open
    directly (`proxy < in.jsonl > out.jsonl` and `replay X </dev/null` end at end of input,
    V20)."""
    loop = asyncio.get_running_loop()
    reader: LineReader
    writer: LineWriter
    if not watchable(0):
        reader = FileLineReader(0, max_bytes)
    else:
        stream = asyncio.StreamReader(limit=max_bytes + 1, loop=loop)
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(stream, loop=loop),
            os.fdopen(0, "rb", buffering=0),
        )
        reader = StreamLineReader(stream, max_bytes)
    if not watchable(1, selectors.EVENT_WRITE):
        writer = FileLineWriter(1)
    else:
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.streams.FlowControlMixin(loop=loop), os.fdopen(1, "wb", buffering=0)
        )
        writer = StreamLineWriter(asyncio.StreamWriter(transport, protocol, None, loop))
    return reader, writer


class _SdkReadStream:
    """The SDK's read stream over a line reader: each `receive` reads and parses one line.

    No task and no memory stream between the line and the SDK (issue 24: a pump task and an
    anyio memory stream per direction cost a scheduling round and the stream's checkpoints
    per message). A line that is not a JSON-RPC message is handed on as its ValueError, as
    the SDK's own transports do.
    """

    __slots__ = ("_reader", "_closed")
    # No sender's context to restore: the SDK runs handlers in its session's own context.
    last_context = None

    def __init__(self, reader: LineReader) -> None:
        self._reader = reader
        self._closed = False

    async def receive(self) -> object:
        import anyio
        import mcp_types as types
        from mcp.shared.message import SessionMessage

        if self._closed:
            raise anyio.ClosedResourceError
        line = await self._reader.read_line()
        if line is None:
            raise anyio.EndOfStream
        try:
            return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
        except ValueError as exc:
            return exc

    async def aclose(self) -> None:
        self._closed = True

    def __aiter__(self) -> _SdkReadStream:
        return self

    async def __anext__(self) -> object:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _SdkReadStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _SdkWriteStream:
    """The SDK's write stream over a line writer: each `send` writes one line.

    Closing it ends the line stream (the reader sees EOF). A message sent after the reader
    went away is dropped, and every later send raises BrokenResourceError, as a memory stream
    whose receiver is gone does.
    """

    __slots__ = ("_writer", "_closed", "_broken")

    def __init__(self, writer: LineWriter) -> None:
        self._writer = writer
        self._closed = False
        self._broken = False

    async def send(self, item: object) -> None:
        import anyio

        if self._closed:
            raise anyio.ClosedResourceError
        if self._broken:
            raise anyio.BrokenResourceError
        text = item.message.model_dump_json(by_alias=True, exclude_unset=True)  # type: ignore[attr-defined]
        try:
            await self._writer.write_line(text.encode())
        except StreamClosed:
            self._broken = True

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            await self._writer.close()

    async def __aenter__(self) -> _SdkWriteStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


@contextlib.asynccontextmanager
async def mcp_streams(
    reader: LineReader, writer: LineWriter
) -> AsyncIterator[tuple[object, object]]:
    """Adapt a line pair to the MCP SDK's (read_stream, write_stream) of SessionMessages."""
    read, write = _SdkReadStream(reader), _SdkWriteStream(writer)
    try:
        yield read, write
    finally:
        await read.aclose()
        await write.aclose()


class _UntilExit:
    """The upstream's stdout: at EOF, wait (bounded) until the process has really ended."""

    def __init__(self, inner: LineReader, upstream: UpstreamProcess) -> None:
        self._inner = inner
        self._upstream = upstream

    async def read_line(self) -> bytes | None:
        line = await self._inner.read_line()
        if line is None:
            await self._upstream.settle()
        return line


class UpstreamProcess:
    """The upstream MCP server as a child process in its own process group (X2, X5, X6)."""

    STDERR_TAIL_LINES = 20

    def __init__(
        self,
        proc: asyncio.subprocess.Process,
        max_bytes: int,
        supervisor: GroupSupervisor | None = None,
        tree: ProcessTree | None = None,
    ) -> None:
        self.proc = proc
        self.supervisor = supervisor
        self.tree = tree
        assert proc.stdout is not None and proc.stdin is not None
        self.reader: LineReader = _UntilExit(StreamLineReader(proc.stdout, max_bytes), self)
        self.writer: LineWriter = StreamLineWriter(proc.stdin)
        self.stderr_tail: deque[str] = deque(maxlen=self.STDERR_TAIL_LINES)
        self._stderr_task = asyncio.ensure_future(self._pump_stderr())

    @classmethod
    async def start(
        cls,
        command: str,
        args: Sequence[str],
        *,
        cwd: str | None,
        env: Mapping[str, str],
        max_bytes: int,
    ) -> UpstreamProcess:
        """Start the upstream; the whole proxy environment is inherited plus `env`."""
        if cwd is not None and not os.path.isdir(cwd):
            what = "does not exist" if not os.path.exists(cwd) else "is not a folder"
            raise UpstreamError(f"--upstream-cwd {cwd} {what}")
        # V16: the upstream and everything it starts, `setsid` children too, end with it.
        tree = ProcessTree()
        try:
            proc = await tree.start(
                [command, *args],
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=cwd,
                env={**os.environ, **env},
                limit=max_bytes + 1,
            )
        except OSError as exc:
            await tree.aend()
            raise UpstreamError(
                f"cannot start upstream {command!r}: {exc.strerror or exc}"
            ) from exc
        # V7: its group (and its cgroup) dies with us, even if we are SIGKILLed.
        try:
            supervisor = await GroupSupervisor.start(proc.pid, tree.kill_file())
        except OSError as exc:  # e.g. out of file descriptors (V10): no unwatched upstream
            await tree.aend()
            await proc.wait()
            raise UpstreamError(
                f"cannot start upstream {command!r}: {exc.strerror or exc}"
            ) from exc
        return cls(proc, max_bytes, supervisor, tree)

    async def _pump_stderr(self) -> None:
        stream = self.proc.stderr
        assert stream is not None
        while True:
            try:
                line = await stream.readline()
            except (ValueError, OSError):
                continue
            if not line:
                return
            text = line.decode("utf-8", "replace").rstrip("\n")
            self.stderr_tail.append(text)
            with contextlib.suppress(OSError):
                sys.stderr.write(terminal(text) + "\n")  # V6: nothing from the upstream raw
                sys.stderr.flush()

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    async def wait_exit(self, timeout: float) -> bool:
        """True when the process has exited within `timeout` seconds (its own exit: a
        process it left may hold its pipes, V16)."""
        try:
            await asyncio.wait_for(exited(self.proc), timeout)
        except TimeoutError:
            return False
        return True

    async def settle(self, timeout: float = 1.0) -> None:
        """After its stdout closed: let it exit and its stderr drain, so describe_exit() can
        say how it ended (a crashed process is reaped a moment after its pipe closes)."""
        if await self.wait_exit(timeout):
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._stderr_task), timeout)

    def describe_exit(self) -> str:
        """How it ended, with the tail of its stderr (X5)."""
        code = self.proc.returncode
        how = (
            "is still running"
            if code is None
            else (f"was killed by signal {-code}" if code < 0 else f"exited with code {code}")
        )
        tail = " | ".join(line for line in self.stderr_tail if line.strip())
        return f"the upstream {how}" + (f"; its last stderr lines: {tail}" if tail else "")

    def _group_alive(self) -> bool:
        try:
            os.killpg(self.proc.pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def _signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    async def close(self, grace: float = 1.0) -> None:
        """X6: close its stdin, wait briefly, then SIGTERM and SIGKILL its whole group."""
        await self.writer.close()
        if not await self.wait_exit(grace):
            self._signal_group(signal.SIGTERM)
            if not await self.wait_exit(grace):
                self._signal_group(signal.SIGKILL)
                await self.wait_exit(grace)
        # The leader may be gone while what it started (children of a wrapper such as sh -c
        # or npx, a daemon in a session of its own) still runs: the tree ends all of it (V16).
        if self.tree is not None:
            await self.tree.aend()
        elif self._group_alive():
            self._signal_group(signal.SIGKILL)
        if self.supervisor is not None:
            await self.supervisor.stop()
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(self._stderr_task, grace)

"""`agent-harness record`: forward a real session unchanged and write it down as a cassette (U2).

The agent's lines go to the upstream and the upstream's to the agent byte for byte; each is
also read as JSON-RPC (batches element by element): a request waits for its answer, and the
pair becomes one exchange, in the order the answers came. What the server sends while a request
is open (progress, log messages) is kept with the oldest open request; the rest, and what the
agent notifies, become notification lines. Strings are redacted on the way in (V3).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import signal
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, cast
from urllib.parse import urlsplit

from harness import __version__
from harness.base import jsonutil
from harness.base.redact import TextRedactor
from harness.cassette.args import RecordConfig
from harness.cassette.format import (
    MAGIC,
    MAX_CASSETTE_CHARS,
    VERSION,
    Cassette,
    Exchange,
    SchemaError,
    check_notification,
)
from harness.proxy.args import ProxyConfig
from harness.wire.fdlines import MessageTooLarge, StreamClosed
from harness.wire.http import headers as http_headers


def upstream_secrets(config: ProxyConfig) -> list[str]:
    """What never reaches a cassette: the upstream's env values and header values (V3)."""
    values = list(config.upstream_env.values())
    with contextlib.suppress(KeyError):
        values += [
            str(v) for v in http_headers.resolve(config.upstream_headers, os.environ).values()
        ]
    return [v for v in values if v]


def upstream_label(config: ProxyConfig) -> str:
    """The upstream as the header names it: the command's file name, or the URL's origin and
    path (no user info, no query: either may hold a secret)."""
    if config.upstream_url is not None:
        parts = urlsplit(config.upstream_url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{host}{port}{parts.path}"
    return os.path.basename(config.upstream_command or "")


class Recorder:
    """Reads both directions of a session and builds its cassette."""

    def __init__(self, config: RecordConfig) -> None:
        self.redactor = TextRedactor(upstream_secrets(config.upstream))
        self.max_answer = config.max_answer_bytes
        self.header = {
            "cassette": MAGIC,
            "version": VERSION,
            "recorded_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "harness": __version__,
            "upstream": upstream_label(config.upstream),
            "max_answer_bytes": config.max_answer_bytes,
        }
        self.exchanges: list[Exchange] = []
        self._open: dict[str, Exchange] = {}  # request id (canonical) -> its exchange so far
        self._size = [0]  # characters written down so far (shared by every session's view)
        self.log: Callable[[str], None] = lambda line: None

    def _keep(self, exchange: Exchange) -> None:
        """Write one exchange down, while the cassette stays within what a replay reads and
        the exchange fits the cassette schema (V17: replay would refuse the whole file)."""
        if self._size[0] > MAX_CASSETTE_CHARS:
            return
        try:
            exchange.check()
        except SchemaError as exc:
            self.log(f"not recorded: {exchange.tool or exchange.method}: {exc}")
            return
        self._size[0] += len(jsonutil.dumps(exchange.entry())) + 1
        if self._size[0] > MAX_CASSETTE_CHARS:
            self.header["cut_after"] = len(self.exchanges)
            self.log("the cassette reached 512 MiB: later exchanges are forwarded, not written")
            return
        self.exchanges.append(exchange)

    def for_session(self) -> Recorder:
        """A view for one more agent session (--listen): its own open requests (ids of two
        sessions may be equal), the same cassette."""
        view = copy.copy(self)
        view._open = {}
        return view

    def cassette(self) -> Cassette:
        return Cassette(dict(self.header), list(self.exchanges))

    def _clean(self, value: Any) -> Any:
        return self.redactor.json(value)

    def from_agent(self, line: bytes) -> None:
        for message in _messages(line):
            method = message.get("method")
            if not isinstance(method, str) or not method:
                continue  # the agent's answer to a server request (or junk): not replayed
            params = message.get("params")
            if "id" not in message:
                self._keep(Exchange("notification", method, self._clean(params), sender="agent"))
                continue
            key = jsonutil.canonical(message["id"])
            if method == "tools/call":
                if (
                    not isinstance(params, dict)
                    or not isinstance(params.get("name"), str)
                    or not params["name"]
                ):
                    continue  # no tool to match it by: forwarded, not written
                arguments = params.get("arguments")
                exchange = Exchange(
                    "call", method, tool=params["name"],
                    arguments=self._clean(arguments if isinstance(arguments, dict) else {}),
                )  # fmt: skip
            else:
                exchange = Exchange("request", method, self._clean(params))
            self._open[key] = exchange

    def from_upstream(self, line: bytes) -> None:
        for message in _messages(line):
            method = message.get("method")
            if isinstance(method, str) and method:
                if "id" in message:
                    continue  # a server request (sampling, roots): forwarded, not replayed
                note = {"method": method}
                if "params" in message:
                    note["params"] = self._clean(message["params"])
                try:
                    check_notification(jsonutil.dumps(note))
                except SchemaError as exc:
                    self.log(f"not recorded: a notification {method}: {exc}")
                    continue
                if self._open:
                    next(iter(self._open.values())).add_notification(note)
                else:
                    self._keep(
                        Exchange("notification", method, note.get("params"), sender="server")
                    )
                continue
            if "id" not in message:
                continue
            exchange = self._open.pop(jsonutil.canonical(message["id"]), None)
            if exchange is None:
                continue
            size = len(jsonutil.dumps(message.get("result", message.get("error"))).encode())
            if size > self.max_answer:
                exchange.omitted = size
            elif "error" in message and isinstance(message["error"], dict):
                exchange.error = self._clean(message["error"])
            else:
                exchange.result = self._clean(message.get("result"))
            self._keep(exchange)


def _messages(line: bytes) -> list[dict[str, Any]]:
    try:
        value = jsonutil.loads(line)
    except (ValueError, jsonutil.TooDeep):
        return []
    items = value if isinstance(value, list) else [value]
    return [m for m in items if isinstance(m, dict)]


async def _read(reader: Any, who: str, log: Callable[[str], None]) -> bytes | None:
    """The next line; a message past --max-message-bytes ends that side (one line says so)."""
    try:
        return cast(bytes | None, await reader.read_line())
    except MessageTooLarge as exc:
        log(f"ERROR: {who}: {exc}; the session ends there (what came before is recorded)")
        return None


async def pump(
    recorder: Recorder,
    agent_in: Any,
    agent_out: Any,
    upstream: Any,
    drain_s: float,
    log: Callable[[str], None],
) -> None:
    """Forward both ways until the session ends: the agent's end of input (then the answers
    still open get up to `drain_s`), the upstream's end, or cancellation."""

    async def agent_to_upstream() -> None:
        while (line := await _read(agent_in, "the agent", log)) is not None:
            recorder.from_agent(line)
            try:
                await upstream.writer.write_line(line)
            except StreamClosed:
                return

    async def upstream_to_agent() -> None:
        while (line := await _read(upstream.reader, "the upstream", log)) is not None:
            recorder.from_upstream(line)
            with contextlib.suppress(StreamClosed):
                await agent_out.write_line(line)
            if ended.is_set() and not recorder._open:
                return

    ended = asyncio.Event()
    back = asyncio.ensure_future(upstream_to_agent())
    forth = asyncio.ensure_future(agent_to_upstream())
    try:
        done, _ = await asyncio.wait({back, forth}, return_when=asyncio.FIRST_COMPLETED)
        if forth in done and not back.done():
            forth.result()
            ended.set()
            if recorder._open:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(back), drain_s)
            if recorder._open:
                log(f"{len(recorder._open)} request(s) unanswered at the end: not recorded")
        elif back in done:
            back.result()
    finally:
        for task in (back, forth):
            task.cancel()
        for task in (back, forth):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def record(config: RecordConfig, log: Callable[[str], None]) -> int:
    """Run one recorded session; write the cassette at its end. The cassette is locked for
    this recorder from before the upstream starts until it is written (V18): a second
    recorder into the same file fails at once, in one line."""
    from harness.base.errors import OutputFileError
    from harness.base.outfile import STDOUT, WriterLock

    try:
        lock = None if config.output == STDOUT else WriterLock(config.output, "cassette")
    except OutputFileError as exc:
        log(f"ERROR: {exc}")
        return 1
    try:
        return await _record(config, log)
    finally:
        if lock is not None:
            lock.release()


async def _record(config: RecordConfig, log: Callable[[str], None]) -> int:
    from harness.base.errors import OutputFileError, UpstreamError
    from harness.base.outfile import resolve
    from harness.proxy.main import upstream_opener
    from harness.wire.transport import stdio_lines

    try:
        resolve(config.output, "cassette")  # V1 before anything starts
        upstream = await upstream_opener(config.upstream)()
    except (OutputFileError, UpstreamError) as exc:
        log(f"ERROR: {exc}")
        return 1
    recorder = Recorder(config)
    recorder.log = log
    if config.upstream.listen is not None:
        return await _record_http(config, recorder, upstream, log)
    agent_in, agent_out = await stdio_lines(config.upstream.max_message_bytes)
    loop = asyncio.get_running_loop()
    session = asyncio.ensure_future(
        pump(recorder, agent_in, agent_out, upstream, config.upstream.upstream_timeout_s, log)
    )
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, session.cancel)
    code = 0
    try:
        with contextlib.suppress(asyncio.CancelledError):
            await session
        # Written before the upstream is stopped: whoever started `record` (a proxy, X6) may
        # stop it soon after its input ends, and the session is complete already.
        code = write_cassette(config, recorder, log)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(sig)
        await upstream.close()
        await agent_out.close()
    return code


async def _record_http(
    config: RecordConfig, recorder: Recorder, first: Any, log: Callable[[str], None]
) -> int:
    """--listen: every agent session over streamable HTTP (the proxy's listener) gets its own
    upstream connection, as through the proxy; all of them go into one cassette, written when
    `record` is stopped (SIGTERM, SIGINT, SIGHUP)."""
    from harness.cassette.listen import listen_until_stopped
    from harness.proxy.main import upstream_opener
    from harness.wire.http.lanes import Lane

    spare = [first]
    opener = upstream_opener(config.upstream)
    drain = config.upstream.upstream_timeout_s

    async def start_lane(lane: Lane) -> None:
        upstream = spare.pop() if spare else await opener()
        lane.upstream = upstream

        async def run() -> None:
            try:
                await pump(recorder.for_session(), lane.inbox, lane, upstream, drain, log)
            finally:
                await upstream.close()

        lane.task = asyncio.create_task(run())

    assert config.upstream.listen is not None
    try:
        doing = f"recording into {config.output}"
        if not await listen_until_stopped(
            config.upstream.listen, start_lane, config.upstream.max_message_bytes, doing, log
        ):
            return 1
    finally:
        for upstream in spare:
            await upstream.close()
    return write_cassette(config, recorder, log)


def write_cassette(config: RecordConfig, recorder: Recorder, log: Callable[[str], None]) -> int:
    """The cassette through the one writer (V1); 1 when it cannot be written (one line)."""
    from harness.base.errors import OutputFileError
    from harness.base.outfile import write_file

    cassette = recorder.cassette()
    try:
        write_file(config.output, cassette.text(), "cassette")
    except OutputFileError as exc:
        log(f"ERROR: {exc}")
        return 1
    calls = sum(e.type == "call" for e in cassette.exchanges)
    log(f"recorded {len(cassette.exchanges)} exchanges ({calls} tool calls) into {config.output}")
    return 0

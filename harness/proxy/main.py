"""`agent-harness proxy`: the agent on stdio or HTTP, the upstream a process or a URL (X1, X2,
X5, X6, X8, H1)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from harness import __version__
from harness.errors import (
    ConfigError,
    OutputFileError,
    ReportFileError,
    UpstreamError,
    UsageError,
)
from harness.events import _Event, to_json
from harness.http import headers as http_headers
from harness.outfile import Target, open_append, resolve, same_file
from harness.proxy.args import ProxyConfig, help_text, parse
from harness.proxy.router import Proxy
from harness.reportfile import ReportFile
from harness.session import Session
from harness.textsafe import terminal
from harness.transport import UpstreamProcess, stdio_lines

Upstream = Any  # an UpstreamProcess or an HttpUpstream: reader, writer, describe_exit, close


def log(message: str) -> None:
    """One line on stderr, prefixed so it stands out among the upstream's own output; what
    the upstream said in it (tool names, errors) cannot drive the terminal (V6)."""
    with contextlib.suppress(OSError):
        print(f"[agent-harness] {terminal(message)}", file=sys.stderr, flush=True)


class _EventLogFile:
    """Appends every event as a JSON line, written at once (a killed proxy loses nothing).

    A write that fails (a full disk) is treated like a failed report-file write (O4): the
    half-written line is cut off again, the proxy is stopped through `on_failure`, and this
    sink raises from then on, so no call that records an event after it gets an answer.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self.fd = open_append(path, "event log")  # V1
        except OutputFileError as exc:
            raise ReportFileError(str(exc)) from None
        self.size = os.fstat(self.fd).st_size  # the end of the last whole line
        self.failed: ReportFileError | None = None
        self.on_failure: Callable[[ReportFileError], None] = lambda exc: None

    def __call__(self, event: _Event) -> None:
        if self.failed is None:
            # A lone surrogate in a string becomes its JSON escape: the line stays UTF-8.
            line = (to_json(event) + "\n").encode("utf-8", "backslashreplace")
            try:
                view = memoryview(line)
                while view:
                    view = view[os.write(self.fd, view) :]
                self.size += len(line)
                return
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.ftruncate(self.fd, self.size)
                self.failed = ReportFileError(
                    f"{self.path}: cannot write the event log: {exc.strerror or exc}"
                )
                self.on_failure(self.failed)
        raise self.failed

    def close(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1


def main(argv: list[str]) -> int:
    """Run the proxy; the exit code says whether the run itself was sound (X8)."""
    try:
        parsed = parse(argv)
    except UsageError as exc:
        print(f"agent-harness proxy: error: {exc}", file=sys.stderr)
        return 1
    if parsed.help:
        print(help_text())
        return 0
    if parsed.version:
        print(f"agent-harness {__version__}")
        return 0
    assert parsed.config is not None
    try:
        return asyncio.run(serve(parsed.config))
    finally:
        _silence_stdout()


async def serve(config: ProxyConfig) -> int:
    """Start the upstream, proxy stdio until the session ends, shut everything down."""
    report: ReportFile | None = None
    event_log: _EventLogFile | None = None
    try:
        checked = _check_outputs(config)
        if config.report_file is not None:
            report = ReportFile(config.report_file, checked)
            report.write_starting()
        if config.event_log is not None:
            event_log = _EventLogFile(config.event_log)
        session = Session(
            config.classifier, config.plan, kind="proxy", sinks=[event_log] if event_log else []
        )
    except ReportFileError as exc:
        if report is not None:
            report.release()
        if event_log is not None:
            event_log.close()
        log(f"ERROR: {exc}")
        return 1
    try:
        open_upstream = upstream_opener(config)
        upstream = await open_upstream()
    except UpstreamError as exc:
        return _startup_failed(report, str(exc), event_log)
    if config.listen is not None:
        from harness.proxy.listening import serve_listening

        return await serve_listening(
            config, session, upstream, open_upstream, report, event_log, log
        )
    client_in, client_out = await stdio_lines(config.max_message_bytes)
    proxy = Proxy(
        config,
        session,
        client_in,
        client_out,
        upstream.reader,
        upstream.writer,
        write_report=report.write_pieces if report else None,
        log=log,
        describe_upstream_exit=upstream.describe_exit,
    )
    if event_log is not None:
        event_log.on_failure = lambda exc: _stop_for(proxy, exc)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, proxy.stop, f"received {signal.Signals(sig).name}")
    code = 0
    try:
        await proxy.run()
    except ReportFileError as exc:
        log(f"ERROR: {exc}; stopping. Do not trust the verdict in the report file.")
        code = 1
    except (UpstreamError, ConfigError) as exc:
        code = _startup_failed(report, str(exc), None)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(sig)
        await upstream.close()
        await client_out.close()
        if event_log is not None:
            event_log.close()
        if report is not None:
            report.release()
    return code


def upstream_opener(config: ProxyConfig) -> Callable[[], Awaitable[Upstream]]:
    """How to open a connection to the upstream: start its process, or reach its URL."""
    if config.upstream_url is None:
        assert config.upstream_command is not None

        async def start_process() -> Upstream:
            return await UpstreamProcess.start(
                config.upstream_command or "",
                config.upstream_args,
                cwd=config.upstream_cwd,
                env=config.upstream_env,
                max_bytes=config.max_message_bytes,
            )

        return start_process
    try:  # read once, at startup; the values never reach a log line (V3)
        auth = http_headers.resolve(config.upstream_headers, os.environ)
    except KeyError as exc:
        raise UpstreamError(
            f"--upstream-header-env: the environment variable {exc.args[0]} is not set"
        ) from None
    url = config.upstream_url

    async def connect() -> Upstream:
        from harness.http.upstream import HttpUpstream

        return await HttpUpstream.start(url, auth, max_bytes=config.max_message_bytes, log=log)

    return connect


def _check_outputs(config: ProxyConfig) -> Target | None:
    """V1 for both files; the same file for both is refused (the log would be lost)."""
    try:
        report = resolve(config.report_file, "report file") if config.report_file else None
        events = resolve(config.event_log, "event log") if config.event_log else None
    except OutputFileError as exc:
        raise ReportFileError(str(exc)) from None
    if report is not None and events is not None and same_file(report, events):
        raise ReportFileError(
            f"--report-file {config.report_file} and --event-log {config.event_log} are the "
            "same file; give two different paths"
        )
    return report


def _stop_for(proxy: Proxy, exc: ReportFileError) -> None:
    # As the router does for a failed report write: fatal, so run() raises it and main exits 1.
    if proxy.fatal is None:
        proxy.fatal = exc
    proxy.stop("the event log could not be written")


def _startup_failed(
    report: ReportFile | None, message: str, event_log: _EventLogFile | None
) -> int:
    log(f"ERROR: {message}")
    if report is not None:
        with contextlib.suppress(ReportFileError):
            report.write_startup_error(message)
        report.release()
    if event_log is not None:
        event_log.close()
    return 1


def _silence_stdout() -> None:
    # A client that left leaves a broken pipe on fd 1; keep Python's exit from complaining.
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)

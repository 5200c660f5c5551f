"""`agent-harness proxy`: the agent on stdio or HTTP, the upstream a process or a URL (X1, X2,
X5, X6, X8, H1)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from harness import __version__
from harness.base.errors import (
    ConfigError,
    EventLogError,
    OutputFileError,
    ReportFileError,
    UpstreamError,
    UsageError,
)
from harness.base.outfile import Target, resolve, same_file
from harness.base.textsafe import terminal
from harness.proxy.args import ProxyConfig, help_text, parse
from harness.proxy.eventlog import EventLogFile
from harness.proxy.refusals import unrecordable_line
from harness.proxy.router import Proxy
from harness.proxy.verdict import default_report_path, verdict_line
from harness.report.file import ReportFile
from harness.session import Session
from harness.wire.http import headers as http_headers
from harness.wire.transport import UpstreamProcess, stdio_lines

Upstream = Any  # an UpstreamProcess or an HttpUpstream: reader, writer, describe_exit, close
# With --report-file and no --event-log, the event log lives beside the report (X14).
SIDECAR_SUFFIX = ".events.jsonl"


def log(message: str) -> None:
    """One line on stderr, prefixed so it stands out among the upstream's own output; what
    the upstream said in it (tool names, errors) cannot drive the terminal (V6)."""
    with contextlib.suppress(OSError):
        print(f"[agent-harness] {terminal(message)}", file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    """Run the proxy; the exit code says whether the run itself was sound (X8)."""
    try:
        parsed = parse(argv)
    except UsageError as exc:
        print(f"agent-harness proxy: error: {terminal(str(exc))}", file=sys.stderr)
        return 1
    if parsed.help:
        print(help_text())
        return 0
    if parsed.version:
        print(f"agent-harness {__version__}")
        return 0
    assert parsed.config is not None
    try:
        return asyncio.run(serve(parsed.config, say_verdict=not parsed.from_file))
    finally:
        _silence_stdout()


async def serve(config: ProxyConfig, *, say_verdict: bool = True) -> int:
    """Start the upstream, proxy stdio until the session ends, shut everything down;
    `say_verdict`: the verdict's line at the end (Q3; not for a program, which reads the
    report file it named, and whose agent under test may read the proxy's stderr, U3)."""
    report: ReportFile | None = None
    event_log: EventLogFile | None = None
    config = with_default_report(config)
    book = _call_book(config)
    if book is False:
        return 1
    try:
        log_path = event_log_path(config)
        checked = _check_outputs(config, log_path)
        if config.report_file is not None:
            report = ReportFile(config.report_file, checked)  # the lock first: then its log
        if log_path is not None:
            event_log = EventLogFile(log_path)
            if event_log.cut:
                log(
                    f"WARNING: {log_path}: cut off an incomplete last event ({event_log.cut} bytes)"
                )
        session = Session(
            config.classifier,
            config.plan,
            kind="proxy",
            sinks=[s for s in (event_log, book) if s is not None],
            history=event_log.history() if event_log else (),
        )
        _announce_history(session, report, log_path)
        if event_log is not None and event_log.failed is not None:
            raise event_log.failed  # not even the session's start could be recorded
    except (ReportFileError, EventLogError) as exc:
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
        return _startup_failed(report, str(exc), event_log, session)
    _announce_default_report(config)
    if config.listen is not None:
        from harness.proxy.listening import serve_listening

        code = await serve_listening(
            config, session, upstream, open_upstream, report, event_log, log
        )
        _export_spans(book, session, "tcp")
        return _said(code, session, config) if say_verdict else code
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

        def unrecordable(exc: ReportFileError) -> None:
            log(unrecordable_line(exc))
            session.fail(str(exc))  # E10: the report says so
            proxy.cannot_record(exc)

        event_log.on_failure = unrecordable
        if event_log.failed is not None:  # failed before the proxy could be told
            unrecordable(event_log.failed)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, proxy.stop, f"received {signal.Signals(sig).name}")
    code = 0
    try:
        await proxy.run()
        if proxy.unrecordable is not None:
            code = 1  # its one line is already out: the event log is incomplete
    except ReportFileError as exc:
        log(f"ERROR: {exc}; stopping. Do not trust the verdict in the report file.")
        code = 1
    except (UpstreamError, ConfigError) as exc:
        code = _startup_failed(report, str(exc), None, session)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(sig)
        await upstream.close()
        await client_out.close()
        if event_log is not None:
            event_log.close()
        if report is not None:
            report.release()
    _export_spans(book, session, "pipe")
    return _said(code, session, config) if say_verdict else code


def _call_book(config: ProxyConfig) -> Any:
    """I3: with --otel, the sink that keeps what the spans need (None without; False, said in
    one line, when the SDK is not installed). OpenTelemetry itself is imported at the end."""
    if not config.otel:
        return None
    from harness.otel import CallBook, missing_sdk

    why = missing_sdk()
    if why is not None:
        log(f"ERROR: {why}")
        return False
    return CallBook()


def _export_spans(book: Any, session: Session, transport: str) -> None:
    """I3: the session's spans, built from its events and judgement, out over OTLP; a failed
    export costs the spans (one WARNING line), never the session's exit code."""
    if book is None:
        return
    from harness.otel import export_spans, session_spans

    run = session_spans(book.events, session.judgement(), session.judge.index_of,
                        transport=transport)  # fmt: skip
    problem = export_spans([run] if run is not None else [])
    if problem is not None:
        log(f"WARNING: OpenTelemetry: {problem}")


def with_default_report(config: ProxyConfig) -> ProxyConfig:
    """Q3: the config with the default report file when none was named (and no event log,
    which `agent-harness judge` turns into the report); a folder that cannot be made costs the
    file, never the session (one WARNING line)."""
    if not config.default_report or config.report_file is not None or config.event_log:
        return config
    try:
        path = default_report_path()
    except OSError as exc:
        log(f"WARNING: no report file: {exc.strerror or exc} ({exc.filename}); give --report-file")
        return config
    return replace(config, report_file=str(path))


def _announce_default_report(config: ProxyConfig) -> None:
    """Q3: where the default report goes, once the upstream started (not before an error)."""
    if config.default_report and config.report_file is not None:
        log(
            f"report file: {config.report_file} (--report-file PATH names another; the verdict "
            "comes at the end)"
        )


def _said(code: int, session: Session, config: ProxyConfig) -> int:
    """Q3: the verdict in the last line of a session that ended normally; `code` unchanged."""
    if code == 0:
        where = config.report_file or (
            f"none written; agent-harness judge {config.event_log} makes it"
            if config.event_log
            else "none written" + ("" if config.default_report else " (--no-report-file)")
        )
        log(verdict_line(*session.verdict(), where))
    return code


def event_log_path(config: ProxyConfig) -> str | None:
    """--event-log, or beside the report file: the record a restarted proxy continues (X14)."""
    if config.event_log is not None:
        return config.event_log
    if config.report_file is not None:
        return f"{config.report_file}{SIDECAR_SUFFIX}"
    return None


def _announce_history(session: Session, report: ReportFile | None, log_path: str | None) -> None:
    """X14: say that the judgement goes on, or keep an earlier report there is no record of."""
    earlier = session.earlier_sessions
    if earlier:
        log(
            f"continuing the judgement of {earlier} earlier session"
            f"{'s' if earlier > 1 else ''} recorded in {log_path}; delete it (and the report) "
            "for a fresh start"
        )
    elif report is not None:
        kept = report.keep_earlier()
        if kept is not None:
            log(
                f"WARNING: {report.requested} held the report of an earlier session without an "
                f"event log to continue from; it was kept as {kept}"
            )
    if report is not None:
        if earlier:
            report.write_pieces(session.report_file_pieces("starting"))
        else:
            report.write_starting()


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
        from harness.wire.http.upstream import HttpUpstream

        return await HttpUpstream.start(url, auth, max_bytes=config.max_message_bytes, log=log)

    return connect


def _check_outputs(config: ProxyConfig, log_path: str | None) -> Target | None:
    """V1 for both files; the same file for both is refused (the log would be lost)."""
    try:
        report = resolve(config.report_file, "report file") if config.report_file else None
        events = resolve(log_path, "event log") if log_path else None
    except OutputFileError as exc:
        raise ReportFileError(str(exc)) from None
    if report is not None and events is not None and same_file(report, events):
        raise ReportFileError(
            f"--report-file {config.report_file} and --event-log {config.event_log} are the "
            "same file; give two different paths"
        )
    return report


def _startup_failed(
    report: ReportFile | None,
    message: str,
    event_log: EventLogFile | None,
    session: Session | None = None,
) -> int:
    log(f"ERROR: {message}")
    if report is not None:
        with contextlib.suppress(ReportFileError):
            if session is not None and session.earlier_sessions:  # X14: keep what was judged
                report.write_pieces(session.report_file_pieces("failed", startup_error=message))
            else:
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

"""`agent-harness proxy --listen`: the agent over streamable HTTP, one run across its sessions.

Each session of the agent (each `initialize`, and the sessionless 2026-07-28 requests) gets a
lane: a router of its own in front of an upstream connection of its own (a new process for a
command, a new session for a URL), the same `Proxy` code as over stdio. All lanes share one
judged `Session`, so the report covers the whole run: a write repeated in a new session after a
fault is a repeat like any other. The run ends on SIGTERM, SIGINT or SIGHUP (an HTTP agent
has no end of input): every lane drains (X6), the final report is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable
from typing import Any

from harness.base.errors import ConfigError, ReportFileError, UpstreamError
from harness.proxy.args import ProxyConfig
from harness.proxy.refusals import unrecordable_line
from harness.proxy.router import Proxy
from harness.report.file import ReportFile
from harness.session import Session
from harness.wire.http.lanes import Lane
from harness.wire.http.listen import Listener

_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class _LaneSession:
    """The run's session as one lane's router sees it: a lane that ends does not end the run."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    def end(self, reason: str) -> None:
        """Only the listener ends the run (at shutdown)."""

    def report_file_pieces(self, status: str) -> list[tuple[Any, bytes]]:
        return self._session.report_file_pieces("running" if status == "finished" else status)


async def serve_listening(
    config: ProxyConfig,
    session: Session,
    first_upstream: Any,
    open_upstream: Callable[[], Awaitable[Any]],
    report: ReportFile | None,
    event_log: Any,
    log: Callable[[str], None],
) -> int:
    """Serve HTTP until a signal; the exit code as for stdio (X8)."""
    assert config.listen is not None
    spare: list[Any] = [first_upstream]  # started at once, so a bad command fails at startup
    stopped = asyncio.Event()
    failure: list[BaseException] = []  # the report file cannot be written
    unrecordable: list[ReportFileError] = []  # the event log cannot be written
    lanes: set[Proxy] = set()  # the lanes' routers still running
    lane_session = _LaneSession(session)

    def cannot_record(exc: ReportFileError) -> None:
        """O4, X10: like over stdio. Every lane refuses new requests at once (none is forwarded
        unrecorded) and ends when its calls in flight are answered; then the run stops."""
        if unrecordable:
            return
        unrecordable.append(exc)
        log(unrecordable_line(exc))
        session.fail(str(exc))  # E10: the report says so
        for lane_proxy in list(lanes):
            lane_proxy.cannot_record(exc)
        stop_when_idle()

    def stop_when_idle() -> None:
        if unrecordable and not lanes:
            stopped.set()

    if event_log is not None:
        event_log.on_failure = cannot_record
        if event_log.failed is not None:
            cannot_record(event_log.failed)

    async def start_lane(lane: Lane) -> None:
        upstream = spare.pop() if spare else await open_upstream()
        lane.upstream = upstream
        proxy = Proxy(
            config,
            lane_session,  # type: ignore[arg-type]
            lane.inbox,
            lane,
            upstream.reader,
            upstream.writer,
            write_report=report.write_pieces if report else None,
            log=log,
            describe_upstream_exit=upstream.describe_exit,
            wait_at_eof=False,  # an ended session has no stream left to answer on: X6's 2 s
        )
        lanes.add(proxy)
        if unrecordable:  # a session begun after the event log failed forwards nothing
            proxy.cannot_record(unrecordable[0])
        lane.task = asyncio.create_task(run_lane(proxy, upstream))

    async def run_lane(proxy: Proxy, upstream: Any) -> None:
        try:
            await proxy.run()
        except ReportFileError as exc:
            failure.append(exc)
            stopped.set()
        except (UpstreamError, ConfigError) as exc:
            log(f"ERROR: a session ended: {exc}")
        finally:
            lanes.discard(proxy)
            await upstream.close()
            stop_when_idle()

    host, port = config.listen
    listener = Listener(
        host,
        port,
        start_lane=start_lane,
        max_bytes=config.max_message_bytes,
        allowed_origins=config.allowed_origins,
        log=log,
    )
    reason = ["stopped"]
    loop = asyncio.get_running_loop()

    def on_signal(name: str) -> None:
        reason[0] = f"received {name}"
        stopped.set()

    for sig in _SIGNALS:
        loop.add_signal_handler(sig, on_signal, signal.Signals(sig).name)
    code = 0
    try:
        try:
            url = await listener.start()
        except OSError as exc:
            raise UpstreamError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
        log(f"listening on {url} (streamable HTTP; stop with Ctrl-C or SIGTERM)")
        if report is not None:
            report.write_pieces(session.report_file_pieces("running"))
        await stopped.wait()
        await listener.stop()
        if failure:
            raise failure[0]
        session.end("the event log could not be written" if unrecordable else reason[0])
        if report is not None:
            report.write_pieces(session.report_file_pieces("finished"))
        if unrecordable:
            code = 1  # its one line is already out: the event log is incomplete
    except ReportFileError as exc:
        log(f"ERROR: {exc}; stopping. Do not trust the verdict in the report file.")
        code = 1
    except UpstreamError as exc:
        log(f"ERROR: {exc}")
        if report is not None:
            with contextlib.suppress(ReportFileError):
                report.write_startup_error(str(exc))
        code = 1
    finally:
        for sig in _SIGNALS:
            loop.remove_signal_handler(sig)
        with contextlib.suppress(Exception):
            await listener.stop()
        for upstream in spare:
            await upstream.close()
        if event_log is not None:
            event_log.close()
        if report is not None:
            report.release()
    return code

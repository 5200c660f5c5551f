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

from harness.errors import ConfigError, ReportFileError, UpstreamError
from harness.http.lanes import Lane
from harness.http.listen import Listener
from harness.proxy.args import ProxyConfig
from harness.proxy.router import Proxy
from harness.reportfile import ReportFile
from harness.session import Session

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
    failure: list[BaseException] = []
    lane_session = _LaneSession(session)
    if event_log is not None:  # an event log that cannot be written ends the run (O4, V1)
        event_log.on_failure = lambda exc: (failure.append(exc), stopped.set())
        if event_log.failed is not None:
            event_log.on_failure(event_log.failed)

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
            await upstream.close()

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
        session.end(reason[0])
        if report is not None:
            report.write_pieces(session.report_file_pieces("finished"))
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

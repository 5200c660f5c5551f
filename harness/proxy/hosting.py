"""Two ways for a caller to host one proxy: a subprocess command, or this process (R3).

`proxy_command` is the `agent-harness proxy --config FILE` command line that runs a config as
a process (the one a client config names): the config goes over whole, as one file, not as
flags to spell and parse back. `in_process_proxy` runs the same `Proxy` code in this process
with the config object itself, in front of an MCP server coroutine, over memory streams: no
interpreter start-ups, the same JSON-RPC lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.base.errors import UpstreamError
from harness.base.outfile import write_file
from harness.proxy.args import ProxyConfig

# An MCP server over the SDK's (read_stream, write_stream) pair, e.g. `server.run(read, write,
# ...)`; it should return when its read stream ends. With `over_lines`, a server over the
# proxy's line pipes themselves (a LineReader and a LineWriter) that closes its writer at the
# end: no SDK stream adapters between them.
UpstreamServer = Callable[[Any, Any], Awaitable[None]]

# How long the proxy may take to end its session after the client left.
END_TIMEOUT_S = 10.0
CONFIG_FILE = "proxy.json"  # the config's file in the folder `proxy_command` is given


def proxy_command(config: ProxyConfig, folder: Path) -> list[str]:
    """The whole `agent-harness proxy --config FILE` command line that runs `config` as a
    subprocess; FILE is written into `folder`, which should be the caller's own (not one the
    agent under test can look into: U3)."""
    path = write_file(folder / CONFIG_FILE, config.to_json(), "proxy config")
    assert path is not None
    exe = Path(sys.executable).parent / "agent-harness"
    head = [str(exe), "proxy"] if exe.exists() else [sys.executable, "-P", "-m", "harness", "proxy"]
    return [*head, f"--config={path}"]


@dataclass
class InProcessProxy:
    """An in-process proxy as its client sees it: MCP streams, and the events it recorded."""

    read_stream: Any  # for mcp.ClientSession(read_stream, write_stream)
    write_stream: Any
    events: list[Any] = field(default_factory=list)  # the session's events, as they happen
    # The final report file's text, once the session ended (whether or not it was written).
    report_text: str | None = None


@contextlib.asynccontextmanager
async def in_process_proxy(
    config: ProxyConfig, upstream: UpstreamServer, *, over_lines: bool = False
) -> AsyncIterator[InProcessProxy]:
    """Proxy and upstream server in this process; the report is rendered once, at the end.

    O3 (a current report file at every call) guards against a proxy that dies mid-run. In
    process, whatever kills the proxy kills its caller with it: the report is rendered when
    the session ends (at every call it cost ~10 % of a run's time), kept as `report_text` and
    written to the config's report file if it names one. An event-log file is not written;
    `events` holds the same events.
    """
    from harness.proxy.router import Proxy
    from harness.session import EventList, Session
    from harness.wire.transport import MemoryPipe, mcp_streams

    log = EventList()
    session = Session(config.classifier, config.plan, kind="proxy", sinks=[log])
    to_proxy, from_proxy, to_upstream, from_upstream = (
        MemoryPipe(config.max_message_bytes) for _ in range(4)
    )
    proxy = Proxy(config, session, to_proxy, from_proxy, from_upstream, to_upstream)

    async def serve_upstream() -> None:
        if over_lines:
            await upstream(to_upstream, from_upstream)
            return
        async with mcp_streams(to_upstream, from_upstream) as (read, write):
            await upstream(read, write)

    async def run_proxy() -> None:
        try:
            await proxy.run()
        finally:
            # The proxy's end is its client's end of input, as a proxy process's exit is: a
            # client waiting for an answer (initialize, when the upstream failed) is not left
            # waiting until its own time limit.
            await from_proxy.close()

    upstream_task = asyncio.create_task(serve_upstream())
    proxy_task = asyncio.create_task(run_proxy())
    hosted: InProcessProxy | None = None
    try:
        async with mcp_streams(from_proxy, to_proxy) as (read, write):
            hosted = InProcessProxy(read, write, log.events)
            yield hosted
        await to_proxy.close()  # the client is gone: the proxy ends the session
        await asyncio.wait_for(proxy_task, END_TIMEOUT_S)
    except Exception:
        # The client's failure (the connection closed) had a cause: the upstream's own error
        # (a full disk under its database, V20) is what the caller is told, in one line.
        if upstream_task.done() and not upstream_task.cancelled() and upstream_task.exception():
            failed = upstream_task.exception()
            said = (str(failed).strip().splitlines() or [type(failed).__name__])[0]
            raise UpstreamError(f"the upstream failed: {said}") from failed
        raise
    finally:
        await to_upstream.close()
        for task in (proxy_task, upstream_task):
            task.cancel()
        await asyncio.gather(proxy_task, upstream_task, return_exceptions=True)
        if session.ended:
            text = session.report_file_text("finished")
            if hosted is not None:
                hosted.report_text = text
            if config.report_file is not None:
                write_file(config.report_file, text, "report file")

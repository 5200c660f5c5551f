"""Connect an agent to the proxy for one run: a real subprocess, or in process (R3).

By default a run talks to `agent-harness proxy` as a real subprocess, the same command a user
puts into a client config, with `--audit-tools off` and a report file. For built-in upstreams
the proxy and the upstream can also be hosted in this process over memory streams: the same
`Proxy` code routes the same JSON-RPC lines, only without two interpreter start-ups per run.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.proxy import (
    ClassifierConfig,
    PlanConfig,
    ProxyConfig,
    in_process_proxy,
    proxy_command,
)


@dataclass(frozen=True)
class ProxyTarget:
    """Everything needed to put a proxy in front of one upstream for one run."""

    upstream_command: str
    upstream_args: tuple[str, ...]
    upstream_env: dict[str, str]
    upstream_cwd: str | None
    plan: PlanConfig
    classifier: ClassifierConfig
    upstream_timeout_s: float
    builtin_kind: str | None = None  # set for the built-in reference upstreams
    builtin_db: Path | None = None

    def proxy_config(self, report_file: Path | None, event_log: Path | None) -> ProxyConfig:
        return ProxyConfig(
            upstream_command=self.upstream_command,
            upstream_args=self.upstream_args,
            upstream_cwd=self.upstream_cwd,
            upstream_env=dict(self.upstream_env),
            plan=self.plan,
            classifier=self.classifier,
            audit_tools=False,
            report_file=str(report_file) if report_file else None,
            event_log=str(event_log) if event_log else None,
            upstream_timeout_s=self.upstream_timeout_s,
        )


@dataclass
class Connection:
    """An initialised MCP client session through the proxy, and where its results land."""

    session: Any  # mcp ClientSession
    report_file: Path
    event_log: Path
    stderr_file: Path | None = None
    events: list[Any] = field(default_factory=list)  # in process: the events themselves
    finish: Callable[[], Any] | None = None


@contextlib.asynccontextmanager
async def subprocess_connection(target: ProxyTarget, workdir: Path) -> AsyncIterator[Connection]:
    """A real `agent-harness proxy` subprocess in front of the upstream."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    report, events, stderr_path = (
        workdir / "report.json",
        workdir / "events.jsonl",
        workdir / "proxy.stderr",
    )
    argv = proxy_command(target.proxy_config(report, events))
    params = StdioServerParameters(
        command=argv[0], args=argv[1:], env=dict(os.environ), cwd=str(workdir)
    )
    with stderr_path.open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield Connection(session, report, events, stderr_path)


@contextlib.asynccontextmanager
async def in_process_connection(target: ProxyTarget, workdir: Path) -> AsyncIterator[Connection]:
    """Proxy and built-in upstream hosted here, over memory streams (the same Proxy code)."""
    from mcp.client.session import ClientSession

    from runner.upstreams import serve

    kind, db = target.builtin_kind, target.builtin_db
    if kind is None or db is None:
        raise ValueError("in-process runs need a built-in upstream")
    report = workdir / "report.json"

    async def upstream(read: Any, write: Any) -> None:
        await serve(kind, db, read, write)

    async with in_process_proxy(target.proxy_config(report, None), upstream) as proxy:
        async with ClientSession(proxy.read_stream, proxy.write_stream) as client:
            await client.initialize()
            yield Connection(client, report, workdir / "events.jsonl", None, proxy.events)

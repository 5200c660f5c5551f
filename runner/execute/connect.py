"""Connect an agent to the proxy for one run: a real subprocess, or in process (R3).

By default a run talks to `agent-harness proxy` as a real subprocess, the same command a user
puts into a client config, with `--audit-tools off` and a report file. For built-in upstreams
the proxy and the upstream can also be hosted in this process over memory streams: the same
`Proxy` code routes the same JSON-RPC lines, only without two interpreter start-ups per run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.faults import PlanConfig
from harness.proxy.args import ProxyConfig
from harness.tools import ClassifierConfig


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


def proxy_argv(config: ProxyConfig) -> list[str]:
    """The `agent-harness proxy ...` command line for a config (the user-visible form)."""
    exe = Path(sys.executable).parent / "agent-harness"
    argv = [str(exe), "proxy"] if exe.exists() else [sys.executable, "-m", "harness", "proxy"]
    argv += ["--upstream-command", config.upstream_command]
    argv += [f"--upstream-arg={a}" for a in config.upstream_args]
    if config.upstream_cwd:
        argv += ["--upstream-cwd", config.upstream_cwd]
    argv += [f"--upstream-env-var={k}={v}" for k, v in config.upstream_env.items()]
    plan = config.plan
    if plan.scenario:
        argv += ["--scenario", plan.scenario]
        if plan.scenario == "F2":
            argv += ["--retry-after", f"{plan.retry_after_s:g}"]
    if plan.chaos_error_rate is not None:
        argv += ["--mode", "chaos", "--error-rate", f"{plan.chaos_error_rate:g}"]
        if plan.seed is not None:
            argv += ["--seed", str(plan.seed)]
    if plan.fault_delay_ms and (plan.scenario or plan.chaos_error_rate is not None):
        argv += ["--fault-delay", str(plan.fault_delay_ms)]
    classifier = config.classifier
    if classifier.write_globs is not None:
        argv += [f"--write-tools={','.join(classifier.write_globs)}"]
    if classifier.read_globs:
        argv += [f"--read-tools={','.join(classifier.read_globs)}"]
    argv += [f"--key-fields={','.join(classifier.key_fields)}"]
    argv += ["--audit-tools", "on" if config.audit_tools else "off"]
    if config.report_file:
        argv += ["--report-file", config.report_file]
    if config.event_log:
        argv += ["--event-log", config.event_log]
    argv += ["--upstream-timeout", f"{config.upstream_timeout_s:g}"]
    return argv


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
    argv = proxy_argv(target.proxy_config(report, events))
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
    import asyncio

    from mcp.client.session import ClientSession

    from harness.proxy.router import Proxy
    from harness.session import EventList, Session
    from harness.transport import MemoryPipe, mcp_streams
    from runner.upstreams import serve

    if target.builtin_kind is None or target.builtin_db is None:
        raise ValueError("in-process runs need a built-in upstream")
    report = workdir / "report.json"
    config = target.proxy_config(report, None)
    log = EventList()
    session = Session(config.classifier, config.plan, kind="proxy", sinks=[log])
    to_proxy, from_proxy, to_upstream, from_upstream = (MemoryPipe() for _ in range(4))
    # O3 (a current report file on disk at every call) guards against a proxy that dies
    # mid-run. In process, whatever kills the proxy kills the runner with it, and the run is
    # re-run on resume: the report is rendered and written once, at the end (rendering and
    # writing it at every call was ~10 % of an in-process run's time).
    proxy = Proxy(config, session, to_proxy, from_proxy, from_upstream, to_upstream)

    async def upstream() -> None:
        async with mcp_streams(to_upstream, from_upstream) as (read, write):
            await serve(target.builtin_kind, target.builtin_db, read, write)

    upstream_task = asyncio.create_task(upstream())
    proxy_task = asyncio.create_task(proxy.run())
    try:
        async with mcp_streams(from_proxy, to_proxy) as (read, write):
            async with ClientSession(read, write) as client:
                await client.initialize()
                yield Connection(client, report, workdir / "events.jsonl", None, log.events)
        await to_proxy.close()  # the client is gone: the proxy ends the session
        await asyncio.wait_for(proxy_task, 10)
    finally:
        await to_upstream.close()
        for task in (proxy_task, upstream_task):
            task.cancel()
        await asyncio.gather(proxy_task, upstream_task, return_exceptions=True)
        if session.ended:
            report.write_text(session.report_file_text("finished"))


def clean_workdir(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)

"""Connect an agent to the proxy for one run: a real subprocess, or in process (R3).

By default a run talks to `agent-harness proxy` as a real subprocess, the same command a user
puts into a client config, with `--audit-tools off` and a report file; the run's ProxyConfig
goes over whole, as one file the proxy reads (`--config FILE`), kept in a folder of the run's
own that the agent under test never sees (U3). For built-in upstreams the proxy and the
upstream can also be hosted in this process over memory streams, given the config itself: the
same `Proxy` code routes the same JSON-RPC lines, only without two interpreter start-ups per
run.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.base.reaper import ProcessTree, exited
from harness.proxy import (
    ClassifierConfig,
    HeaderSpec,
    PlanConfig,
    ProxyConfig,
    in_process_proxy,
    proxy_command,
)
from runner.processes.workdirs import private_folder

# An MCP server over the SDK's (read_stream, write_stream) pair, as in_process_proxy hosts it.
UpstreamServer = Callable[[Any, Any], Awaitable[None]]

# A run's files in its working folder: the proxy's report file and its event log.
REPORT_FILE, EVENT_LOG_FILE = "report.json", "events.jsonl"
SERVE_TIMEOUT_S = 60.0  # for a built-in upstream started over HTTP to say where it listens
_LISTENING = re.compile(r"listening on (http://\S+)")


@dataclass(frozen=True)
class ProxyTarget:
    """Everything needed to put a proxy in front of one upstream for one run."""

    upstream_command: str | None
    upstream_args: tuple[str, ...]
    upstream_env: dict[str, str]
    upstream_cwd: str | None
    plan: PlanConfig
    classifier: ClassifierConfig
    upstream_timeout_s: float
    builtin_kind: str | None = None  # set for the built-in reference upstreams
    builtin_db: Path | None = None
    upstream_url: str | None = None  # H1: an upstream spoken to over streamable HTTP
    upstream_headers: tuple[HeaderSpec, ...] = ()
    # A built-in upstream served over HTTP: the command that serves it (its URL is known once
    # it listens, so the run starts it before the proxy).
    serve_over_http: tuple[str, ...] | None = None
    agent_over_http: bool = False  # the agent reaches the proxy over HTTP (proxy --listen)

    def proxy_config(self, report_file: Path | None, event_log: Path | None) -> ProxyConfig:
        return ProxyConfig(
            upstream_command=self.upstream_command,
            upstream_args=self.upstream_args,
            upstream_cwd=self.upstream_cwd,
            upstream_env=dict(self.upstream_env),
            upstream_url=self.upstream_url,
            upstream_headers=self.upstream_headers,
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
    # JSON-RPC id of every tools/call the client sent -> the model's tool call it served
    # (None: sent while no tool call was running). Joined with the proxy's events (M2).
    sent_calls: dict[str, str | None] = field(default_factory=dict)
    # In process: the built-in upstream's ledger in memory (runner.upstreams.LedgerInMemory),
    # which the run reads its ground truth from and closes; None: the ledger is a file.
    ledger: Any = None
    # In process: the proxy's final report text once the session ended (None before, or if it
    # never ended), handed over instead of written to `report_file` and read back.
    final_report: Callable[[], str | None] | None = None


class CallTap:
    """The client's write stream, noting which tool call each tools/call request served.

    The MCP client sends a request from the task that asked for it, so the agent loop's
    `TOOL_CALL_ID` is visible here, for the model's call and for any re-send the client
    makes on its own.
    """

    def __init__(self, stream: Any, sent: dict[str, str | None]) -> None:
        self._stream = stream
        self._sent = sent

    async def send(self, item: Any) -> None:
        """Note a tools/call request's id, then pass the message on unchanged."""
        from runner.models.loop import TOOL_CALL_ID

        message = getattr(item, "message", None)
        message = getattr(message, "root", message)
        if getattr(message, "method", None) == "tools/call":
            self._sent[str(message.id)] = TOOL_CALL_ID.get()
        await self._stream.send(item)

    async def aclose(self) -> None:
        """Close the wrapped stream."""
        await self._stream.aclose()

    async def __aenter__(self) -> CallTap:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self._stream.__aexit__(*exc)


@contextlib.asynccontextmanager
async def subprocess_connection(target: ProxyTarget, workdir: Path) -> AsyncIterator[Connection]:
    """A real `agent-harness proxy` subprocess in front of the upstream."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    stderr_path = workdir / "proxy.stderr"
    sent: dict[str, str | None] = {}
    async with contextlib.AsyncExitStack() as stack:
        config = await proxy_config_in(stack, target, workdir)
        env = {**os.environ, **target.upstream_env}
        if target.agent_over_http:
            read, write = await stack.enter_async_context(
                _over_http(
                    target,
                    dataclasses.replace(config, listen=("127.0.0.1", 0)),
                    env,
                    workdir,
                    stderr_path,
                )  # fmt: skip
            )
        else:
            argv = await proxy_argv(stack, target, config)
            # V16: the proxy and all it starts end with the connection (the SDK ends the
            # proxy; the tree's end takes what it left, run after the client has closed).
            tree = ProcessTree()
            stack.push_async_callback(tree.aend)
            cwd = str(workdir)
            wrapped = tree.command(argv, cwd, env)
            params = StdioServerParameters(
                command=wrapped[0], args=wrapped[1:], env=tree.environment(env), cwd=cwd
            )
            errlog = stack.enter_context(stderr_path.open("w"))
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
        session = await stack.enter_async_context(ClientSession(read, CallTap(write, sent)))
        await session.initialize()
        yield Connection(
            session, workdir / REPORT_FILE, workdir / EVENT_LOG_FILE, stderr_path, sent_calls=sent
        )


async def proxy_config_in(
    stack: contextlib.AsyncExitStack, target: ProxyTarget, workdir: Path
) -> ProxyConfig:
    """The proxy's config for a run in `workdir` (its report file and event log there); a
    built-in upstream served over HTTP is started in `stack` first and the proxy pointed at its
    URL. The upstream's env goes in through the proxy's own
    environment (which the upstream inherits, X2), not its command line: any local user can
    read a command line (V3)."""
    config = target.proxy_config(workdir / REPORT_FILE, workdir / EVENT_LOG_FILE)
    config = dataclasses.replace(config, upstream_env={})
    if target.serve_over_http is None:
        return config
    url = await stack.enter_async_context(
        served_over_http(await upstream_argv(target), workdir / "upstream.stderr")
    )
    return dataclasses.replace(config, upstream_command=None, upstream_args=(), upstream_url=url)


async def proxy_argv(
    stack: contextlib.AsyncExitStack, target: ProxyTarget, config: ProxyConfig
) -> list[str]:
    """The command that runs `agent-harness proxy` for `config`, handed over as one file in a
    folder of its own (in `stack`) that the agent under test never sees (U3); a fork of the
    runner's fork server where it runs (runner/processes/forkserver.py), its built-in upstream too: still
    a real proxy process in front of a real upstream process, without their imports paid
    again."""
    forks = await asyncio.to_thread(_forks)
    if forks and target.builtin_kind is not None and config.upstream_command is not None:
        config = _forked_upstream(config)
    folder = Path(stack.enter_context(private_folder()))
    fresh = proxy_command(config, folder)
    if not forks:
        return fresh
    from runner.processes import forkserver

    return forkserver.SERVER.command("agent-harness", fresh.index("proxy"), fresh)


async def upstream_argv(target: ProxyTarget) -> list[str]:
    """The command that serves a built-in upstream over HTTP (`serve_over_http`): a fork of
    the runner's fork server where it runs, as `proxy_argv`."""
    assert target.serve_over_http is not None
    fresh = list(target.serve_over_http)
    if not await asyncio.to_thread(_forks):
        return fresh
    from runner.processes import forkserver

    return forkserver.SERVER.command("upstream", _upstream_head(fresh), fresh)


def _upstream_head(argv: list[str]) -> int:
    """How many words of a built-in upstream's command stand for the program (the interpreter,
    its flags, `-m runner.upstreams`): the fork gets the rest as its arguments."""
    return argv.index("runner.upstreams") + 1


def _forks() -> str | None:
    """The runner's fork server's socket, or None (off, or it could not start)."""
    from runner.processes import forkserver

    return forkserver.SERVER.address() if forkserver.enabled() else None


def _forked_upstream(config: ProxyConfig) -> ProxyConfig:
    """A built-in upstream over stdio (`stdio_command`, the config's command) as a fork."""
    from runner.processes import forkserver

    assert config.upstream_command is not None
    fresh_upstream = [config.upstream_command, *config.upstream_args]
    upstream = forkserver.SERVER.command("upstream", _upstream_head(fresh_upstream), fresh_upstream)
    return dataclasses.replace(
        config, upstream_command=upstream[0], upstream_args=tuple(upstream[1:])
    )


@contextlib.asynccontextmanager
async def _over_http(
    target: ProxyTarget, config: ProxyConfig, env: dict[str, str], workdir: Path, stderr_path: Path
) -> AsyncIterator[tuple[Any, Any]]:
    """`proxy --listen` as a subprocess and the SDK's streamable HTTP client to it (H1).

    The proxy ends its run on SIGTERM (an HTTP agent has no end of input) and then writes its
    final report; the client's session is closed first.
    """
    import signal

    from mcp.client.streamable_http import streamable_http_client

    async with contextlib.AsyncExitStack() as stack:
        argv = await proxy_argv(stack, target, config)
        served = served_over_http(argv, stderr_path, env=env, cwd=workdir, sig=signal.SIGTERM)
        url = await stack.enter_async_context(served)
        async with streamable_http_client(url) as (read, write):
            yield read, write


@contextlib.asynccontextmanager
async def served_over_http(
    argv: list[str],
    stderr_path: Path,
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    sig: int | None = None,
) -> AsyncIterator[str]:
    """Run a process that serves streamable HTTP; its URL, once it says where it listens.

    At the end it gets `sig` (SIGTERM by default) and a few seconds to finish.
    """
    tree = ProcessTree()  # V16: the served process and all it starts end with the block
    proc = await tree.start(
        argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE, env=env, cwd=cwd,
    )  # fmt: skip
    assert proc.stderr is not None
    lines: list[bytes] = []
    drain: asyncio.Task[None] | None = None
    try:
        async with asyncio.timeout(SERVE_TIMEOUT_S):
            while line := await proc.stderr.readline():
                lines.append(line)
                if found := _LISTENING.search(line.decode("utf-8", "replace")):
                    break
            else:
                tail = b"".join(lines[-5:]).decode("utf-8", "replace").strip()
                raise RuntimeError(f"the upstream ended before it listened: {tail}")
        drain = asyncio.create_task(_keep(proc.stderr, stderr_path, lines))
        yield found.group(1)
    finally:
        if proc.returncode is None:
            proc.send_signal(sig) if sig is not None else proc.terminate()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(exited(proc), SERVE_TIMEOUT_S / 4)
        await tree.aend()  # what is left (all of it, past the wait): its pipes close
        await exited(proc)
        if drain is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(drain, SERVE_TIMEOUT_S / 4)


async def _keep(stream: asyncio.StreamReader, path: Path, lines: list[bytes]) -> None:
    """Keep reading a child's stderr (so it never blocks) into a file for error reports."""
    with path.open("wb") as out:
        out.writelines(lines)
        while line := await stream.readline():
            out.write(line)


@contextlib.asynccontextmanager
async def in_process_connection(
    target: ProxyTarget, workdir: Path, upstream: UpstreamServer | None = None
) -> AsyncIterator[Connection]:
    """Proxy and upstream hosted here, over memory streams (the same Proxy code): the built-in
    upstream, or `upstream`, an MCP server over the SDK's streams (e.g. a bridge to a server
    process that serves many runs one after the other)."""
    from mcp.client.session import ClientSession

    ledger = None
    if upstream is None:
        if target.builtin_kind is None:
            raise ValueError("in-process runs need a built-in upstream")
        from runner.upstreams import LedgerInMemory

        ledger = LedgerInMemory(target.builtin_kind)

    report = workdir / REPORT_FILE
    config = target.proxy_config(None, None)  # the report is handed over, not written
    hosted = (
        in_process_proxy(config, ledger.serve, over_lines=True)
        if ledger is not None
        else in_process_proxy(config, upstream)  # type: ignore[arg-type]
    )
    async with hosted as proxy:
        sent: dict[str, str | None] = {}
        async with ClientSession(proxy.read_stream, CallTap(proxy.write_stream, sent)) as client:
            await client.initialize()
            yield Connection(
                client, report, workdir / EVENT_LOG_FILE, None, proxy.events, sent_calls=sent,
                ledger=ledger, final_report=lambda: proxy.report_text,
            )

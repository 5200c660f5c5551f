"""U1: one run of an agent that is a command (any program that speaks MCP to the proxy).

The runner puts the proxy in front of the cell's upstream, hands the command its MCP endpoint
as a generated MCP client configuration (the common `mcpServers` shape) and as environment
variables, starts it as a process tree (V16: when it ends, or at its time limit, everything it
started ends with it, `setsid` children too), keeps its standard output and error (bounded,
redacted before they are cut: V15) as the transcript's last entries,
and judges the run like any other: the proxy's report, the upstream's real rows or truth probe,
agreement (R10). With `model:` the runner also serves the agent's model at an OpenAI-compatible
endpoint (runner.models.endpoint); then it knows every tool call the model asked for, and an
execution no such call accounts for was made by the agent's client layer (`client_retry`).

- stdio: the configuration's server is `agent-harness proxy ...`: the agent's MCP client
  starts the proxy itself, as it would any MCP server;
- http: the runner starts `agent-harness proxy --listen 127.0.0.1:0` and hands over its URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import re
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.base.reaper import ProcessTree, exited
from harness.base.redact import REDACT_MARGIN, TextRedactor, argv_secrets
from harness.proxy import CallReceived, ToolsListed, value_key
from runner.execute.connect import (
    EVENT_LOG_FILE,
    REPORT_FILE,
    Connection,
    ProxyTarget,
    proxy_argv,
    proxy_config_in,
    served_over_http,
)
from runner.experiment import AgentSpec, ExperimentSpec, resolved_command
from runner.experiment.matrix import RunCell
from runner.experiment.records import RunRecord, TranscriptEntry
from runner.models.endpoint import ModelEndpoint, serve_model
from runner.models.loop import AgentResult
from runner.processes.workdirs import run_workdir

SERVER_NAME = "agent-harness"  # the server's name in the generated mcpServers configuration
PIPE_WAIT_S = 5.0  # after the agent ended: how long its output may take to arrive whole
REPORT_WAIT_S = 15.0  # after a stdio agent ended: how long its proxy may take to finish
_REPORT_DONE = re.compile(rb'"status"\s*:\s*"(?:finished|failed)"')  # the final report (O2, E10)


def mcp_config(server: dict[str, Any]) -> dict[str, Any]:
    """The MCP client configuration in the common shape (Claude Desktop, Cursor, frameworks)."""
    return {"mcpServers": {SERVER_NAME: server}}


def _substitute(text: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        text = text.replace(f"{{{name}}}", value)
    return text


# U3: what of the runner's environment an agent gets besides its spec entry's `env` and the
# AGENT_HARNESS_* variables (HOME and TMPDIR are the run's own, fresh).
PASSED_ENV = ("PATH", "LANG")


def agent_environment(
    agent: AgentSpec, values: dict[str, str], given: dict[str, str], home: Path, tmp: Path
) -> dict[str, str]:
    """The agent's environment (U3): PATH and LANG of the runner's, a fresh HOME and TMPDIR,
    the spec's `env` (os.environ/NAME read now, placeholders filled in), then the
    AGENT_HARNESS_* variables; never the runner's other variables (its provider keys)."""
    env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    env.setdefault("LANG", "C.UTF-8")
    env.update({"HOME": str(home), "TMPDIR": str(tmp)})
    for key, value in agent.env.items():
        if value.startswith("os.environ/"):
            value = os.environ.get(value.removeprefix("os.environ/"), "")
        env[key] = _substitute(value, values)
    env.update(given)
    return env


def agent_argv(agent: AgentSpec, spec: ExperimentSpec, values: dict[str, str]) -> list[str]:
    """The command with its placeholders filled in: the files it names beside the spec made
    absolute (Q1); another relative program path (one with a `/`) is taken from the runner's
    folder, as `cwd` is, since the agent starts in its own (U3)."""
    cwd = Path(agent.cwd).absolute() if agent.cwd is not None else None
    argv = [_substitute(part, values) for part in resolved_command(agent.command, spec.folder, cwd)]
    if "/" in argv[0] and not os.path.isabs(argv[0]):
        argv[0] = str(Path(argv[0]).absolute())
    return argv


def run_folders(root: Path) -> tuple[Path, Path, Path, Path]:
    """U3: a run's folders, siblings under its temporary folder: the harness's files (event
    log, report, locks, the upstream's ledger), the agent's empty working folder, its fresh
    HOME (where its generated MCP configuration lies) and its TMPDIR."""
    folders = tuple(root / name for name in ("harness", "agent", "home", "tmp"))
    for folder in folders:
        folder.mkdir(mode=0o700)
    return folders  # type: ignore[return-value]


def listed_tools(event_log: Path) -> Callable[[], Awaitable[list[str] | None]]:
    """The upstream's tool names from the proxy's event log: its last `tools_listed` event
    (None before the proxy has listed them)."""

    async def read() -> list[str] | None:
        try:
            text = await asyncio.to_thread(event_log.read_text, "utf-8", "replace")
        except OSError:
            return None
        for line in reversed(text.splitlines()):
            if '"tools_listed"' in line:
                with contextlib.suppress(ValueError, TypeError, KeyError):
                    return [str(t["name"]) for t in json.loads(line)["tools"]]
        return None

    return read


async def execute_command_run(
    cell: RunCell,
    spec: ExperimentSpec,
    *,
    patch_text: str | None,
    system_prompt: str,
    keep_dir: Path | None = None,
) -> RunRecord:
    """Run the cell's command agent once; failures become a record with status=error."""
    from runner.execute import run as runmod

    agent = cell.model
    assert isinstance(agent, AgentSpec)
    started_at, started = datetime.now(UTC), time.perf_counter()
    workdir_ctx = run_workdir(cell.run_id)
    workdir, agent_dir, home, tmp = run_folders(Path(workdir_ctx.name))
    target = dataclasses.replace(
        runmod.proxy_target(cell, spec, workdir), agent_over_http=agent.transport == "http"
    )
    result = AgentResult()
    error: str | None = None
    output: list[TranscriptEntry] = []
    endpoint: ModelEndpoint | None = None
    probe = cell.upstream.truth_probe
    probed = None
    code: int | None = None
    async with runmod._probe_lock(cell.experiment, cell.upstream.name, probe):
        before = await runmod._read_probe(probe) if probe is not None else None
        try:
            async with contextlib.AsyncExitStack() as stack:
                if agent.model is not None:
                    endpoint = await stack.enter_async_context(
                        serve_model(
                            agent.model, cell.seed, spec.limits.model_timeout_s,
                            mcp_tools=listed_tools(workdir / EVENT_LOG_FILE),
                            servers=(SERVER_NAME,),
                        )
                    )  # fmt: skip
                server, extra = await stack.enter_async_context(_proxy_for(target, workdir))
                config_path = home / "mcp.json"
                config_path.write_text(json.dumps(mcp_config(server), indent=2))
                values = {
                    "mcp_config": str(config_path),
                    "workdir": str(agent_dir),
                    **({"mcp_url": server["url"]} if "url" in server else {}),
                    **(model_values(endpoint) if endpoint is not None else {}),
                }
                given = {
                    "AGENT_HARNESS_MCP_CONFIG": str(config_path),
                    "AGENT_HARNESS_MCP_SERVER": SERVER_NAME,
                    "AGENT_HARNESS_TRANSPORT": agent.transport,
                    "AGENT_HARNESS_PROMPT": system_prompt,
                    "AGENT_HARNESS_PATCH": patch_text or "",
                    "AGENT_HARNESS_USER_MESSAGE": cell.conversation.user,
                    "AGENT_HARNESS_FOLLOW_UPS": json.dumps(list(cell.conversation.follow_ups)),
                    "AGENT_HARNESS_RUN_ID": cell.run_id,
                    "AGENT_HARNESS_SEED": str(cell.seed),
                    **extra,
                }
                if endpoint is not None:
                    given.update(
                        {f"AGENT_HARNESS_{k.upper()}": v for k, v in model_values(endpoint).items()}
                    )
                argv = agent_argv(agent, spec, values)
                cwd = Path(agent.cwd).absolute() if agent.cwd is not None else agent_dir
                env = agent_environment(agent, values, given, home, tmp)
                settle = (
                    (lambda: _report_finished(workdir / REPORT_FILE, REPORT_WAIT_S))
                    if agent.transport == "stdio"
                    else None
                )
                code, timed_out, output = await run_agent(argv, cwd, env, agent, settle)
                if timed_out:
                    error = (
                        f"the agent ran past its time limit ({agent.timeout_s:g} s); its "
                        "process group was killed"
                    )
                result.stopped_by = None if code == 0 else f"exit code {code}"
                code = None if timed_out else code
        except Exception as exc:  # one run inside a batch: it becomes an error record
            error = runmod._describe(exc, None, workdir)
        if probe is not None:
            after = await runmod._read_probe(probe)
            probed = runmod.Probed.of(before, after)
    sent: dict[str, str | None] = {}
    if endpoint is not None:
        result.messages = endpoint.conversation()
        answers = [s.answer for s in endpoint.served]
        result.turns = len(answers)
        result.tool_calls = sum(len(a.get("tool_calls") or ()) for a in answers)
        result.usage.prompt_tokens = sum(s.prompt_tokens for s in endpoint.served)
        result.usage.completion_tokens = sum(s.completion_tokens for s in endpoint.served)
        finals = [a.get("content") for a in answers if not a.get("tool_calls")]
        result.final_answer = finals[-1] if finals else None
    connection = Connection(None, workdir / REPORT_FILE, workdir / EVENT_LOG_FILE)
    left = runmod.RunLeft(cell, connection, workdir)  # the event log, parsed once
    if error is None:
        error = failed_to_run(code, output, left.events)
    if endpoint is not None:
        sent = model_requested(left.events, endpoint)
    connection.sent_calls = sent
    try:
        record = runmod._record(
            cell, spec, patch_text, result, error, connection, workdir, started_at, started,
            probed, left,
        )  # fmt: skip
        record.transcript = [*record.transcript, *_renumbered(output, len(record.transcript))]
        if agent.model is None:
            for row in record.duplicates:  # M2: who asked is unknown without the model's side
                row.attribution = "unknown"
                row.reason = (
                    "the agent's model requests are unknown (it does not use the runner's "
                    f"model endpoint); {row.reason}"
                )
        if record.status == "ok":
            await runmod._judge_honesty(record, cell, spec, result, None, workdir, left)
        return record
    finally:
        if keep_dir is not None:
            import shutil

            shutil.copytree(workdir, keep_dir / cell.run_id, dirs_exist_ok=True)
        await asyncio.shield(asyncio.to_thread(workdir_ctx.cleanup))


def model_values(endpoint: ModelEndpoint) -> dict[str, str]:
    """What an agent's model client needs of the endpoint (placeholders, and as
    AGENT_HARNESS_MODEL_* variables): its URLs, the model's name and the run's API key (U5)."""
    return {
        "model_base_url": endpoint.base_url,
        "model_server_url": endpoint.server_url,
        "model": endpoint.model,
        "model_api_key": endpoint.token,
    }


LAST_LINES = 3  # of the agent's output, in the error of a run it failed to run (Q1)
PROXY_PREFIX = "[agent-harness] "  # harness.proxy.main.log's lines


def failed_to_run(code: int | None, output: list[TranscriptEntry], events: list[Any]) -> str | None:
    """Q1: why a command agent's run did not run, or None. An agent that exited non-zero, or
    ended before its MCP session started (the proxy saw no session: no tool listing, no call),
    failed to run; its verdict would be a NOT_TESTED that says nothing about the agent."""
    if code is None:  # it did not end by itself: a time limit or a failure already named
        return None
    started = any(isinstance(e, ToolsListed | CallReceived) for e in events)
    if code == 0 and started:
        return None
    ended = f"the agent exited with code {code}"
    if code < 0:  # asyncio's returncode for a signal
        with contextlib.suppress(ValueError):
            ended = f"the agent was killed by {signal.Signals(-code).name}"
    if not started:
        ended += " before its MCP session started (the proxy saw no initialize)"
    return ended + _last_lines(output)


def _last_lines(output: list[TranscriptEntry]) -> str:
    """`; its last output: ...`: the last lines of its stderr, else of its stdout, one line;
    without the lines of the stdio proxy it started, which share its stderr."""
    for role in ("stderr", "stdout"):
        lines = [line.strip() for e in output if e.role == role for line in e.content.splitlines()]
        lines = [x for x in lines if x and not x.startswith(PROXY_PREFIX)][-LAST_LINES:]
        if lines:
            return "; its last output: " + " | ".join(line[:200] for line in lines)
    return "; it printed nothing"


def model_requested(events: list[Any], endpoint: ModelEndpoint) -> dict[str, str | None]:
    """M2 for a command agent: each tools/call the proxy received -> the model's tool call it
    served, matched by tool and arguments in order; a call beyond the model's requests gets
    None (no model turn asked for it: the client layer sent it)."""
    wanted: dict[tuple[str, str], list[str]] = {}
    for call_id, tool, args in endpoint.tool_calls():
        key = (tool, value_key(args) if isinstance(args, dict) else "")
        wanted.setdefault(key, []).append(call_id)
    sent: dict[str, str | None] = {}
    for event in events:
        if isinstance(event, CallReceived) and event.rpc_id is not None:
            ids = wanted.get((event.tool, value_key(event.arguments)))
            sent[str(event.rpc_id)] = ids.pop(0) if ids else None
    return sent


@contextlib.asynccontextmanager
async def _proxy_for(
    target: ProxyTarget, workdir: Path
) -> AsyncIterator[tuple[dict[str, Any], dict[str, str]]]:
    """The mcpServers entry for the proxy and the AGENT_HARNESS_MCP_* variables; over HTTP the
    proxy runs (the runner's child) until the block ends, then gets SIGTERM and writes its
    final report."""
    async with contextlib.AsyncExitStack() as stack:
        config = await proxy_config_in(stack, target, workdir)
        if target.agent_over_http:
            listening = dataclasses.replace(config, listen=("127.0.0.1", 0))
            argv = await proxy_argv(stack, target, listening)
            env = {**os.environ, **target.upstream_env}
            url = await stack.enter_async_context(
                served_over_http(
                    argv, workdir / "proxy.stderr", env=env, cwd=workdir, sig=signal.SIGTERM
                )
            )
            yield {"type": "http", "url": url}, {"AGENT_HARNESS_MCP_URL": url}
        else:
            argv = await proxy_argv(stack, target, config)
            server = {"command": argv[0], "args": argv[1:], "env": dict(target.upstream_env)}
            server["cwd"] = str(workdir)
            yield (
                server,
                {
                    "AGENT_HARNESS_MCP_COMMAND": argv[0],
                    "AGENT_HARNESS_MCP_ARGS": json.dumps(argv[1:]),
                },
            )


async def run_agent(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    agent: AgentSpec,
    settle: Callable[[], Awaitable[None]] | None = None,
) -> tuple[int | None, bool, list[TranscriptEntry]]:
    """Run the command in a process group of its own; (exit code, timed out, its output).
    After it ended by itself, `settle` waits for what it started to finish (the proxy's final
    report) before whatever is left of its process group is killed."""
    tree = ProcessTree()  # V16: the agent and everything it starts, setsid children too
    try:
        proc = await tree.start(
            argv, cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
    except BaseException:
        await tree.aend()
        raise
    assert proc.stdout is not None and proc.stderr is not None
    kept = [_Kept(agent.max_output_bytes), _Kept(agent.max_output_bytes)]
    readers = [
        asyncio.create_task(kept[0].read(proc.stdout)),
        asyncio.create_task(kept[1].read(proc.stderr)),
    ]
    timed_out = False
    try:
        await asyncio.wait_for(exited(proc), agent.timeout_s)
        if settle is not None:
            await settle()
    except TimeoutError:
        timed_out = True
    finally:
        await tree.aend()  # what the agent left running (or all of it, at the limit)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(exited(proc), PIPE_WAIT_S)
    for task in readers:
        # a process that left the tree may keep the pipe open: what came so far is kept
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(task, PIPE_WAIT_S)
    # V15: redacted before it is cut, with what the agent was given as secrets.
    redactor = TextRedactor([*(env[k] for k in agent.env if k in env), *argv_secrets(argv)])
    texts = [k.text(redactor) for k in kept]
    # The pipes a left-over child holds are closed on our side (the process has exited).
    transport = getattr(proc, "_transport", None)
    if transport is not None:
        transport.close()
    entries = [
        TranscriptEntry(idx=0, role=role, content=text)  # type: ignore[arg-type]
        for role, text in zip(("stdout", "stderr"), texts, strict=True)
        if text
    ]
    return proc.returncode, timed_out, entries


class _Kept:
    """A stream's first `limit` bytes, and `REDACT_MARGIN` more so that a secret the cut would
    split is still whole when the text is redacted (the rest read and counted, never kept)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.kept = bytearray()
        self.dropped = 0

    async def read(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            room = max(0, self.limit + REDACT_MARGIN - len(self.kept))
            self.kept += chunk[:room]
            self.dropped += len(chunk) - min(room, len(chunk))

    def text(self, redactor: TextRedactor) -> str:
        """What was kept, redacted, then cut to `limit` bytes (V15)."""
        return redactor.cut(self.kept.decode("utf-8", "replace"), self.limit, self.dropped)


async def _report_finished(path: Path, limit_s: float) -> None:
    """Wait (bounded) until the proxy the agent started has written its final report; not at
    all when it wrote none (a proxy writes its first report as it starts): an agent that
    ended without starting its proxy left nothing to wait for (Q1)."""
    if not path.exists():
        return
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            head = path.read_bytes()[:4096]
            if _REPORT_DONE.search(head):
                return
        await asyncio.sleep(0.05)


def _renumbered(entries: list[TranscriptEntry], start: int) -> list[TranscriptEntry]:
    return [e.model_copy(update={"idx": start + i}) for i, e in enumerate(entries)]

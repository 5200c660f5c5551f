"""The installed `agent-harness proxy` as a real process, spoken to over its stdio.

`proxy_session(...)` starts the proxy in front of the counting server (which appends a line per
call it REALLY executed to a ground-truth file) and connects an initialised SDK client; `Run`
holds what the process left behind. `via_proxy`/`mcp_process` put any server behind it,
`scripted` the scripted upstream (tests/support/servers/scripted_upstream.py). The waits are
bounded: processes gone, a file that says something.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession

from harness.wire.transport import StreamLineReader, StreamLineWriter, mcp_streams
from tests.support import launcher
from tests.support.linetap import READ_LIMIT, TapReader
from tests.support.paths import COUNTING_SERVER, SERVERS

SERVER = COUNTING_SERVER
SCRIPTED = SERVERS / "scripted_upstream.py"
BOOK = {"guest": "Ann", "date": "2026-12-01"}
DEADLINE_S = 30  # any single wait on a proxy process


@dataclass
class Run:
    """One proxy process and what it left behind."""

    proc: asyncio.subprocess.Process
    truth_path: Path
    report_path: Path | None
    stderr_path: Path
    client: ClientSession | None = None
    tap: TapReader | None = None
    writer: StreamLineWriter | None = None
    returncode: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def truth(self) -> list[tuple[str, dict[str, Any]]]:
        """(tool, arguments) of every call the upstream really executed, in order."""
        if not self.truth_path.exists():
            return []
        entries = [json.loads(x) for x in self.truth_path.read_text().splitlines() if x]
        return [(e["tool"], e["arguments"]) for e in entries if "tool" in e]

    def truth_entries(self) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.truth_path.read_text().splitlines() if x]

    def report(self) -> dict[str, Any]:
        assert self.report_path is not None
        return json.loads(self.report_path.read_text())

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    async def raw(self, body: dict[str, Any] | bytes) -> None:
        """Send one line past the SDK client (for what it would refuse to send)."""
        assert self.writer is not None
        line = body if isinstance(body, bytes) else json.dumps(body).encode()
        await self.writer.write_line(line)

    async def wait_exit(self) -> int:
        with anyio.fail_after(DEADLINE_S):
            self.returncode = await self.proc.wait()
        return self.returncode


def proxy_argv(
    bin_path: Path,
    truth: Path,
    *flags: str,
    server: tuple[str, ...] = (),
    report: Path | None = None,
) -> list[str]:
    """`agent-harness proxy` in front of the counting server (X1: --flag=--value form)."""
    argv = [
        str(bin_path), "proxy",
        "--upstream-command", sys.executable,
        "--upstream-arg", str(SERVER),
        "--upstream-arg=--ground-truth", "--upstream-arg", str(truth),
        *(f"--upstream-arg={opt}" for opt in server),
        *flags,
    ]  # fmt: skip
    if report is not None:
        argv += ["--report-file", str(report)]
    return argv


async def start(argv: list[str], tmp_path: Path, **popen: Any) -> asyncio.subprocess.Process:
    err = (tmp_path / "proxy.err").open("ab")
    try:
        return await launcher.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            limit=READ_LIMIT,
            **popen,
        )
    finally:
        err.close()


@asynccontextmanager
async def proxy_session(
    bin_path: Path,
    tmp_path: Path,
    *flags: str,
    server: tuple[str, ...] = (),
    report: Path | None | bool = True,
    argv: list[str] | None = None,
    client_kwargs: dict[str, Any] | None = None,
    **popen: Any,
) -> AsyncIterator[Run]:
    """Start the proxy, connect an initialised SDK client; on exit close stdin, await exit."""
    truth = tmp_path / "truth.jsonl"
    report_path = tmp_path / "report.json" if report is True else (report or None)
    argv = argv or proxy_argv(bin_path, truth, *flags, server=server, report=report_path)
    proc = await start(argv, tmp_path, **popen)
    run = Run(proc, truth, report_path, tmp_path / "proxy.err")
    assert proc.stdout is not None and proc.stdin is not None
    run.tap = TapReader(StreamLineReader(proc.stdout, READ_LIMIT), DEADLINE_S)
    run.writer = StreamLineWriter(proc.stdin)
    try:
        with anyio.fail_after(DEADLINE_S):
            async with mcp_streams(run.tap, run.writer) as (read, write):
                async with ClientSession(read, write, **(client_kwargs or {})) as client:
                    await client.initialize()
                    run.client = client
                    yield run
        if proc.returncode is None:
            await run.wait_exit()
        run.returncode = proc.returncode
    finally:
        if proc.returncode is None:  # a failed test: never leave a proxy behind
            proc.kill()
            await proc.wait()


def gone(pid: int) -> bool:
    """The process no longer runs (a zombie nobody reaped yet counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


async def wait_gone(pids: list[int]) -> list[int]:
    """Poll process state until every pid is gone or the deadline passes; the ones left."""
    deadline = time.monotonic() + 10
    while (alive := [p for p in pids if not gone(p)]) and time.monotonic() < deadline:
        await anyio.sleep(0.05)
    return alive


async def wait_file(path: Path, found: Callable[[str], bool]) -> str:
    """Poll a file until its text satisfies `found` (bounded)."""
    with anyio.fail_after(DEADLINE_S):
        while True:
            content = path.read_text() if path.exists() else ""
            if found(content):
                return content
            await anyio.sleep(0.02)


def children_of(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def is_supervisor(pid: int) -> bool:
    """The proxy's group supervisor (V7, harness/wire/supervisor.py), not the upstream."""
    try:
        return b"agent-harness-supervisor" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def upstream_of(pid: int) -> int:
    """The proxy's one child that is not its supervisor."""
    [child] = [c for c in children_of(pid) if not is_supervisor(c)]
    return child


def via_proxy(bin_path: Path, server_argv: list[str], *flags: str) -> list[str]:
    """argv of the proxy in front of `server_argv` (every arg as --upstream-arg=V, X1)."""
    return [
        str(bin_path), "proxy", "--upstream-command", server_argv[0],
        *(f"--upstream-arg={arg}" for arg in server_argv[1:]),
        *flags,
    ]  # fmt: skip


@asynccontextmanager
async def mcp_process(
    argv: list[str], stderr: Path, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[ClientSession, TapReader]]:
    """An initialised SDK client over the stdio of `argv`; every line it received is tapped.
    On exit stdin closes and the process's own exit is awaited (bounded), never cut short as
    the SDK's stdio_client does after 2 s."""
    with stderr.open("ab") as err:
        proc = await launcher.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            limit=READ_LIMIT,
            **({"env": env} if env is not None else {}),
        )
    assert proc.stdin is not None and proc.stdout is not None
    tap = TapReader(StreamLineReader(proc.stdout, READ_LIMIT), DEADLINE_S)
    try:
        with anyio.fail_after(DEADLINE_S):
            async with mcp_streams(tap, StreamLineWriter(proc.stdin)) as (read, write):
                async with ClientSession(read, write) as client:
                    await client.initialize()
                    yield client, tap
            await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def scripted(bin_path: Path, tmp_path: Path, script: dict[str, Any], *flags: str) -> list[str]:
    """`agent-harness proxy` in front of the scripted upstream."""
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    return [
        str(bin_path),
        "proxy",
        "--upstream-command",
        sys.executable,
        "--upstream-arg",
        str(SCRIPTED),
        "--upstream-arg",
        str(path),
        "--upstream-arg",
        str(tmp_path / "truth.jsonl"),
        "--audit-tools",
        "off",
        *flags,
    ]

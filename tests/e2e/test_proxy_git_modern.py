"""Protocol revision 2026-07-28 end to end against a real third-party server (X11, H1, H2).

The upstream is mcp-server-git from PyPI (built on the Python `mcp` SDK, which speaks
2026-07-28; the npm reference servers stop at 2025-11-25): over stdio as it ships, or its own
server object behind the SDK's streamable HTTP transport (tests/support/servers/pypi_over_http.py).
The agent is the official Python SDK client pinned to 2026-07-28 (`server/discover`, `_meta`
on every request, no session), on stdio or on HTTP (`proxy --listen`): four combinations.

Ground truth is git itself: `git log` of the repository the server works in. What the server
received is recorded on its side of the wire (a stdio tap, or an HTTP relay), so the
revision's facts are checked where the proxy speaks to it, not where it says it does.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from harness.wire.protocol import PROTOCOL_VERSION_KEY
from tests.support import launcher
from tests.support.httpkit import DEADLINE_S, Running, mcp_client, running
from tests.support.httptap import HttpTap
from tests.support.paths import SERVERS
from tests.support.prereq import PY_INSTALL_HINT, require

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

COMBOS = ["stdio-stdio", "stdio-http", "http-stdio", "http-http"]  # agent side - upstream side
MODERN, HANDSHAKE = "2026-07-28", "2025-11-25"
MESSAGE = "Add release notes"


def git(repo: Path, *args: str) -> str:
    done = launcher.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True, timeout=30,
        env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"},
    )  # fmt: skip
    return done.stdout


def subjects(repo: Path) -> list[str]:
    """Ground truth: the subject of every commit on HEAD, newest first."""
    return git(repo, "log", "--format=%s").splitlines()


@pytest.fixture
def work_repo(git_repo: Path) -> Path:
    """The conftest repository with a staged file (the change to commit) and an untracked one
    (work in progress that a blind `git add .` sweeps up)."""
    require(
        importlib.util.find_spec("mcp_server_git") is not None,
        "Python package mcp_server_git not installed", PY_INSTALL_HINT,
    )  # fmt: skip
    (git_repo / "NOTES.md").write_text("release notes\n", encoding="utf-8")
    git(git_repo, "add", "NOTES.md")
    (git_repo / "todo.txt").write_text("later\n", encoding="utf-8")
    return git_repo


@dataclass
class Run:
    """One agent session through the proxy in front of mcp-server-git."""

    client: Any
    repo: Path
    report: Path
    events: Path
    proxy: Running | None  # None: the agent speaks stdio (the proxy is its child)
    stdio_record: Path | None  # the stdio tap's record (RECORD.in: what the server received)
    tap: HttpTap | None = None
    received: list[dict[str, Any]] = field(default_factory=list)
    sessions: set[str] = field(default_factory=set)  # HTTP: Mcp-Session-Id values seen

    async def call(self, tool: str, **arguments: Any) -> tuple[bool, str]:
        result = await self.client.call_tool(tool, {"repo_path": str(self.repo), **arguments})
        return result.is_error, result.content[0].text

    async def finish(self) -> dict[str, Any]:
        """The final report; then what the server received."""
        if self.proxy is not None:
            assert await self.proxy.stop() == 0
        with anyio.fail_after(DEADLINE_S):
            while json.loads(self.report.read_text()).get("status") != "finished":
                await anyio.sleep(0.05)  # a stdio proxy writes it as it exits: poll the file
        if self.stdio_record is not None:
            lines = Path(f"{self.stdio_record}.in").read_text().splitlines()
            self.received = [json.loads(line) for line in lines if line.strip()]
        if self.tap is not None:
            for session, way, body in self.tap.messages:
                self.sessions.add(session)
                if way == "sent":
                    parsed = json.loads(body)
                    self.received += parsed if isinstance(parsed, list) else [parsed]
        return json.loads(self.report.read_text())

    def events_of(self, kind: str) -> list[dict[str, Any]]:
        lines = self.events.read_text().splitlines()
        return [e for e in map(json.loads, lines) if e["type"] == kind]


@contextlib.asynccontextmanager
async def through_proxy(
    combo: str, repo: Path, tmp_path: Path, bin_path: Path, *flags: str, version: str = MODERN
) -> AsyncIterator[Run]:
    agent, upstream = combo.split("-")
    report, events, record = tmp_path / "report.json", tmp_path / "events.jsonl", None
    async with contextlib.AsyncExitStack() as stack:
        tap = None
        if upstream == "http":
            server = await stack.enter_async_context(running(
                [sys.executable, str(SERVERS / "pypi_over_http.py"), "--repository", str(repo)]
            ))  # fmt: skip
            tap = HttpTap(server.url)  # the server's side of the wire
            await tap.start()
            stack.push_async_callback(tap.stop)
            up = ["--upstream-url", tap.url]
        else:
            record = tmp_path / "upstream"
            server_argv = [str(SERVERS / "stdio_tap.py"), str(record), "--", sys.executable,
                           "-m", "mcp_server_git", "--repository", str(repo)]  # fmt: skip
            up = ["--upstream-command", sys.executable,
                  *(f"--upstream-arg={a}" for a in server_argv)]  # fmt: skip
        argv = [str(bin_path), "proxy", *up, "--report-file", str(report),
                f"--event-log={events}", "--audit-tools", "off", *flags]  # fmt: skip
        proxy = None
        modern = version == MODERN
        if agent == "http":
            proxy = await stack.enter_async_context(running([*argv, "--listen", "127.0.0.1:0"]))
            client = await stack.enter_async_context(mcp_client(url=proxy.url, modern=modern))
        else:
            client = await stack.enter_async_context(mcp_client(argv=argv, modern=modern))
        assert client.protocol_version == version
        run = Run(client, repo, report, events, proxy, record, tap)
        yield run
        await stack.aclose()  # the agent leaves, the upstream's record is complete


def assert_modern_wire(run: Run) -> None:
    """X11 where the proxy meets the upstream: no handshake, no session, `_meta` on every
    request, the proxy's own tools/list included."""
    methods = [m.get("method") for m in run.received]
    assert "initialize" not in methods and "server/discover" in methods
    requests = [m for m in run.received if "method" in m and "id" in m]
    own = [m for m in requests if str(m["id"]).startswith("agent-harness-")]
    assert [m["method"] for m in own] == ["tools/list"]  # the proxy's own listing (C7)
    for m in requests:
        assert m["params"]["_meta"][PROTOCOL_VERSION_KEY] == MODERN, m
    if run.tap is not None:
        assert run.sessions == {""}  # no Mcp-Session-Id, asked for or given
        posts = [(h, json.loads(body)) for verb, h, body in run.tap.requests if verb == "POST"]
        for headers, body in posts:  # each POST names its revision and method in headers
            assert headers["mcp-protocol-version"] == MODERN
            if "method" in body:
                assert headers["mcp-method"] == body["method"]


@pytest.mark.parametrize("combo", COMBOS)
async def test_x11_h1_2026_07_28_git_ghost_commit_resent_blindly_commits_twice(
    combo, work_repo, tmp_path, agent_harness_bin
):  # X11 H1 S2 J1
    async with through_proxy(combo, work_repo, tmp_path, agent_harness_bin,
                             "--scenario", "F1") as run:  # fmt: skip
        failed, text = await run.call("git_commit", message=MESSAGE)
        assert failed and "timed out" in text
        assert subjects(work_repo)[0] == MESSAGE  # it ran: a ghost write
        # The blind agent: "the commit failed, stage everything and commit again".
        assert not (await run.call("git_add", files=["."]))[0]
        failed, text = await run.call("git_commit", message=MESSAGE)
        assert not failed and "committed successfully" in text
    report = await run.finish()
    assert subjects(work_repo) == [MESSAGE, MESSAGE, "initial commit"]  # ground truth: twice
    assert report["verdict"] == "FAIL"
    assert {v["code"] for v in report["report"]["violations"]} == {"DUPLICATE_EXECUTION"}
    assert_modern_wire(run)


@pytest.mark.parametrize("combo", COMBOS)
async def test_x11_h1_2026_07_28_git_ghost_commit_checked_with_git_log_commits_once(
    combo, work_repo, tmp_path, agent_harness_bin
):  # X11 H1 S2 J2
    async with through_proxy(combo, work_repo, tmp_path, agent_harness_bin,
                             "--scenario", "F1") as run:  # fmt: skip
        assert (await run.call("git_commit", message=MESSAGE))[0]
        failed, log = await run.call("git_log", max_count=5)
        assert not failed and f"Message: {MESSAGE}" in log  # it is there: do not re-send
    report = await run.finish()
    assert subjects(work_repo) == [MESSAGE, "initial commit"]  # ground truth: once
    assert report["verdict"] == "PASS"
    assert "VERIFIED_NO_RETRY" in {o["code"] for o in report["report"]["observations"]}
    assert_modern_wire(run)


async def test_x11_h1_2025_11_25_contrast_the_same_ghost_commit_over_a_session(
    work_repo, tmp_path, agent_harness_bin
):  # X11 H1: the handshake revision on the same server: initialize, a session id upstream
    async with through_proxy("http-http", work_repo, tmp_path, agent_harness_bin,
                             "--scenario", "F1", version=HANDSHAKE) as run:  # fmt: skip
        assert (await run.call("git_commit", message=MESSAGE))[0]
        assert not (await run.call("git_add", files=["."]))[0]
        assert not (await run.call("git_commit", message=MESSAGE))[0]
    report = await run.finish()
    assert subjects(work_repo) == [MESSAGE, MESSAGE, "initial commit"]
    assert report["verdict"] == "FAIL"
    methods = [m.get("method") for m in run.received]
    assert "initialize" in methods and "server/discover" not in methods
    assert len(run.sessions - {""}) == 1  # one upstream session, named by its id


@pytest.mark.parametrize("combo", ["http-stdio", "http-http"])
async def test_h2_x11_f7_is_not_applied_to_a_2026_07_28_agent_which_has_no_session(
    combo, work_repo, tmp_path, agent_harness_bin
):  # H2 X11: a 404 "Session not found" means nothing without a session
    async with through_proxy(combo, work_repo, tmp_path, agent_harness_bin,
                             "--scenario", "F7") as run:  # fmt: skip
        failed, text = await run.call("git_commit", message=MESSAGE)
        assert not failed and "committed successfully" in text  # the real answer
        # One fault per run: the scenario is spent, not kept for a later write.
        failed, text = await run.call("git_create_branch", branch_name="feature")
        assert not failed and "Created branch 'feature'" in text
    report = await run.finish()
    assert subjects(work_repo) == [MESSAGE, "initial commit"]  # ground truth: exactly once
    assert "feature" in git(work_repo, "branch", "--format=%(refname:short)").split()
    assert report["verdict"] == "NOT_TESTED"
    reason = report["report"]["verdictReason"]
    assert "F7" in reason and "needs a session" in reason and MODERN in reason
    assert run.events_of("fault_applied") == []
    [skipped] = run.events_of("fault_not_applicable")
    assert skipped["fault"] == "F7" and "needs a session" in skipped["reason"]
    assert_modern_wire(run)

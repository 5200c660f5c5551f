"""Faults that exist only over HTTP (H2), each checked against what the upstream really executed.

The agent is a plain HTTP client speaking streamable HTTP (2025-11-25) to `proxy --listen`, so
every status, header and cut stream is seen as it is; the upstream is the counting server over
stdio, whose ground-truth file has one line per call it really executed.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from tests.support import launcher
from tests.support.httpkit import Agent, counting_upstream, executions, running

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@contextlib.asynccontextmanager
async def proxied(
    tmp_path: Path, bin_path: Path, *flags: str, upstream: str = "stdio", version: str = ""
) -> AsyncIterator[Agent]:
    """The agent's session through `proxy --listen` to the counting server (stdio or HTTP)."""
    truth, report = tmp_path / "truth.jsonl", tmp_path / "report.json"
    async with contextlib.AsyncExitStack() as stack:
        up, _ = await counting_upstream(stack, upstream, truth)
        argv = [str(bin_path), "proxy", *up, "--listen", "127.0.0.1:0",
                "--audit-tools", "off", "--report-file", str(report), *flags]  # fmt: skip
        proxy = await stack.enter_async_context(running(argv))
        http = await stack.enter_async_context(aiohttp.ClientSession())
        agent = Agent(http, proxy.url)
        agreed = await agent.initialize(version or "2025-11-25")
        assert agreed == (version or "2025-11-25")
        yield agent
        assert await proxy.stop() == 0


def verdict(tmp_path: Path) -> tuple[str, set[str]]:
    final = json.loads((tmp_path / "report.json").read_text())
    return final["verdict"], {v["code"] for v in final["report"]["violations"]}


async def test_h2_f6_stream_closed_after_the_write_ran_then_reissued_is_a_duplicate(
    tmp_path, agent_harness_bin
):  # H2 F6
    async with proxied(tmp_path, agent_harness_bin, "--scenario", "F6") as agent:
        status, _, messages = await agent.book(1)
        assert status == 200 and messages == []  # the stream closed without the answer
        assert len(executions(tmp_path / "truth.jsonl", "create_booking")) == 1  # it ran
        status, _, messages = await agent.book(2)  # the client re-issues it
        assert status == 200 and not messages[0]["result"]["isError"]
    assert len(executions(tmp_path / "truth.jsonl", "create_booking")) == 2  # ground truth
    assert verdict(tmp_path) == ("FAIL", {"DUPLICATE_EXECUTION"})


async def test_h2_f7_session_expiry_404_nothing_ran_and_a_new_session_books_once(
    tmp_path, agent_harness_bin
):  # H2 F7
    async with proxied(tmp_path, agent_harness_bin, "--scenario", "F7") as agent:
        status, _, messages = await agent.book(1)
        assert status == 404 and messages[0]["error"]["message"] == "Session not found"
        status, _, _ = await agent.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert status == 404  # the session is gone: the client must start a new one
        assert executions(tmp_path / "truth.jsonl", "create_booking") == []
        await agent.initialize()
        status, _, messages = await agent.book(3)
        assert status == 200 and not messages[0]["result"]["isError"]
    assert len(executions(tmp_path / "truth.jsonl", "create_booking")) == 1  # ground truth
    assert verdict(tmp_path)[0] == "PASS"


async def test_h2_f8_503_with_retry_after_nothing_ran_and_an_early_resend_violates_it(
    tmp_path, agent_harness_bin
):  # H2 F8
    async with proxied(tmp_path, agent_harness_bin, "--scenario", "F8", "--retry-after", "30") as agent:
        status, headers, messages = await agent.book(1)
        assert status == 503 and headers["Retry-After"] == "30" and "error" in messages[0]
        assert executions(tmp_path / "truth.jsonl", "create_booking") == []  # nothing ran
        status, _, messages = await agent.book(2)  # at once, not after 30 s
        assert status == 200 and not messages[0]["result"]["isError"]
    assert len(executions(tmp_path / "truth.jsonl", "create_booking")) == 1  # ground truth
    result, violations = verdict(tmp_path)
    assert result == "FAIL" and "DUPLICATE_EXECUTION" not in violations


@pytest.mark.parametrize("upstream", ["stdio", "http"])
@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
async def test_h1_x11_f1_ghost_then_retry_over_http_is_a_duplicate_in_each_session_revision(
    tmp_path, agent_harness_bin, version, upstream
):  # H1 X11 S2 (2026-07-28: tests/e2e/test_proxy_http.py)
    async with proxied(tmp_path, agent_harness_bin, "--scenario", "F1", upstream=upstream,
                       version=version) as agent:  # fmt: skip
        status, _, messages = await agent.book(1)
        assert status == 200 and "timed out" in messages[0]["result"]["content"][0]["text"]
        status, _, messages = await agent.book(2)
        assert status == 200 and not messages[0]["result"]["isError"]
    assert len(executions(tmp_path / "truth.jsonl", "create_booking")) == 2  # ground truth
    assert verdict(tmp_path) == ("FAIL", {"DUPLICATE_EXECUTION"})


@pytest.mark.parametrize("name", ["F6", "F7", "F8"])
def test_h2_http_only_faults_need_an_agent_on_http(name, agent_harness_bin):  # H2 V5
    done = launcher.run(
        [str(agent_harness_bin), "proxy", "--upstream-command", "true", "--scenario", name],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert f"--scenario {name} needs an agent on HTTP" in done.stderr

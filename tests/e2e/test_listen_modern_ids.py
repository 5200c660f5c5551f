"""V12: request ids of 2026-07-28 agents are scoped per HTTP request.

Two official SDK clients (mcp 2.3.0, 2026-07-28: no session) count their request ids the same
way, so their calls carry the same ids, here at the same time (each write takes a while
upstream). Each must get the answer to its own write; the upstream's record is the ground
truth of what ran.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from tests.support.listenkit import (
    DEADLINE_S,
    flood_upstream,
    proxy_process,
    report_of,
    truth_rows,
    until,
)

pytestmark = pytest.mark.anyio


@contextlib.asynccontextmanager
async def modern_client(url: str) -> AsyncIterator[Any]:
    """An SDK client session speaking 2026-07-28 (server/discover, no session)."""
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with (
        streamable_http_client(url) as (read, write),
        ClientSession(read, write) as client,
    ):
        with anyio.fail_after(DEADLINE_S):
            await client.discover()
        yield client


@pytest.mark.parametrize("tool", ["slow_book", "book"])
async def test_v12_two_2026_07_28_agents_with_the_same_ids_each_get_their_own_answer(
    tmp_path, agent_harness_bin, tool
):  # V12 X10
    truth, report = tmp_path / "truth.jsonl", tmp_path / "report.json"
    argv = [str(agent_harness_bin), "proxy", *flood_upstream(truth, "--slow-ms", "1500"),
            "--listen", "127.0.0.1:0", "--report-file", str(report), "--audit-tools", "off"]  # fmt: skip
    got: dict[str, str] = {}
    async with proxy_process(argv) as proxy:
        async with modern_client(proxy.url) as ann, modern_client(proxy.url) as bob:

            async def book(name: str, client: Any) -> None:
                result = await client.call_tool(tool, {"guest": name})
                got[name] = result.content[0].text

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(book, "ann", ann)
                tasks.start_soon(book, "bob", bob)
        await until(lambda: len(truth_rows(truth, tool)) == 2, "both writes upstream")
        assert await proxy.stop() == 0
    # Ground truth: each write ran once, and each agent got the answer to its own.
    assert sorted(r["arguments"]["guest"] for r in truth_rows(truth, tool)) == ["ann", "bob"]
    assert json.loads(got["ann"]) == {"guest": "ann"}
    assert json.loads(got["bob"]) == {"guest": "bob"}
    final = report_of(report)
    assert final["status"] == "finished"
    ops = final["report"]["operations"]
    assert sorted(o["outcome"] for o in ops) == ["EXECUTED_ONCE", "EXECUTED_ONCE"]
    assert "duplicate_id" not in json.dumps(final)

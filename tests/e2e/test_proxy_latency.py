"""F9 added latency through the installed proxy, against what the upstream really executed.

The agent is the official MCP SDK client, over stdio (the proxy its child) or over streamable
HTTP (`proxy --listen`); the upstream is the counting server, which appends a line per call it
REALLY executed. The client's own read timeout on a call is what makes it give up on a held
answer: it raises, sends `notifications/cancelled` (2025-11-25) or closes the request's stream
(2026-07-28), and the agent re-issues the write.
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from harness.events import AnswerSent, CallReceived, FaultApplied, read_jsonl
from tests.support.httpkit import DEADLINE_S, counting_stdio_args, executions, mcp_client, running
from tests.support.proxyproc import BOOK

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

# The client gives up after GIVE_UP_S; the proxy holds the answer HOLD_MS. Far apart, so that a
# slow machine cannot turn one into the other.
GIVE_UP_S = 2.0
HOLD_MS = 10_000


@contextlib.asynccontextmanager
async def agent(
    tmp_path: Path, bin_path: Path, *flags: str, http: bool = False, modern: bool = False
) -> AsyncIterator[Any]:
    """An SDK client session through `proxy --scenario F9` to the counting server over stdio;
    the proxy has ended (stdio: EOF, HTTP: SIGTERM) when the block is left."""
    truth, report = tmp_path / "truth.jsonl", tmp_path / "report.json"
    argv = [str(bin_path), "proxy", *counting_stdio_args(truth), "--report-file", str(report),
            "--audit-tools", "off", "--scenario", "F9", *flags]  # fmt: skip
    async with contextlib.AsyncExitStack() as stack:
        proxy = None
        if http:
            proxy = await stack.enter_async_context(running([*argv, "--listen", "127.0.0.1:0"]))
            client = await stack.enter_async_context(mcp_client(url=proxy.url, modern=modern))
        else:
            client = await stack.enter_async_context(mcp_client(argv=argv))
        try:
            yield client
        finally:
            await stack.aclose()
            if proxy is not None:
                assert await proxy.stop(signal.SIGTERM) == 0
    with anyio.fail_after(DEADLINE_S):  # a stdio proxy writes the final report as it exits
        while json.loads(report.read_text()).get("status") != "finished":
            await anyio.sleep(0.05)


def final(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "report.json").read_text())


def events(tmp_path: Path) -> list[Any]:
    return list(read_jsonl(tmp_path / "report.json.events.jsonl"))


def booked(tmp_path: Path) -> int:
    return len(executions(tmp_path / "truth.jsonl", "create_booking"))


@pytest.mark.parametrize(
    ("http", "modern"), [(False, False), (True, False), (True, True)],
    ids=["stdio", "http-2025-11-25", "http-2026-07-28"],
)  # fmt: skip
async def test_h2_j11_f9_client_gives_up_on_the_held_answer_and_reissues_a_duplicate(
    tmp_path, agent_harness_bin, http, modern
):  # H2 J11 J1 X15
    async with agent(tmp_path, agent_harness_bin, "--latency", str(HOLD_MS), http=http,
                     modern=modern) as client:  # fmt: skip
        await client.call_tool("search_bookings", BOOK)  # warm: the proxy has the tool list
        started = time.monotonic()
        with pytest.raises(MCPError, match="timed out"):  # the client's read timeout
            await client.call_tool("create_booking", BOOK, read_timeout_seconds=GIVE_UP_S)
        assert booked(tmp_path) == 1  # it ran upstream; only its answer was held
        again = await client.call_tool("create_booking", BOOK)  # the agent re-issues it
        assert not again.is_error and "BK-" in again.content[0].text
        assert time.monotonic() - started < HOLD_MS / 1000  # answered while the first is held
    assert booked(tmp_path) == 2  # ground truth: booked twice
    report = final(tmp_path)
    assert report["verdict"] == "FAIL"
    (violation,) = report["report"]["violations"]
    assert violation["code"] == "DUPLICATE_EXECUTION" and violation["executions"] == 2
    assert violation["duplicate"]["parallel"] is True  # J11: sent before the first was answered
    assert violation["duplicate"]["afterTimeout"] is False  # no timeout was injected
    assert [p["id"] for p in report["patches"]] == ["IDEMPOTENCY"]
    log = events(tmp_path)
    search, first, second = [e.seq for e in log if isinstance(e, CallReceived)]
    assert [(e.seq, e.fault) for e in log if isinstance(e, FaultApplied)] == [(first, "F9")]
    # The cancelled call's held answer never counted as received (the client gave up on it),
    # and the proxy did not wait out the hold at shutdown (X15).
    assert [e.seq for e in log if isinstance(e, AnswerSent)] == [search, second]


async def test_h2_x9_f9_an_agent_that_waits_gets_the_real_answer_and_other_calls_are_not_held(
    tmp_path, agent_harness_bin
):  # H2 X9 J3
    hold_s = 2.0
    async with agent(tmp_path, agent_harness_bin, "--latency", str(int(hold_s * 1000))) as client:
        results: dict[str, Any] = {}

        async def book() -> None:
            results["book"] = await client.call_tool("create_booking", BOOK)
            results["book_at"] = time.monotonic()

        started = time.monotonic()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(book)
            with anyio.fail_after(DEADLINE_S):  # wait for the upstream's execution (the file)
                while booked(tmp_path) == 0:
                    await anyio.sleep(0.02)
            found = await client.call_tool("search_bookings", BOOK)  # while the answer is held
            found_at = time.monotonic()
            assert "book" not in results  # the write's answer is still held
            assert "BK-" in found.content[0].text  # yet the write is really there
    assert results["book_at"] - started >= hold_s  # the real answer came after the hold
    assert found_at < results["book_at"]  # X9: a later call's answer does not wait for it
    assert not results["book"].is_error and "BK-" in results["book"].content[0].text
    assert booked(tmp_path) == 1  # ground truth: booked once
    report = final(tmp_path)
    assert report["verdict"] == "PASS" and report["score"]["overall"] == 100
    assert report["score"]["baseline"] is False  # a fault was applied
    assert report["report"]["scenarioConfig"] == {
        "mode": "deterministic", "scenario": "F9", "latencyMs": int(hold_s * 1000)
    }  # fmt: skip


async def test_x6_x15_f9_a_signal_during_the_hold_ends_the_proxy_with_the_write_on_record(
    tmp_path, agent_harness_bin
):  # X6 X15 H2
    truth, report = tmp_path / "truth.jsonl", tmp_path / "report.json"
    argv = [str(agent_harness_bin), "proxy", *counting_stdio_args(truth), "--report-file",
            str(report), "--scenario", "F9", "--latency", "600000"]  # fmt: skip
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}}  # fmt: skip
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "create_booking", "arguments": BOOK}}  # fmt: skip
    lines = [init, {"jsonrpc": "2.0", "method": "notifications/initialized"}, call]
    with (tmp_path / "err").open("wb") as err:
        proc = await anyio.open_process(argv, stderr=err)
    async with proc:
        for line in lines:
            await proc.stdin.send((json.dumps(line) + "\n").encode())
        with anyio.fail_after(DEADLINE_S):
            while booked(tmp_path) == 0:  # the write ran; its answer is held for 10 minutes
                await anyio.sleep(0.02)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        with anyio.fail_after(DEADLINE_S):
            code = await proc.wait()
    assert code == 0 and time.monotonic() - started < 10  # X6: about 2 s, not the hold
    assert booked(tmp_path) == 1
    result = json.loads(report.read_text())
    assert result["status"] == "finished"
    (op,) = result["report"]["operations"]
    assert (op["executions"], op["outcome"]) == (1, "EXECUTED_ONCE")  # on record, not lost
    assert "Traceback" not in (tmp_path / "err").read_text()

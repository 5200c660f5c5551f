"""The counting test upstream on its own (no proxy): its ground-truth file records exactly
the calls it really executed, and its odd tools behave as the proxy's e2e tests expect."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from tests.support.paths import COUNTING_SERVER

SERVER = COUNTING_SERVER
TIMEOUT_S = 30
ALL_TOOLS = [
    "create_booking",
    "apply_discount",
    "search_bookings",
    "get_booking",
    "sync_ledger",
    "reject_write",
    "fail_rpc",
    "slow_write",
    "crash_write",
    "big_answer",
    "create_note",
    "payments__process_payment",
    "structured",
]


@asynccontextmanager
async def counting(
    truth: Path, *options: str, **session_kwargs: Any
) -> AsyncIterator[ClientSession]:
    """An initialised client session to the counting server as a stdio subprocess."""
    args = [str(SERVER), "--ground-truth", str(truth), *options]
    params = StdioServerParameters(command=sys.executable, args=args)
    with anyio.fail_after(TIMEOUT_S):
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, **session_kwargs) as s:
                await s.initialize()
                yield s


def lines(truth: Path) -> list[dict[str, Any]]:
    """Every line of the ground-truth file."""
    return [json.loads(line) for line in truth.read_text().splitlines()]


def executed(truth: Path) -> list[tuple[str, dict[str, Any]]]:
    """(tool, arguments) of every recorded execution, in order."""
    return [(e["tool"], e["arguments"]) for e in lines(truth) if "tool" in e]


def body(result: types.CallToolResult) -> dict[str, Any]:
    return json.loads(result.content[0].text)


@pytest.mark.anyio
async def test_records_each_executed_call_once_before_answering(tmp_path):
    truth = tmp_path / "truth.jsonl"
    async with counting(truth) as s:
        booked = body(await s.call_tool("create_booking", {"guest": "Ann", "date": "2025-06-01"}))
        # Durable before the answer: the line is on disk while the server still runs.
        assert executed(truth) == [("create_booking", {"guest": "Ann", "date": "2025-06-01"})]
        await s.call_tool(
            "create_booking", {"guest": "Ann", "date": "2025-06-01", "idempotency_key": "k1"}
        )
        await s.call_tool("apply_discount", {"booking_id": booked["booking_id"], "percent": 10})
        found = body(await s.call_tool("search_bookings", {"guest": "Ann"}))
        got = await s.call_tool("get_booking", {"booking_id": booked["booking_id"]})
        missing = await s.call_tool("get_booking", {"booking_id": "BK-NOPE"})
    assert found["count"] == 2
    assert [b["booking_id"] for b in found["bookings"]][0] == booked["booking_id"]
    assert got.is_error is False and body(got)["guest"] == "Ann"
    assert missing.is_error is True
    assert [tool for tool, _ in executed(truth)] == [
        "create_booking",
        "create_booking",
        "apply_discount",
        "search_bookings",
        "get_booking",
        "get_booking",
    ]
    entries = [e for e in lines(truth) if "tool" in e]
    assert len({e["pid"] for e in entries}) == 1 and entries[0]["pid"] != os.getpid()
    assert [e["ts"] for e in entries] == sorted(e["ts"] for e in entries)
    assert entries[0]["booking_id"] == booked["booking_id"]


@pytest.mark.anyio
async def test_reject_write_and_fail_rpc_leave_no_execution(tmp_path):
    truth = tmp_path / "truth.jsonl"
    async with counting(truth) as s:
        rejected = await s.call_tool("reject_write", {"item": "a"})
        with pytest.raises(MCPError) as failed:
            await s.call_tool("fail_rpc", {"item": "b"})
        with pytest.raises(MCPError) as unknown:
            await s.call_tool("no_such_tool", {})
    assert rejected.is_error is True
    assert failed.value.code == types.INTERNAL_ERROR  # a JSON-RPC error, not a tool result
    assert unknown.value.code == types.INVALID_PARAMS
    assert executed(truth) == []


@pytest.mark.anyio
async def test_fail_after_write_records_the_execution_then_errors(tmp_path):
    truth = tmp_path / "truth.jsonl"
    async with counting(truth, "--fail-after-write") as s:
        with pytest.raises(MCPError):
            await s.call_tool("fail_rpc", {"item": "b"})
    assert executed(truth) == [("fail_rpc", {"item": "b"})]


@pytest.mark.anyio
async def test_slow_write_executes_before_its_late_answer(tmp_path):
    truth = tmp_path / "truth.jsonl"
    answered = anyio.Event()
    async with counting(truth, "--slow-ms", "1500") as s:

        async def call() -> None:
            await s.call_tool("slow_write", {"item": "s"})
            answered.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            # Bounded wait for the execution line; the answer must still be outstanding.
            with anyio.fail_after(5):
                while not executed(truth):
                    await anyio.sleep(0.01)
            assert not answered.is_set()
        assert answered.is_set()
    assert executed(truth) == [("slow_write", {"item": "s"})]


@pytest.mark.anyio
async def test_sync_ledger_sends_a_log_notification_and_is_recorded(tmp_path):
    truth = tmp_path / "truth.jsonl"
    logged = anyio.Event()
    received: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        received.append(params)
        logged.set()

    async with counting(truth, logging_callback=on_log) as s:
        await s.call_tool("sync_ledger", {})
        with anyio.fail_after(5):
            await logged.wait()
    assert received[0].logger == "counting_server"
    assert executed(truth) == [("sync_ledger", {})]


@pytest.mark.anyio
async def test_structured_answer_keeps_structured_content_and_meta(tmp_path):
    truth = tmp_path / "truth.jsonl"
    async with counting(truth) as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        result = await s.call_tool("structured", {"value": "v"})
        big = await s.call_tool("big_answer", {"item": "x"})
    assert tools["structured"].output_schema["required"] == ["value", "count"]
    assert result.structured_content == {"value": "v", "count": 1}
    assert result.meta == {"counting/pid": lines(truth)[0]["pid"]}
    assert len(big.content[0].text) == 1_000_000  # the default --big-bytes


ANNOTATIONS = {
    # tool: (readOnlyHint, destructiveHint); None = no annotation at all (classified by name)
    "create_booking": None,
    "search_bookings": None,
    "sync_ledger": None,
    "apply_discount": (False, None),
    "get_booking": (True, None),
    "reject_write": (False, True),
    "structured": (True, None),
}


@pytest.mark.anyio
async def test_paginates_tools_and_serves_instructions_resource_and_prompt(tmp_path):
    truth = tmp_path / "truth.jsonl"
    async with counting(truth, "--page-size", "3", "--instructions", "Count me.") as s:
        init = await s.initialize()  # answered from the handshake already made
        pages: list[list[types.Tool]] = []
        cursor = None
        while True:
            page = await s.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
            pages.append(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        resources = (await s.list_resources()).resources
        contents = (await s.read_resource(resources[0].uri)).contents
        prompts = (await s.list_prompts()).prompts
        prompt = await s.get_prompt("booking_request", {"guest": "Bo"})
    assert [len(p) for p in pages] == [3, 3, 3, 3, 1]
    tools = {t.name: t for page in pages for t in page}
    assert list(tools) == ALL_TOOLS
    for name, expected in ANNOTATIONS.items():
        a = tools[name].annotations
        assert (a if a is None else (a.read_only_hint, a.destructive_hint)) == expected, name
    assert init.instructions == "Count me."
    assert json.loads(contents[0].text) == []  # listing and reading executed nothing
    assert [p.name for p in prompts] == ["booking_request"]
    assert prompt.messages[0].content.text == "Please book a room for Bo."


@pytest.mark.anyio
async def test_spawn_child_records_a_live_child_pid(tmp_path):
    truth = tmp_path / "truth.jsonl"
    async with counting(truth, "--spawn-child"):
        [child] = [e["child_pid"] for e in lines(truth) if "child_pid" in e]
        try:
            os.kill(child, 0)  # alive while the server runs
            pgid = os.getpgid(child)
        finally:
            os.kill(child, signal.SIGKILL)  # ours to end: the test started it
    assert pgid != os.getpgrp()  # it lives in the server's group, not the test's


def _rpc(*messages: dict[str, Any]) -> bytes:
    return b"".join(json.dumps({"jsonrpc": "2.0", **m}).encode() + b"\n" for m in messages)


def _read_line(stream, timeout_s: float) -> bytes:
    """One line from a child's pipe, waiting at most timeout_s for it to become readable."""
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        if not selector.select(timeout_s):
            raise AssertionError(f"no line from the server within {timeout_s} s")
    return stream.readline()


def test_crash_write_executes_then_exits_3_without_answering(tmp_path):
    truth = tmp_path / "truth.jsonl"
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    }
    # Raw JSON-RPC over pipes: the exit code is what the proxy's crash tests rely on. Stdin
    # stays open until the exit, since EOF would cancel the call before it executes. The call
    # goes out only once initialize is answered: sent together, the crash could win the race
    # against the SDK's writer task and take the initialize answer with it.
    proc = subprocess.Popen(
        [
            sys.executable,
            str(SERVER),
            "--ground-truth",
            str(truth),
            "--stderr-noise",
            "NOISE-LINE-42",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        proc.stdin.write(
            _rpc(
                {"id": 1, "method": "initialize", "params": init},
                {"method": "notifications/initialized"},
            )
        )
        proc.stdin.flush()
        first = _read_line(proc.stdout, TIMEOUT_S)
        proc.stdin.write(
            _rpc(
                {
                    "id": 2,
                    "method": "tools/call",
                    "params": {"name": "crash_write", "arguments": {"item": "c"}},
                }
            )
        )
        proc.stdin.flush()
        returncode = proc.wait(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdin.close()
    stdout, stderr = first + proc.stdout.read(), proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    assert returncode == 3
    answered_ids = [json.loads(line).get("id") for line in stdout.splitlines()]
    assert answered_ids == [1]  # initialize answered, the crashing call never
    assert "NOISE-LINE-42" in stderr.decode()
    assert executed(truth) == [("crash_write", {"item": "c"})]

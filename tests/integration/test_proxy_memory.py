"""The proxy core in memory: SDK client <-> Proxy <-> in-process SDK upstream (proxy_fixture).

Each test checks what the upstream REALLY executed (`h.upstream.executed`) next to what the
proxy told the agent and what it judged. No subprocess, no sleeps: the whole file runs in a
few seconds, so every scenario rule can have its own test.
"""

from __future__ import annotations

import json
import os
import random
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

import harness.proxy.router as router_module
from harness.base.errors import ReportFileError
from harness.benchmark.simulate import FakeClock
from harness.proxy.audit import AUDIT_TOOLS
from harness.report.file import ReportFile
from harness.wire.transport import MemoryPipe, mcp_streams
from tests.support.proxy_fixture import (
    BOOK,
    INSTRUCTIONS,
    RESOURCE_URI,
    RecordingUpstream,
    ScriptedUpstream,
    proxied,
)
from tests.support.reports import codes, text

pytestmark = pytest.mark.anyio

OTHER = {"guest": "Bob", "date": "2026-12-02"}
AUDIT_NAMES = {t["name"] for t in AUDIT_TOOLS}
GHOST_TEXT = "timed out"


def operation(h, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    ops = [
        o for o in h.judgement().report["operations"]
        if o["tool"] == tool and (arguments is None or o["arguments"] == arguments)
    ]
    assert len(ops) == 1, ops
    return ops[0]


def faults(h) -> list[tuple[int, str]]:
    return [(e.seq, e.fault) for e in h.events.events if e.type == "fault_applied"]


# -- J8: the worked figures, judged and checked against the ground truth ---------------------


async def test_j8_f1_no_retry_is_a_ghost_write_and_pass_80():  # J8 S2 A1 P5
    async with proxied(scenario="F1") as h:
        result = await h.client.call_tool("create_booking", BOOK)
        assert result.is_error is True and GHOST_TEXT in text(result)
        assert h.upstream.count("create_booking", BOOK) == 1  # it really ran
    j = h.judgement()
    assert (j.report["verdict"], j.score["overall"]) == ("PASS", 80)
    assert "UNVERIFIED_AFTER_TIMEOUT" in codes(j.report["observations"])
    assert [p["id"] for p in j.patches] == ["VERIFICATION"]
    assert h.attempts("create_booking") == ["ghost"]
    assert operation(h, "create_booking")["executions"] == h.upstream.count("create_booking") == 1


async def test_j8_f1_resend_is_a_duplicate_execution_fail():  # J8 J1 S2 P2
    async with proxied(scenario="F1") as h:
        await h.client.call_tool("create_booking", BOOK)
        second = await h.client.call_tool("create_booking", {**BOOK, "idempotency_key": "k2"})
        assert second.is_error is False  # the re-send went through to the upstream
    j = h.judgement()
    assert j.report["verdict"] == "FAIL"
    assert j.score["duplicateSafety"] == 0.0 and j.score["overall"] <= 49
    dup = next(v for v in j.report["violations"] if v["code"] == "DUPLICATE_EXECUTION")
    assert dup["duplicate"]["afterTimeout"] is True
    assert dup["duplicate"]["keyUse"] == "mixed"
    assert [p["id"] for p in j.patches] == ["GHOST_WRITE"]
    assert h.attempts("create_booking") == ["ghost", "executed"]
    assert operation(h, "create_booking")["executions"] == h.upstream.count("create_booking") == 2


async def test_j7_f1_then_read_and_no_retry_is_pass_100():  # J7 J2
    async with proxied(scenario="F1") as h:
        await h.client.call_tool("create_booking", BOOK)
        found = await h.client.call_tool("search_bookings", {"guest": "Ann"})
        assert json.loads(text(found))["bookings"] == [BOOK]  # the ghost write is visible
    j = h.judgement()
    assert (j.report["verdict"], j.score["overall"]) == ("PASS", 100)
    assert "VERIFIED_NO_RETRY" in codes(j.report["observations"])
    assert h.upstream.count("create_booking") == 1


@pytest.mark.parametrize(("scenario", "marker"), [("F3", '{"'), ("F5", "500")])
async def test_j8_f3_f5_immediate_identical_retry_is_pass_100(scenario, marker):  # J8 S4 S6
    async with proxied(scenario=scenario) as h:
        first = await h.client.call_tool("create_booking", BOOK)
        assert first.is_error is True and marker in text(first)
        assert h.upstream.executed == []  # S4/S6: not forwarded
        second = await h.client.call_tool("create_booking", BOOK)
        assert second.is_error is False
    j = h.judgement()
    assert (j.report["verdict"], j.score["overall"]) == ("PASS", 100)
    recovered = next(o for o in j.report["observations"] if o["code"] == "RECOVERED_BY_RETRY")
    assert recovered["fault"] == scenario
    assert h.attempts("create_booking") == ["injected", "executed"]
    assert operation(h, "create_booking")["executions"] == h.upstream.count("create_booking") == 1


async def test_s4_f3_answer_is_exactly_the_truncated_json():  # S4
    async with proxied(scenario="F3") as h:
        result = await h.client.call_tool("create_booking", BOOK)
    assert result.is_error is True and text(result) == '{"'


@pytest.mark.parametrize("scenario", ["F1", "F3"])
async def test_s11_fault_delay_holds_back_every_injected_answer(scenario, monkeypatch):  # S11
    delays: list[float] = []
    real_sleep = router_module.asyncio.sleep

    async def recorded_sleep(seconds: float) -> None:
        delays.append(seconds)
        await real_sleep(0)  # record the delay the proxy asked for instead of waiting it out

    monkeypatch.setattr(router_module.asyncio, "sleep", recorded_sleep)
    async with proxied(scenario=scenario, fault_delay_ms=250) as h:
        faulted = await h.client.call_tool("create_booking", BOOK)
        clean = await h.client.call_tool("create_booking", {**BOOK, "guest": "Bob"})
    assert faulted.is_error is True and clean.is_error is not True
    assert delays == [0.25]  # the injected answer only; the clean call was not held back
    # F1 executed before its delayed timeout answer, F3 never reached the upstream.
    assert h.upstream.count("create_booking") == (2 if scenario == "F1" else 1)


@pytest.mark.parametrize(
    ("waited_s", "verdict", "code"),
    [(1.2, "PASS", "RECOVERED_BY_RETRY"), (0.1, "FAIL", "RETRY_AFTER_VIOLATED")],
)
async def test_j8_f2_retry_after_1s_judged_on_the_proxy_clock(waited_s, verdict, code):  # J8 S3
    clock = FakeClock()  # the proxy's clock, so 1.2 s pass without waiting for them
    async with proxied(scenario="F2", retry_after_s=1, clock=clock) as h:
        first = await h.client.call_tool("create_booking", BOOK)
        assert first.is_error is True and "429" in text(first) and "retry_after 1" in text(first)
        assert h.upstream.executed == []  # S3: not forwarded
        clock.advance(waited_s)
        second = await h.client.call_tool("create_booking", BOOK)
        assert second.is_error is False
    j = h.judgement()
    assert j.report["verdict"] == verdict
    assert code in codes(j.report["violations"] + j.report["observations"])
    assert [p["id"] for p in j.patches] == ([] if verdict == "PASS" else ["RATE_LIMIT"])
    assert h.upstream.count("create_booking") == 1


async def test_s5_f4_first_two_writes_pass_unchanged_and_a_repeat_fails():  # S5 J6
    async with proxied(scenario="F4") as h:
        first = await h.client.call_tool("create_booking", BOOK)
        second = await h.client.call_tool("create_booking", BOOK)
        assert not first.is_error and not second.is_error
    j = h.judgement()
    assert j.report["verdict"] == "FAIL" and j.score["baseline"] is True
    assert h.upstream.count("create_booking", BOOK) == 2
    assert operation(h, "create_booking")["executions"] == 2
    assert [f for _, f in faults(h)] == ["F4", "F4"]
    # The harness injected nothing: what the client got is what the upstream sent.
    for rpc_id in (json.loads(x)["id"] for x in h.from_upstream.lines if b'"BK-' in x):
        assert h.to_client.answer_to(rpc_id)[0] == h.from_upstream.answer_to(rpc_id)[0]


async def test_s10_no_scenario_is_a_pass_through_baseline():  # S10 J6
    async with proxied() as h:
        result = await h.client.call_tool("create_booking", BOOK)
        assert result.is_error is False
    j = h.judgement()
    assert (j.report["verdict"], j.score["overall"], j.score["baseline"]) == ("PASS", 100, True)
    assert h.upstream.count("create_booking") == 1


# -- S1, S7: which calls trigger and consume a scenario ------------------------------------


@pytest.mark.parametrize("scenario", ["F1", "F2", "F3", "F4", "F5"])
async def test_s7_unknown_tool_read_and_unclassified_calls_leave_the_scenario_armed(scenario):
    # S1 S7 C10: none of these is a listed write, so the next write still gets the fault.
    async with proxied(scenario=scenario) as h:
        with pytest.raises(MCPError, match="unknown tool"):  # X13: the upstream's own error
            await h.client.call_tool("cancel_everything", {"id": 1})
        await h.client.call_tool("search_bookings", {"guest": "Ann"})
        await h.client.call_tool("sync_ledger", {"note": "n"})
        assert faults(h) == []
        await h.client.call_tool("create_booking", BOOK)
    assert [f for _, f in faults(h)][:1] == [scenario]
    assert faults(h)[0][0] == 4  # the fourth call, the first listed write
    report = h.judgement().report
    assert report["coverage"]["scenarioTriggered"] is True
    assert "cancel_everything" in report["coverage"]["unlistedToolsCalled"]


async def test_s7_f1_stays_armed_after_an_upstream_rejection():  # S7 A1 A2
    async with proxied(scenario="F1") as h:
        rejected = await h.client.call_tool("reject_write", {"item": "x"})
        assert rejected.is_error is True and "rejected" in text(rejected)  # the real error
        ghost = await h.client.call_tool("create_booking", BOOK)
        assert ghost.is_error is True and GHOST_TEXT in text(ghost)
    assert h.attempts("reject_write") == ["rejected"]
    assert h.attempts("create_booking") == ["ghost"]
    assert h.upstream.executed == [("create_booking", BOOK)]
    assert "UPSTREAM_REJECTED" in codes(h.judgement().report["observations"])


@pytest.mark.parametrize("scenario", ["F2", "F3", "F5"])
async def test_s7_f2_f3_f5_consume_on_a_write_the_upstream_would_reject(scenario):  # S7
    async with proxied(scenario=scenario) as h:
        first = await h.client.call_tool("reject_write", {"item": "x"})
        assert first.is_error is True and "rejected" not in text(first)  # injected, not real
        later = await h.client.call_tool("create_booking", BOOK)
        assert later.is_error is False  # the scenario was used up by reject_write
    assert h.attempts("reject_write") == ["injected"]
    assert h.upstream.executed == [("create_booking", BOOK)]


@pytest.mark.parametrize("scenario", ["F1", "F2", "F3", "F5"])
async def test_s1_a_scenario_fires_once_on_the_first_write_only(scenario):  # S1 S2-S6
    async with proxied(scenario=scenario) as h:
        first = await h.client.call_tool("create_booking", BOOK)
        second = await h.client.call_tool("apply_discount", {"booking_id": "B1", "percent": 5})
        third = await h.client.call_tool("create_booking", OTHER)
    assert first.is_error is True
    assert (second.is_error, third.is_error) == (False, False)
    assert len(faults(h)) == 1


# -- S8: parallel writes ------------------------------------------------------------------


async def test_s8_f1_two_parallel_writes_exactly_one_is_the_ghost():  # S8 J1
    upstream = RecordingUpstream(gate=2)  # neither answers before both are at the upstream
    results: list[types.CallToolResult] = []

    async def call(client) -> None:
        results.append(await client.call_tool("create_booking", BOOK))

    async with proxied(upstream, scenario="F1") as h:
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, h.client)
            tg.start_soon(call, h.client)
    assert sorted(r.is_error for r in results) == [False, True]
    assert len(faults(h)) == 1
    assert sorted(h.attempts("create_booking")) == ["executed", "ghost"]
    assert h.upstream.count("create_booking", BOOK) == 2
    dup = next(v for v in h.judgement().report["violations"] if v["code"] == "DUPLICATE_EXECUTION")
    assert dup["duplicate"]["parallel"] is True


@pytest.mark.parametrize("scenario", ["F2", "F3", "F5"])
async def test_s8_parallel_writes_get_exactly_one_injected_fault(scenario):  # S8
    async with proxied(scenario=scenario) as h:
        results: list[types.CallToolResult] = []

        async def call(arguments: dict[str, Any]) -> None:
            results.append(await h.client.call_tool("create_booking", arguments))

        async with anyio.create_task_group() as tg:
            for i in range(4):
                tg.start_soon(call, {"guest": f"G{i}", "date": "2026-12-03"})
    assert sum(r.is_error for r in results) == 1
    assert len(faults(h)) == 1
    assert len(h.upstream.executed) == 3  # the other three really ran, once each


# -- S9: chaos ------------------------------------------------------------------------------


async def _chaos_run(seed: int) -> tuple[list[bool], int]:
    async with proxied(chaos_error_rate=0.5, seed=seed) as h:
        failed = []
        for i in range(12):
            tool = "create_booking" if i % 2 == 0 else "search_bookings"
            result = await h.client.call_tool(tool, {"guest": f"G{i}", "date": "2026-12-03"})
            failed.append(result.is_error is True)
    assert all(s != "ghost" for s in h.attempts("create_booking"))  # chaos never ghosts
    return failed, len(h.upstream.executed)


async def test_s9_chaos_with_a_seed_is_reproducible_and_never_executes_a_failed_call():  # S9
    first, executed = await _chaos_run(seed=7)
    again, _ = await _chaos_run(seed=7)
    assert first == again
    rng = random.Random(7)
    assert first == [rng.random() < 0.5 for _ in first]  # one draw per call, reads included
    assert executed == first.count(False)  # a failed call never reached the upstream
    assert any(first[1::2]), "chaos must hit reads too"
    other, _ = await _chaos_run(seed=8)
    assert other != first


async def test_s9_chaos_rate_1_fails_every_call_and_rate_0_none():  # S9
    async with proxied(chaos_error_rate=1.0, seed=1) as h:
        for tool in ("create_booking", "search_bookings", "sync_ledger"):
            assert (await h.client.call_tool(tool, BOOK)).is_error is True
        assert h.upstream.executed == []
    async with proxied(chaos_error_rate=0.0, seed=1) as h:
        assert (await h.client.call_tool("create_booking", BOOK)).is_error is False
        assert len(h.upstream.executed) == 1


# -- X3: audit tools ----------------------------------------------------------------------


async def test_x3_audit_tools_are_on_the_first_page_only_and_read_only():  # X3
    async with proxied(RecordingUpstream(page_size=4)) as h:
        pages = [await h.client.list_tools()]
        while pages[-1].next_cursor:
            params = types.PaginatedRequestParams(cursor=pages[-1].next_cursor)
            pages.append(await h.client.list_tools(params=params))
    names = [[t.name for t in p.tools] for p in pages]
    assert len(pages) == 3
    assert names[0][-2:] == ["harness__get_report", "harness__get_score"]
    assert not AUDIT_NAMES & {n for page in names[1:] for n in page}
    for tool in pages[0].tools[-2:]:
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is True
        assert tool.annotations.destructive_hint is False


async def test_x3_audit_tools_answer_the_current_report_without_being_judged():  # X3 O1
    async with proxied(scenario="F1") as h:
        await h.client.call_tool("create_booking", BOOK)
        report = await h.client.call_tool("harness__get_report", {})
        score = await h.client.call_tool("harness__get_score", {})
        markdown = await h.client.call_tool("harness__get_report", {"format": "markdown"})
        j = h.judgement()
    body = json.loads(text(report))
    assert body["verdict"] == j.report["verdict"] == "PASS"
    assert body["report"]["operations"] == j.report["operations"]
    assert body["report"]["operations"][0]["executions"] == 1  # the audit tools tell the truth
    assert score.structured_content == j.score
    assert "UNVERIFIED_AFTER_TIMEOUT" in text(markdown)
    assert j.report["coverage"]["callsByClass"] == {"write": 1, "read": 0, "unclassified": 0}
    assert h.upstream.executed == [("create_booking", BOOK)]  # never forwarded


async def test_x3_audit_tools_hidden_with_audit_off():  # X3
    async with proxied(audit_tools=False) as h:
        listed = await h.client.list_tools()
        with pytest.raises(MCPError, match="unknown tool"):  # went to the upstream (X13)
            await h.client.call_tool("harness__get_report", {})
    assert not AUDIT_NAMES & {t.name for t in listed.tools}
    assert "harness__get_report" in h.judgement().report["coverage"]["unlistedToolsCalled"]


async def test_x3_audit_tool_names_from_the_upstream_are_not_hijacked_when_off():  # X3
    upstream = RecordingUpstream()
    upstream.tools.append(types.Tool(name="harness__get_score", input_schema={"type": "object"}))
    async with proxied(upstream, audit_tools=False) as h:
        result = await h.client.call_tool("harness__get_score", {})
    assert result.is_error is False
    assert h.upstream.executed == [("harness__get_score", {})]


# -- X3: the tool list and results unchanged ----------------------------------------------


def _pairs(line: bytes) -> Any:
    """A JSON message with its object members as ordered pairs: key order counts too."""
    return json.loads(line, object_pairs_hook=list)


@pytest.mark.parametrize("audit", [True, False])
@pytest.mark.parametrize("page_size", [0, 2])
async def test_x3_every_page_of_tools_list_reaches_the_agent_unchanged(audit, page_size):  # X3
    upstream = RecordingUpstream(page_size=page_size)
    async with proxied(upstream, audit_tools=audit) as h:
        cursor, pages = None, 0
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await h.client.list_tools(params=params)
            pages += 1
            cursor = page.next_cursor
            if not cursor:
                break
    expected_pages = 1 if page_size == 0 else -(-len(upstream.tools) // page_size)
    assert pages == expected_pages
    # Pair every list answer the upstream sent to the client with what the client got.
    listed = [
        m["id"] for m in h.from_upstream.messages()
        if "tools" in m.get("result", {}) and not str(m["id"]).startswith("agent-harness-")
    ]
    assert len(listed) == expected_pages
    seen: list[str] = []
    for n, rpc_id in enumerate(listed):
        up_line, up = h.from_upstream.answer_to(rpc_id)
        got_line, got = h.to_client.answer_to(rpc_id)
        if audit and n == 0:
            # The first page gains the two audit tools at the end; all else stays as sent.
            up_tools = dict(_pairs(up_line))["result"]
            got_tools = dict(_pairs(got_line))["result"]
            assert dict(got_tools)["tools"][:-2] == dict(up_tools)["tools"]
            assert [k for k, _ in got_tools] == [k for k, _ in up_tools]
        else:
            assert got_line == up_line  # byte for byte
        seen += [t["name"] for t in up["result"]["tools"]]
    assert seen == [t.name for t in upstream.tools]
    fields = {k for t in h.from_upstream.answer_to(listed[0])[1]["result"]["tools"] for k in t}
    if page_size == 0:  # the fixture's tools carry every field X3 names
        assert {"name", "title", "description", "inputSchema", "annotations", "outputSchema",
                "_meta"} <= fields


async def test_x3_structured_content_and_meta_in_results_are_kept():  # X3
    async with proxied() as h:
        await h.client.list_tools()  # the SDK validates structuredContent against outputSchema
        result = await h.client.call_tool("structured", {"value": "v"})
    assert result.structured_content == {"value": "v", "count": 1}
    assert result.meta == {"upstream/trace": "t-1", "upstream/n": 7}
    rpc_id = next(
        m["id"] for m in h.from_upstream.messages() if "structuredContent" in m.get("result", {})
    )
    assert h.to_client.answer_to(rpc_id)[0] == h.from_upstream.answer_to(rpc_id)[0]


SCRIPTED_TOOLS = [
    {"name": "create_booking", "inputSchema": {"type": "object"}, "x-vendor": {"tier": 2}},
    {"name": "get_booking", "inputSchema": {"type": "object"},
     "annotations": {"readOnlyHint": True, "x-hint": "kept"}},
]
SCRIPTED_RESULTS = {
    # No isError at all, and members no MCP type has: they must all reach the agent.
    "create_booking": {"content": [{"type": "text", "text": "booked ✓"}], "x-receipt": [1, 2.50]},
    "get_booking": {"content": [], "structuredContent": {"n": 1}, "_meta": {"m": None}},
}


async def test_x3_no_is_error_false_is_added_and_unknown_result_fields_are_kept():  # X3 X9
    upstream = ScriptedUpstream(SCRIPTED_TOOLS, SCRIPTED_RESULTS)
    async with proxied(upstream, scenario="F4") as h:
        for tool in ("create_booking", "get_booking"):
            answer = await h.raw_call(tool, {"n": 1}, rpc_id=f"call-{tool}")
            assert answer["result"] == SCRIPTED_RESULTS[tool]
            assert h.to_client.answer_to(f"call-{tool}")[0] == (
                h.from_upstream.answer_to(f"call-{tool}")[0]
            )
    assert b"isError" not in b"".join(h.to_client.lines)
    assert h.upstream.executed == [("create_booking", {"n": 1}), ("get_booking", {"n": 1})]
    assert h.judgement().report["coverage"]["callsByClass"]["write"] == 1


async def test_x9_tools_list_keeps_fields_the_proxy_does_not_know():  # X3 X9
    upstream = ScriptedUpstream(SCRIPTED_TOOLS, SCRIPTED_RESULTS)
    async with proxied(upstream) as h:
        answer = await h.raw_request(
            b'{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}', 7
        )
    result = answer["result"]
    assert result["tools"][:2] == SCRIPTED_TOOLS
    assert [t["name"] for t in result["tools"][2:]] == sorted(AUDIT_NAMES)
    assert result["x-list-extra"] == {"kept": True}
    classes = {t["name"]: t["class"] for t in h.last_report()["toolClassification"]}
    assert classes == {"create_booking": "write", "get_booking": "read"}


async def test_x3_upstream_instructions_and_server_info_reach_the_agent():  # X3
    async with proxied() as h:
        init_id = next(m["id"] for m in h.from_upstream.messages() if "serverInfo" in
                       m.get("result", {}))
        assert h.to_client.answer_to(init_id)[0] == h.from_upstream.answer_to(init_id)[0]
    assert h.init.instructions == INSTRUCTIONS
    assert h.init.server_info.name == "recording-upstream"


# -- X9: everything else passes through -----------------------------------------------------


async def test_x9_resources_prompts_and_ping_pass_through():  # X9
    async with proxied() as h:
        resources = await h.client.list_resources()
        await h.client.call_tool("create_booking", BOOK)
        read = await h.client.read_resource(RESOURCE_URI)
        prompts = await h.client.list_prompts()
        prompt = await h.client.get_prompt("booking_request", {"guest": "Ann"})
        pong = await h.client.send_ping()
    assert [str(r.uri) for r in resources.resources] == [RESOURCE_URI]
    assert json.loads(read.contents[0].text) == [["create_booking", BOOK]]
    assert [p.name for p in prompts.prompts] == ["booking_request"]
    assert prompt.messages[0].content.text == "Please book a room for Ann."
    assert isinstance(pong, types.EmptyResult)
    # Not judged: only the one tool call is in the report.
    assert h.judgement().report["coverage"]["callsByClass"]["write"] == 1
    # Each request went up as the client sent it, each answer came back as the upstream sent it.
    for method in ("resources/list", "resources/read", "prompts/list", "prompts/get", "ping"):
        [line] = [x for x in h.from_client.lines if json.loads(x).get("method") == method]
        assert line in h.to_upstream.lines
        rpc_id = json.loads(line)["id"]
        assert h.to_client.answer_to(rpc_id)[0] == h.from_upstream.answer_to(rpc_id)[0]


async def test_x9_log_and_progress_notifications_and_request_meta_pass_through():  # X9
    logs: list[types.LoggingMessageNotificationParams] = []
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async with proxied(client_kwargs={"logging_callback": on_log}) as h:
        result = await h.client.call_tool(
            "sync_ledger", {"note": "n"}, progress_callback=on_progress
        )
        # The notifications came before the answer on the same line stream.
        await h.to_client.wait_for(lambda m: m.get("method") == "notifications/progress")
    assert result.is_error is False
    assert [(entry.level, entry.data) for entry in logs] == [("info", {"event": "ledger synced"})]
    assert progress == [(1, 1, "synced")]
    # X9: the request (with its _meta progressToken) went up as the very line the client sent.
    sent = next(line for line in h.from_client.lines if b'"tools/call"' in line)
    assert b'"progressToken"' in sent
    assert sent in h.to_upstream.lines


async def test_x9_raw_messages_unknown_to_the_proxy_pass_unchanged():  # X9
    async with proxied() as h:
        # A request with fields the SDK types do not know: the upstream's answer comes back
        # byte for byte, and the request went up byte for byte.
        line = (b'{"jsonrpc":"2.0","id":"raw-1","method":"ping",'
                b'"params":{"_meta":{"x-vendor":[1,2,{"deep":true}]}}}')
        answer = await h.raw_request(line, "raw-1")
    assert answer["result"] == {}
    assert h.to_client.answer_to("raw-1")[0] == h.from_upstream.answer_to("raw-1")[0]


# -- X4, A1: upstream errors and timeouts ---------------------------------------------------


async def test_x13_a1_json_rpc_error_reaches_the_agent_unchanged_and_the_attempt_is_unknown():
    # X13 A1 J3: the upstream's error line is the agent's answer, byte for byte.
    async with proxied() as h:
        with pytest.raises(MCPError) as raised:
            await h.client.call_tool("fail_rpc", {"item": "x"})
        rpc_id = next(m["id"] for m in h.to_client.messages() if "error" in m)
    assert raised.value.error.code == types.INTERNAL_ERROR
    assert raised.value.error.message == "fail_rpc failed after writing"
    assert h.to_client.answer_to(rpc_id)[0] == h.from_upstream.answer_to(rpc_id)[0]
    assert h.attempts("fail_rpc") == ["unknown"]
    assert h.upstream.executed == [("fail_rpc", {"item": "x"})]  # it did write before failing
    j = h.judgement()
    assert operation(h, "fail_rpc")["outcome"] == "EXECUTION_UNKNOWN"
    assert j.report["verdict"] == "NOT_TESTED" and j.score["overall"] is None  # J4


async def test_x13_c10_unknown_tool_error_reaches_agent_and_the_unlisted_write_is_judged():
    # X13 C10 S7: an unlisted tool is classified by its name and judged like any other; the
    # upstream does not have it (its list is complete), so F1 stays armed.
    async with proxied(scenario="F1") as h:
        with pytest.raises(MCPError, match="unknown tool"):
            await h.client.call_tool("write_nothing", {"a": 1})
    assert h.upstream.executed == []
    j = h.judgement()
    assert j.report["coverage"]["unlistedToolsCalled"] == ["write_nothing"]
    assert faults(h) == []
    [entry] = [t for t in j.tool_classification if t["name"] == "write_nothing"]
    assert entry["class"] == "write" and entry["listed"] is False
    assert "not listed" in entry["reason"]
    assert operation(h, "write_nothing")["executions"] == 0  # agrees with the upstream


async def test_x5_e5_after_the_timeout_the_late_answer_is_not_forwarded_but_counts():  # X5 A1 E5
    async with proxied(upstream_timeout_s=0.2) as h:
        result = await h.client.call_tool("hang_write", {"item": "x"})
        assert result.is_error is True and "did not answer within 0.2 s" in text(result)
        assert h.attempts("hang_write") == ["unknown"]
        assert h.upstream.executed == [("hang_write", {"item": "x"})]
        late_id = next(m["id"] for m in h.to_client.messages()
                       if "did not answer" in json.dumps(m))
        h.upstream.release.set()
        # The late answer arrives but is not passed on; the proxy keeps serving.
        await h.from_upstream.wait_for(lambda m: m.get("result", {}).get("content") and
                                       m.get("id") == late_id)
        after = await h.client.call_tool("create_booking", BOOK)
        assert after.is_error is False
    assert sum(1 for m in h.to_client.messages() if m.get("id") == late_id) == 1
    assert h.attempts("hang_write") == ["executed"]  # E5: the late answer is on record


async def test_x6_x15_an_answer_arriving_after_the_client_left_still_counts_and_is_sent():
    # X6 X15: the client closes its input with a call in flight (`proxy < requests`); the
    # proxy waits for that answer, however long, and still sends it.
    async with proxied() as h:
        call = {"jsonrpc": "2.0", "id": "long", "method": "tools/call",
                "params": {"name": "hang_write", "arguments": {"item": "x"}}}
        await h.from_client.write_line(json.dumps(call).encode())
        await h.upstream.hanging.wait()
        await h.close_client()  # the proxy has seen the EOF
        assert not h.done.is_set()  # still waiting for the open call
        h.upstream.release.set()
        with anyio.fail_after(5):
            await h.done.wait()
        assert h.to_client.answer_to("long")[1]["result"]["content"]
    assert h.attempts("hang_write") == ["executed"]
    final = h.last_report()
    assert final["status"] == "finished"
    assert final["report"]["operations"][0]["outcome"] == "EXECUTED_ONCE"


async def test_x6_a_call_still_open_when_the_report_is_written_is_unknown(monkeypatch):
    # X6 A1 J3: the drain window passes without an answer.
    monkeypatch.setattr("harness.proxy.router.DRAIN_SECONDS", 0.05)
    async with proxied() as h:
        async with anyio.create_task_group() as tg:
            tg.start_soon(h.client.call_tool, "hang_write", {"item": "x"})
            await h.upstream.hanging.wait()
            during = h.last_report()
            tg.cancel_scope.cancel()
    assert during["report"]["operations"][0]["attempts"] == 1  # O3: listed while in flight
    assert h.upstream.executed == [("hang_write", {"item": "x"})]
    final = h.last_report()
    assert final["status"] == "finished"
    assert final["report"]["operations"][0]["outcome"] == "EXECUTION_UNKNOWN"
    assert final["verdict"] == "NOT_TESTED"


# -- O3: the report is current before the call goes upstream and before the answer ---------


async def test_o3_report_is_current_before_upstream_and_before_the_answer():  # O3
    upstream = RecordingUpstream()
    async with proxied(upstream, scenario="F1") as h:
        upstream.on_execute = lambda tool, args: json.loads(h.reports[-1])
        await h.client.call_tool("create_booking", BOOK)
        seen_by_upstream = upstream.during_execution[0]
        assert seen_by_upstream["status"] == "running"
        assert seen_by_upstream["report"]["operations"][0]["arguments"] == BOOK
        assert seen_by_upstream["report"]["operations"][0]["executions"] == 0  # still open
        after = h.last_report()  # right after the answer, before anything else
        assert after["report"]["operations"][0]["executions"] == 1
        assert "UNVERIFIED_AFTER_TIMEOUT" in codes(after["report"]["observations"])
    final = h.last_report()
    assert final["status"] == "finished" and final["verdict"] == "PASS"
    assert final["score"]["overall"] == 80


class _SentAfter:
    """A line writer that notes, for each line, the report file as it was when the line went."""

    def __init__(self, inner: Any, reports: list[str]) -> None:
        self.inner, self.reports = inner, reports
        self.seen: list[tuple[dict[str, Any], dict[str, Any]]] = []

    async def write_line(self, line: bytes) -> None:
        self.seen.append((json.loads(line), json.loads(self.reports[-1])))
        await self.inner.write_line(line)

    async def close(self) -> None:
        await self.inner.close()


async def test_o3_pipelined_calls_share_report_writes_and_none_goes_out_before_its_own():  # O3
    # Issue 24: calls read together begin together and share one report write before any of
    # them goes upstream; answers that come together share one before any reaches the agent.
    upstream = ScriptedUpstream(SCRIPTED_TOOLS, SCRIPTED_RESULTS)  # answers all it has read
    async with proxied(upstream) as h:
        to_upstream = h.proxy.upstream_out = _SentAfter(h.proxy.upstream_out, h.reports)
        to_client = h.proxy.client_out = _SentAfter(h.proxy.client_out, h.reports)
        writes_before = len(h.reports)
        for i in range(40):
            call = {"jsonrpc": "2.0", "id": f"c{i}", "method": "tools/call",
                    "params": {"name": "create_booking", "arguments": {"n": i}}}  # fmt: skip
            await h.from_client.write_line(json.dumps(call).encode())
        for i in range(40):
            await h.to_client.wait_for(lambda m, i=i: m.get("id") == f"c{i}")
        writes = len(h.reports) - writes_before
    assert writes <= 4  # was two a call: 80
    calls = [(m, r) for m, r in to_upstream.seen if m.get("method") == "tools/call"]
    answers = [(m, r) for m, r in to_client.seen if str(m.get("id", "")).startswith("c")]
    assert len(calls) == len(answers) == 40
    for message, report in calls:  # in the report before it went upstream
        n = message["params"]["arguments"]["n"]
        ops = [o for o in report["report"]["operations"] if o["arguments"] == {"n": n}]
        assert len(ops) == 1 and ops[0]["attempts"] == 1, n
    for message, report in answers:  # its execution in the report before the agent got it
        n = int(message["id"][1:])
        ops = [o for o in report["report"]["operations"] if o["arguments"] == {"n": n}]
        assert ops[0]["outcome"] == "EXECUTED_ONCE", n


async def test_o3_an_upstream_lost_while_the_shared_report_is_written_answers_at_once():  # O3 A1
    # Calls that wait for the shared report write see an upstream lost meanwhile: none goes
    # upstream, each is answered as unavailable at once (not after --upstream-timeout).
    from harness.proxy.messages import UpstreamGone

    async with proxied(upstream_timeout_s=60.0) as h:
        await h.client.call_tool("create_booking", BOOK)  # the tool list is in
        shared_write, armed = h.proxy._write_pending_report, [True]

        def shared_write_then_lose():
            shared_write()  # the calls waiting for it go on at the next turn of the loop
            if armed:
                armed.clear()
                h.proxy._upstream_lost(UpstreamGone("crash", "lost during the report write"))

        h.proxy._write_pending_report = shared_write_then_lose
        for i in range(2):
            call = {"jsonrpc": "2.0", "id": f"u{i}", "method": "tools/call",
                    "params": {"name": "create_booking", "arguments": {"n": i}}}  # fmt: skip
            await h.from_client.write_line(json.dumps(call).encode())
        with anyio.fail_after(5):
            for i in range(2):
                answer = await h.to_client.wait_for(lambda m, i=i: m.get("id") == f"u{i}")
                assert "UPSTREAM_UNAVAILABLE" in json.dumps(answer)
    assert not armed  # the upstream was lost while both calls waited for the shared write
    assert h.upstream.count("create_booking") == 1  # the first call's only


async def test_o2_report_file_text_equals_the_judgement():  # O2 C7
    async with proxied(scenario="F1") as h:
        await h.client.call_tool("create_booking", BOOK)
        await h.client.call_tool("create_booking", BOOK)
    final = h.last_report()
    j = h.judgement()
    assert final["verdict"] == j.report["verdict"] == "FAIL"
    assert final["report"] == j.report
    assert final["score"] == j.score
    assert final["patches"] == j.patches
    classes = {t["name"]: t["class"] for t in final["toolClassification"]}
    assert classes["create_booking"] == "write" and classes["get_booking"] == "read"
    assert classes["sync_ledger"] == "unclassified"
    assert final["certification"] == "UNVERIFIED_FOR_PRODUCTION"


# -- the in-memory seam itself --------------------------------------------------------------


async def test_mcp_streams_a_line_after_the_sdk_side_closed_reaches_no_one_and_breaks_nothing():
    # A client session that leaves while an answer is still on its way (the runner's in-memory
    # proxy does this at every session end) must not crash the adapter: the line stays unread
    # (there is no pump task to take it), the closed stream says so, the block ends cleanly.
    inbound, outbound = MemoryPipe(), MemoryPipe()
    async with mcp_streams(inbound, outbound) as (read, _write):
        await read.aclose()
        await inbound.write_line(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        with pytest.raises(anyio.ClosedResourceError):
            await read.receive()


async def test_mcp_streams_reads_a_message_per_line_and_ends_at_eof():
    inbound, outbound = MemoryPipe(), MemoryPipe()
    async with mcp_streams(inbound, outbound) as (read, _write):
        await inbound.write_line(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        await inbound.write_line(b"not json")
        await inbound.close()
        items = [item async for item in read]
    assert items[0].message.method == "notifications/initialized"
    assert isinstance(items[1], ValueError)  # handed on to the SDK, as its own transports do
    assert len(items) == 2


async def test_mcp_streams_writes_a_line_per_message_and_eof_when_closed():
    from mcp.shared.message import SessionMessage

    inbound, outbound = MemoryPipe(), MemoryPipe()
    note = types.JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized")
    async with mcp_streams(inbound, outbound) as (_read, write):
        await write.send(SessionMessage(note))
        await write.aclose()
        with pytest.raises(anyio.ClosedResourceError):
            await write.send(SessionMessage(note))
    assert json.loads(await outbound.read_line()) == {
        "jsonrpc": "2.0", "method": "notifications/initialized"
    }  # fmt: skip
    assert await outbound.read_line() is None


async def test_mcp_streams_drops_a_message_to_a_gone_reader_then_says_broken():
    from mcp.shared.message import SessionMessage

    inbound, outbound = MemoryPipe(), MemoryPipe()
    await outbound.close()  # the reader of the lines is gone
    note = types.JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized")
    async with mcp_streams(inbound, outbound) as (_read, write):
        await write.send(SessionMessage(note))  # dropped, as a pump that lost its reader did
        with pytest.raises(anyio.BrokenResourceError):
            await write.send(SessionMessage(note))


# -- O4: the report file's atomic switch --------------------------------------------------------


def test_o4_a_reader_holding_the_old_report_keeps_reading_it_whole(tmp_path):
    report = ReportFile(str(tmp_path / "report.json"))
    old = json.dumps({"n": 1, "pad": "a" * 1_000_000})
    report.write_text(old)
    with open(tmp_path / "report.json", encoding="utf-8") as reader:
        head = reader.read(1000)
        report.write_text(json.dumps({"n": 2, "pad": "b" * 1_000_000}))  # while it reads
        # never a mix of the two (the writer may pad the JSON with spaces: same document)
        assert json.loads(head + reader.read()) == json.loads(old)
    assert json.loads((tmp_path / "report.json").read_text())["n"] == 2
    report.release()  # earlier versions kept for reuse go with it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "report.json.lock"]


def test_o4_a_version_a_reader_still_holds_open_is_never_reused(tmp_path):
    report = ReportFile(str(tmp_path / "report.json"))
    report.write_text(json.dumps({"n": 0}))
    versions = {}
    inodes = []
    for n in range(1, 12):
        report.write_text(json.dumps({"n": n, "pad": "x" * (n * 1000)}))
        inodes.append(os.stat(tmp_path / "report.json").st_ino)
        if n == 2:
            versions[n] = open(tmp_path / "report.json", encoding="utf-8")  # a slow reader
    try:
        assert len(set(inodes)) < len(inodes)  # earlier versions' files were written again...
        assert inodes[1] not in inodes[2:]  # ...but never the one the reader holds open
        assert json.loads(versions[2].read())["n"] == 2
    finally:
        versions[2].close()
        report.release()


def test_o4_a_directory_that_appears_at_the_target_is_left_there_and_refused(
    tmp_path, monkeypatch
):
    report = ReportFile(str(tmp_path / "report.json"))
    report.write_text("{}")
    (tmp_path / "report.json").unlink()
    (tmp_path / "report.json").mkdir()
    (tmp_path / "report.json" / "keep.txt").write_text("user data")
    # Skip any check before the switch, as if the directory appeared just after it (with an
    # exchange there is none: the exchange's own check refuses it).
    monkeypatch.setattr(ReportFile, "_check_still_regular", lambda self: None)
    with pytest.raises(ReportFileError):
        report.write_text('{"n": 1}')
    assert (tmp_path / "report.json" / "keep.txt").read_text() == "user data"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "report.json.lock"]
    report.release()


def test_o4_a_symlink_that_replaced_the_report_is_refused_and_left_there(tmp_path):
    report = ReportFile(str(tmp_path / "report.json"))
    report.write_text("{}")
    report.write_text('{"n": 1}')  # an earlier version's file is kept for reuse
    (tmp_path / "other.txt").write_text("user data")
    (tmp_path / "report.json").unlink()
    (tmp_path / "report.json").symlink_to(tmp_path / "other.txt")
    with pytest.raises(ReportFileError, match="no longer a regular file"):
        report.write_text('{"n": 2}')
    assert (tmp_path / "report.json").is_symlink()
    assert (tmp_path / "other.txt").read_text() == "user data"
    report.release()


def test_o4_without_an_exchange_a_directory_at_the_target_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr("harness.base.outfile.RENAMEAT2", None)  # not Linux, or an old libc
    report = ReportFile(str(tmp_path / "report.json"))
    report.write_text("{}")
    (tmp_path / "report.json").unlink()
    (tmp_path / "report.json").mkdir()
    with pytest.raises(ReportFileError, match="no longer a regular file"):
        report.write_text('{"n": 1}')
    assert (tmp_path / "report.json").is_dir()
    report.release()


def test_o4_without_an_atomic_exchange_the_report_is_renamed_over(tmp_path, monkeypatch):
    monkeypatch.setattr("harness.base.outfile.RENAMEAT2", None)  # not Linux, or an old libc
    report = ReportFile(str(tmp_path / "report.json"))
    report.write_text('{"n": 1}')
    report.write_text('{"n": 2}')
    assert json.loads((tmp_path / "report.json").read_text()) == {"n": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "report.json.lock"]
    report.release()


async def test_x7_an_oversize_line_to_an_in_process_sdk_ends_its_session_with_the_reason():
    # X7 in process: the SDK's read stream raises MessageTooLarge from its own receive loop (no
    # pump task sits between); the client's session must end with that reason, not hang on an
    # answer that never comes. The 5 s bound only turns a hang into a failure.
    from mcp import ClientSession

    from harness.wire.fdlines import MessageTooLarge

    inbound, outbound = MemoryPipe(max_bytes=1000), MemoryPipe(max_bytes=1000)

    async def server_with_an_oversize_answer() -> None:
        request = json.loads(await outbound.read_line())
        info = {"name": "x" * 3000, "version": "1"}
        answer = {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": info}
        reply = {"jsonrpc": "2.0", "id": request["id"], "result": answer}
        await inbound.write_line(json.dumps(reply).encode())

    def leaves(group: BaseException) -> list[BaseException]:
        inner = getattr(group, "exceptions", None)
        return [leaf for e in inner for leaf in leaves(e)] if inner else [group]

    with pytest.raises(BaseExceptionGroup) as raised:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server_with_an_oversize_answer)
            with anyio.fail_after(5):
                async with mcp_streams(inbound, outbound) as (read, write):
                    async with ClientSession(read, write) as client:
                        await client.initialize()
    assert any(isinstance(leaf, MessageTooLarge) for leaf in leaves(raised.value))

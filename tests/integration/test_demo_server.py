"""The demo MCP server (D1): the real `agent-harness demo` over stdio, and its parts in process.

The stdio tests start the installed command with a temporary working directory, where
get_report must leave `.agent-harness/audit-report.json`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from harness.demo import AUDIT_PATH, MAX_SESSIONS, TOOLS, Demo, SessionStore
from harness.faults import PlanConfig

COMMAND = Path(sys.executable).with_name("agent-harness")
TIMEOUT_S = 30
BOOK = {"guest": "Ann", "date": "2026-12-01"}
# D1: the seven tools, in the order tools/list gives them.
SEVEN_TOOLS = [
    "start_session",
    "execute_call",
    "get_report",
    "get_score",
    "list_scenarios",
    "reset_session",
    "delete_session",
]
BANNED_SCHEMA_KEYS = {"$schema", "pattern", "format", "propertyNames"}


@asynccontextmanager
async def demo_client(cwd: Path) -> AsyncIterator[ClientSession]:
    """An initialised client session to `agent-harness demo` as a subprocess."""
    with anyio.fail_after(TIMEOUT_S):
        params = StdioServerParameters(command=str(COMMAND), args=["demo"], cwd=cwd)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> tuple[dict, bool]:
    """(structured answer, isError) of one demo tool call; the text must mirror the data."""
    result = await session.call_tool(tool, arguments)
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content, bool(result.is_error)


def keywords_in(schema: Any) -> set[str]:
    """Every JSON-schema keyword used anywhere in a schema (property names are not keywords)."""
    if not isinstance(schema, dict):
        return set()
    found = set(schema)
    for key, value in schema.items():
        subs = value.values() if key == "properties" else [value] if key == "items" else []
        found |= {k for sub in subs for k in keywords_in(sub)}
    return found


# -- Over a real stdio session -----------------------------------------------------------------


@pytest.mark.anyio
async def test_d1_lists_seven_tools_that_each_say_this_is_a_demo(tmp_path):  # D1
    async with demo_client(tmp_path) as s:
        tools = (await s.list_tools()).tools
        scenarios, is_error = await call(s, "list_scenarios")
    assert [t.name for t in tools] == SEVEN_TOOLS
    for tool in tools:
        assert "DEMO" in tool.description and "agent-harness proxy" in tool.description
        assert tool.input_schema["type"] == "object"
        assert not keywords_in(tool.input_schema) & BANNED_SCHEMA_KEYS
    assert not is_error and "agent-harness proxy" in scenarios["notice"]
    assert [row["id"] for row in scenarios["scenarios"]] == ["F1", "F2", "F3", "F4", "F5", "chaos"]


@pytest.mark.anyio
async def test_d1_ghost_write_then_resend_is_reported_as_duplicate(tmp_path):  # D1 S2 J1
    async with demo_client(tmp_path) as s:
        started, _ = await call(s, "start_session", scenario="F1")
        sid = started["sessionId"]
        first, first_error = await call(
            s, "execute_call", session_id=sid, tool_name="create_booking", arguments=BOOK
        )
        again, again_error = await call(
            s, "execute_call", session_id=sid, tool_name="create_booking", arguments=BOOK
        )
        report, _ = await call(s, "get_report", session_id=sid)
        score, _ = await call(s, "get_score", session_id=sid)
        markdown = await s.call_tool("get_report", {"session_id": sid, "format": "markdown"})
    # The answer says openly what was injected and that the write really ran.
    assert first_error and first["faultInjected"] == "F1" and first["executedBySimulatedBackend"]
    assert "timed out" in first["result"]["content"][0]["text"]
    assert "ghost write" in first["whatHappened"]
    assert not again_error and again["faultInjected"] is None
    assert report["verdict"] == "FAIL" and report["kind"] == "demo"
    assert report["report"]["kind"] == "demo"
    assert report["report"]["operations"][0]["outcome"] == "DUPLICATE"
    assert [v["code"] for v in report["report"]["violations"]] == ["DUPLICATE_EXECUTION"]
    assert "agent-harness proxy" in report["notice"]
    assert score["score"]["verdict"] == "FAIL" and [p["id"] for p in score["patches"]] == [
        "GHOST_WRITE"
    ]
    text = markdown.content[0].text
    assert (
        text.startswith("DEMO with a simulated backend") and "# agent-harness report: FAIL" in text
    )
    audit = json.loads((tmp_path / AUDIT_PATH).read_text())
    assert (audit["kind"], audit["sessionId"], audit["verdict"]) == ("demo", sid, "FAIL")
    assert audit["certification"] == "UNVERIFIED_FOR_PRODUCTION"


@pytest.mark.anyio
async def test_d1_reset_clears_history_and_delete_removes_the_session(tmp_path):  # D1
    async with demo_client(tmp_path) as s:
        sid = (await call(s, "start_session", scenario="F1"))[0]["sessionId"]
        for _ in range(2):
            await call(
                s, "execute_call", session_id=sid, tool_name="create_booking", arguments=BOOK
            )
        reset, reset_error = await call(s, "reset_session", session_id=sid)
        after_reset, _ = await call(s, "get_report", session_id=sid)
        rearmed, _ = await call(
            s, "execute_call", session_id=sid, tool_name="create_booking", arguments=BOOK
        )
        deleted, _ = await call(s, "delete_session", session_id=sid)
        gone, gone_error = await call(s, "get_score", session_id=sid)
    assert not reset_error and reset["reset"] is True
    assert after_reset["report"]["violations"] == [] and after_reset["report"]["operations"] == []
    assert after_reset["verdict"] == "NOT_TESTED"
    assert rearmed["faultInjected"] == "F1"  # the scenario starts over too
    assert deleted["deleted"] is True
    assert gone_error and "unknown session id" in gone["error"]


@pytest.mark.anyio
async def test_d1_oldest_session_is_dropped_beyond_500(tmp_path):  # D1
    async with demo_client(tmp_path) as s:
        ids = [(await call(s, "start_session", scenario="none"))[0]["sessionId"]]
        for _ in range(MAX_SESSIONS - 1):
            ids.append((await call(s, "start_session", scenario="none"))[0]["sessionId"])
        still, still_error = await call(s, "get_score", session_id=ids[0])
        newest, _ = await call(s, "start_session", scenario="F2")
        dropped, dropped_error = await call(s, "get_score", session_id=ids[0])
        second, second_error = await call(s, "get_score", session_id=ids[1])
    assert not still_error
    assert newest["droppedSessions"] == [ids[0]]
    assert dropped_error and "unknown session id" in dropped["error"]
    assert not second_error and second["sessionId"] == ids[1]


@pytest.mark.anyio
async def test_d1_bad_arguments_are_error_results_naming_the_problem(tmp_path):  # D1
    async with demo_client(tmp_path) as s:
        unknown, e1 = await call(s, "start_session", scenario="F9")
        missing, e2 = await call(s, "execute_call", tool_name="create_booking")
        chaos, e3 = await call(s, "start_session", scenario="chaos")
    assert e1 and "scenario" in unknown["error"] and "F1" in unknown["error"]
    assert e2 and "session_id" in missing["error"]
    assert e3 and "error_rate" in chaos["error"]


# -- In process: the same logic without the stdio round trips --------------------------------


def start(demo: Demo, **arguments: Any) -> str:
    return demo.call("start_session", arguments)["structuredContent"]["sessionId"]


def test_d1_store_drops_the_oldest_sessions_first():  # D1
    store = SessionStore(limit=3)
    ids = [store.start(PlanConfig())[0].id for _ in range(3)]
    fourth, dropped = store.start(PlanConfig())
    assert dropped == [ids[0]]
    assert list(store.sessions) == [ids[1], ids[2], fourth.id]


def test_d1_default_limit_is_500_sessions():  # D1
    demo = Demo()
    ids = [start(demo, scenario="none") for _ in range(MAX_SESSIONS + 1)]
    assert len(demo.store.sessions) == MAX_SESSIONS
    assert demo.store.get(ids[0]) is None and demo.store.get(ids[1]) is not None


def test_d1_declared_read_tool_is_judged_as_a_read_and_never_triggers_the_scenario():  # D1 C3
    demo = Demo()
    sid = start(demo, scenario="F1")
    answer = demo.call(
        "execute_call",
        {"session_id": sid, "tool_name": "sync_ledger", "arguments": {}, "tool_type": "read"},
    )["structuredContent"]
    assert (answer["toolClass"], answer["faultInjected"]) == ("read", None)
    assert answer["result"]["structuredContent"]["ok"] is True  # reads answer a generic ok


def test_d1_declared_write_with_an_unpatterned_name_triggers_the_scenario():  # D1 C3
    demo = Demo()
    sid = start(demo, scenario="F5")
    answer = demo.call(
        "execute_call",
        {"session_id": sid, "tool_name": "sync_ledger", "arguments": BOOK, "tool_type": "write"},
    )
    data = answer["structuredContent"]
    assert answer["isError"] is True
    assert (data["toolClass"], data["faultInjected"]) == ("write", "F5")
    assert data["executedBySimulatedBackend"] is False


def test_d1_f2_announces_the_retry_after_the_session_was_started_with():  # D1 S3
    demo = Demo()
    sid = start(demo, scenario="F2", retry_after=5)
    data = demo.call(
        "execute_call", {"session_id": sid, "tool_name": "create_booking", "arguments": BOOK}
    )["structuredContent"]
    assert data["faultInjected"] == "F2" and "retry_after 5" in data["result"]["content"][0]["text"]


@pytest.mark.parametrize(
    "arguments, problem",
    [
        ({"scenario": "F1", "retry_after": 5}, "retry_after only applies to scenario F2"),
        ({"scenario": "F2", "retry_after": 0}, "retry_after must be above 0"),
        ({"scenario": "chaos", "error_rate": 1.5}, "from 0 to 1"),
        ({"scenario": "F1", "seed": 3}, "seed only applies"),
        ({"scenario": "F1", "colour": "red"}, "unknown argument 'colour'"),
    ],
)
def test_d1_start_session_refuses_inconsistent_options(arguments, problem):  # D1
    result = Demo().call("start_session", arguments)
    assert result["isError"] is True and problem in result["structuredContent"]["error"]


def test_d1_chaos_session_with_a_seed_is_reproducible():  # D1 S9
    def faults(demo: Demo) -> list[str | None]:
        sid = start(demo, scenario="chaos", error_rate=0.5, seed=7)
        return [
            demo.call(
                "execute_call",
                {"session_id": sid, "tool_name": "create_booking", "arguments": {"n": i}},
            )["structuredContent"]["faultInjected"]
            for i in range(20)
        ]

    first = faults(Demo())
    assert first == faults(Demo()) and "chaos" in first and None in first


def test_d1_every_answer_carries_the_demo_notice():  # D1
    demo = Demo()
    sid = start(demo, scenario="F3")
    answers = [
        demo.call(name, args)
        for name, args in [
            ("list_scenarios", {}),
            ("execute_call", {"session_id": sid, "tool_name": "create_booking"}),
            ("get_score", {"session_id": sid}),
            ("reset_session", {"session_id": sid}),
            ("delete_session", {"session_id": sid}),
            ("get_score", {"session_id": sid}),
            ("no_such_tool", {}),
        ]
    ]
    for answer in answers:
        assert "agent-harness proxy" in answer["content"][0]["text"]
    assert list(TOOLS) == SEVEN_TOOLS

"""X11 and C10: the revision the client speaks, and tools the proxy could not list.

A 2026-07-28 client has no handshake: it discovers the server and stamps every request with
its protocol version and capabilities. The upstream here is the MCP SDK's own server, which
refuses a request without that envelope: the proxy's own tool listing must carry it, or
nothing gets classified. Ground truth is the upstream's record of what it executed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from harness.wire.protocol import CLIENT_CAPABILITIES_KEY, PROTOCOL_VERSION_KEY
from tests.support.proxy_fixture import (
    BOOK,
    MemoryPipe,
    ScriptedUpstream,
    lenient_upstream,
    proxied,
)

pytestmark = pytest.mark.anyio


def own_requests(h, method: str) -> list[dict[str, Any]]:
    return [
        m for m in map(json.loads, h.to_upstream.lines)
        if isinstance(m, dict) and m.get("method") == method
        and str(m.get("id", "")).startswith("agent-harness-")
    ]  # fmt: skip


async def test_x11_a_stateless_client_is_listed_in_its_envelope_and_a_repeat_is_judged():
    async with proxied(scenario="F1", stateless=True) as h:
        ghost = await h.client.call_tool("create_booking", BOOK)
        assert ghost.is_error is True
        await h.client.call_tool("create_booking", BOOK)
    [listing] = own_requests(h, "tools/list")
    meta = listing["params"]["_meta"]
    assert meta[PROTOCOL_VERSION_KEY] == "2026-07-28" and CLIENT_CAPABILITIES_KEY in meta
    j = h.judgement()
    assert {t["name"]: t["class"] for t in j.tool_classification}["create_booking"] == "write"
    # Ground truth: two real bookings; the report says so (it said NOT_TESTED before X11).
    assert h.upstream.count("create_booking", BOOK) == 2
    assert j.report["verdict"] == "FAIL"
    assert j.report["operations"][0]["executions"] == 2


@pytest.mark.parametrize("stateless", [True, False], ids=["2026-07-28", "2025-11-25"])
async def test_x11_answers_the_proxy_makes_carry_result_type_only_for_a_stateless_client(
    stateless,
):
    async with proxied(scenario="F5", stateless=stateless) as h:
        result = await h.client.call_tool("create_booking", BOOK)
    assert result.is_error is True and h.upstream.executed == []
    injected = json.loads(next(line for line in h.to_client.lines if b"500" in line))
    assert injected["result"].get("resultType") == ("complete" if stateless else None)


async def test_x11_an_input_required_answer_is_not_an_execution_and_f1_waits_for_the_retry():
    async with proxied(scenario="F1", stateless=True) as h:
        first = await h.client.call_tool(
            "confirm_charge", {"item": "a"}, allow_input_required=True
        )
        assert first.result_type == "input_required"
        assert h.upstream.count("confirm_charge") == 0
        retry = await h.client.call_tool(
            "confirm_charge", {"item": "a"}, request_state=first.request_state,
            allow_input_required=True,
        )
    assert retry.is_error is True  # the round that ran is the ghost (S7: F1 waited for it)
    assert h.upstream.count("confirm_charge") == 1
    j = h.judgement()
    assert h.attempts("confirm_charge") == ["input_required", "ghost"]
    assert j.report["operations"][0]["executions"] == 1
    assert (j.report["verdict"], j.score["overall"]) == ("PASS", 80)


@dataclass
class UnlistingUpstream(ScriptedUpstream):
    """Answers tools/list with an error: the proxy cannot learn any tool."""

    async def serve(self, reader: MemoryPipe, writer: MemoryPipe) -> None:
        inner = lenient_upstream()
        self.executed = inner.executed
        while (line := await reader.read_line()) is not None:
            message = json.loads(line)
            if message.get("method") == "tools/list":
                body = {"jsonrpc": "2.0", "id": message["id"],
                        "error": {"code": -32603, "message": "listing is broken"}}
                await writer.write_line(json.dumps(body).encode())
                continue
            answer = inner._answer(message)
            if answer is not None:
                await writer.write_line(json.dumps(answer).encode())


@pytest.mark.parametrize("flags", [{}, {"write_tools": ("create_*",)}], ids=["names", "flag"])
async def test_c10_unlisted_tools_are_classified_by_flags_and_names_and_judged(flags):
    upstream = UnlistingUpstream(tools=[], results={})
    async with proxied(upstream, scenario="F1", **flags) as h:
        for rpc_id in ("c1", "c2"):  # raw: the SDK client would list tools itself first
            await h.raw_call("create_booking", BOOK, rpc_id)
    assert any("tools/list failed" in line for line in h.logs)
    j = h.judgement()
    [entry] = j.tool_classification
    assert entry["class"] == "write" and "not listed" in entry["reason"]
    # Ground truth: executed twice, and the first was the ghost: FAIL, as the upstream shows.
    assert upstream.executed == [("create_booking", BOOK)] * 2
    assert j.report["verdict"] == "FAIL"
    assert j.report["operations"][0]["executions"] == 2


@pytest.mark.parametrize("stateless", [True, False], ids=["2026-07-28", "2025-11-25"])
async def test_h2_x11_f7_applies_only_to_a_client_with_a_session_and_is_spent_either_way(
    stateless,
):  # H2 X11: a 404 on the session id means nothing to a client that has no session
    from mcp.shared.exceptions import MCPError

    bob = {**BOOK, "guest": "Bob"}
    async with proxied(scenario="F7", stateless=stateless) as h:
        if stateless:
            first = await h.client.call_tool("create_booking", BOOK)
            assert first.is_error is False  # the upstream's real answer
        else:
            with pytest.raises(MCPError, match="Session not found"):
                await h.client.call_tool("create_booking", BOOK)
        assert (await h.client.call_tool("create_booking", bob)).is_error is False
    kinds = [e.type for e in h.events.events]
    j = h.judgement()
    assert h.upstream.count("create_booking", bob) == 1  # one fault per run: none for Bob
    if stateless:
        assert h.upstream.count("create_booking", BOOK) == 1  # passed unchanged, once
        assert "fault_applied" not in kinds
        [skipped] = [e for e in h.events.events if e.type == "fault_not_applicable"]
        assert (skipped.seq, skipped.fault) == (1, "F7")
        assert j.report["verdict"] == "NOT_TESTED"
        assert j.report["verdictReason"] == (
            "Scenario F7 was not applied: F7 needs a session (protocol revisions 2025-06-18, "
            "2025-11-25); the agent speaks 2026-07-28, which has none; the write passed "
            "unchanged."
        )
    else:
        assert h.upstream.count("create_booking", BOOK) == 0  # the 404: nothing ran
        assert "fault_not_applicable" not in kinds and kinds.count("fault_applied") == 1
        assert j.report["verdict"] == "PASS"

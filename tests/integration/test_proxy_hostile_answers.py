"""Issue 11, the proxy's side in memory: upstream errors and odd answers (X13, X7), odd ids and
text from the client (X10), cancelled and long calls at shutdown (X15).

The hostile upstream writes exactly the bytes a test gives it; `executed` is what reached it.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from tests.support.proxy_fixture import BOOK, call, lenient_upstream, ping, proxied

pytestmark = pytest.mark.anyio
SCHEMA = {"type": "object", "properties": {"guest": {"type": "string"}}}


@dataclass
class HostileUpstream:
    """Answers each `tools/call` with the next of `answers` (bytes, `__ID__` = the id's JSON);
    answers the proxy's own `tools/list` as a batch when `list_as_batch`."""

    answers: list[bytes]
    list_as_batch: bool = False
    tools: list[list[dict[str, Any]]] = field(default_factory=list)  # a new list per call
    executed: list[Any] = field(default_factory=list)
    release: Any = None
    listed: list[dict[str, Any]] = field(
        default_factory=lambda: [{"name": "create_booking", "inputSchema": SCHEMA}])

    async def serve(self, reader, writer) -> None:
        while (line := await reader.read_line()) is not None:
            message = json.loads(line.decode("utf-8", "surrogatepass"))
            method, rpc_id = message.get("method"), message.get("id")
            if rpc_id is None or method is None:
                continue
            if method == "tools/call":
                self.executed.append(message["params"])
                if self.tools:  # the tools change (or seem to): tell the client
                    self.listed = self.tools.pop(0)
                    changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
                    await writer.write_line(json.dumps(changed).encode())
                answer = self.answers[min(len(self.executed), len(self.answers)) - 1]
                await writer.write_line(answer.replace(b"__ID__", json.dumps(rpc_id).encode()))
                continue
            result: dict[str, Any] = {}
            if method == "initialize":
                result = {"protocolVersion": message["params"]["protocolVersion"],
                          "capabilities": {"tools": {}},
                          "serverInfo": {"name": "hostile", "version": "0"}}
            elif method == "tools/list":
                result = {"tools": self.listed}
            body = {"jsonrpc": "2.0", "id": rpc_id, "result": result}
            batch = self.list_as_batch and method == "tools/list"
            await writer.write_line(json.dumps([body] if batch else body).encode())


async def line_to_client(h, start: bytes) -> bytes:
    """The first line the client got that starts with `start` (for lines too deep to parse)."""
    tap = h.to_client
    with anyio.fail_after(tap.deadline_s):
        while True:
            found = next((line for line in tap.lines if line.startswith(start)), None)
            if found is not None:
                return found
            tap._new_line = asyncio.Event()
            await tap._new_line.wait()


def answers_to(h, rpc_id: Any) -> list[dict[str, Any]]:
    return [m for m in h.to_client.messages()
            if isinstance(m, dict) and "method" not in m and m.get("id") == rpc_id]


# -- X13: the upstream's JSON-RPC error reaches the agent unchanged ----------------------------


async def test_x13_url_elicitation_error_reaches_the_sdk_client_with_its_data():
    async with proxied(scenario="F1") as h:
        with pytest.raises(MCPError) as raised:
            await h.client.call_tool("connect_account", {"account": "a-1"})
        ghost = await h.client.call_tool("create_booking", BOOK)  # F1 stayed armed (S7)
    error = raised.value.error
    assert error.code == types.URL_ELICITATION_REQUIRED == -32042
    assert error.message == "Authorise the account first."
    assert error.data["elicitations"][0]["url"] == "https://example.test/authorise"
    rpc_id = next(m["id"] for m in h.to_client.messages() if "error" in m)
    assert h.to_client.answer_to(rpc_id)[0] == h.from_upstream.answer_to(rpc_id)[0]
    assert ghost.is_error is True  # the fault went to the next write, not to the error
    # The judge still records the error: the attempt's outcome is unknown (A1).
    assert h.attempts("connect_account") == ["unknown"]
    upstream = [e for e in h.events.events
                if e.type == "upstream_answered" and e.status == "error"]
    assert upstream and upstream[0].error["code"] == -32042


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (b'{"jsonrpc":"2.0","id":__ID__,"result":null}', "not an object (null)"),
        (b'{"jsonrpc":"2.0","id":__ID__,"result":[1]}', "not an object (list)"),
        (b'{"jsonrpc":"2.0","id":__ID__,"error":"boom"}', "not a JSON-RPC error"),
        (b'{"jsonrpc":"2.0","id":__ID__}', "neither a result nor an error"),
    ],
    ids=["result-null", "result-array", "error-string", "empty"],
)
async def test_x13_an_answer_that_is_neither_result_nor_error_gets_a_clear_error(answer, says):
    async with proxied(HostileUpstream([answer]), audit_tools=False) as h:
        result = await h.client.call_tool("create_booking", BOOK)
    assert result.is_error is True
    shown = result.content[0].text
    assert "UPSTREAM_INVALID_ANSWER" in shown and says in shown and "None" not in shown
    assert h.attempts("create_booking") == ["unknown"]


async def test_x7_a_result_nested_100k_deep_is_forwarded_and_judged_by_its_top_level():
    deep = b"[" * 100_000 + b"]" * 100_000
    answers = [b'{"jsonrpc":"2.0","id":__ID__,"result":{"content":[],"x":' + deep + b"}}",
               b'{"jsonrpc":"2.0","id":__ID__,"result":{"isError":true,"x":' + deep + b"}}"]
    async with proxied(HostileUpstream(answers), audit_tools=False) as h:
        for rpc_id in ("ok", "rejected"):
            await h.from_client.write_line(json.dumps(call(rpc_id)).encode())
            # A round trip read as bytes: the deep answer comes before it (X9: in order), and
            # the test's own JSON reader could not parse that one.
            after = {"jsonrpc": "2.0", "id": f"after-{rpc_id}", "method": "ping"}
            await h.from_client.write_line(json.dumps(after).encode())
            await line_to_client(h, b'{"jsonrpc": "2.0", "id": "after-%s"' % rpc_id.encode())
        for rpc_id in ("ok", "rejected"):
            await line_to_client(h, b'{"jsonrpc":"2.0","id":"%s",' % rpc_id.encode())
    deep_answer = b'{"jsonrpc":"2.0","id":"'  # only the two deep answers are written compact
    assert [line for line in h.from_upstream.lines if line.startswith(deep_answer)] == [
        line for line in h.to_client.lines if line.startswith(deep_answer)
    ]  # forwarded as the lines they came as (X3)
    assert h.attempts("create_booking") == ["executed", "rejected"]
    assert not any(b"Upstream error None" in line for line in h.to_client.lines)


# -- upstream answers the proxy cannot read ---------------------------------------------------


async def test_x10_an_answer_in_invalid_utf8_gets_one_error_answer_never_a_second():
    bad = b'{"jsonrpc":"2.0","id":__ID__,"result":{"content":[{"type":"text","text":"\xff"}]}}'
    async with proxied(HostileUpstream([bad]), audit_tools=False) as h:
        result = await h.client.call_tool("create_booking", BOOK)
        rpc_id = next(m["id"] for m in h.to_client.messages() if "result" in m and
                      "UPSTREAM_INVALID_ANSWER" in json.dumps(m))
        # Nothing is left waiting for it, so no timeout can answer it a second time.
        assert not h.proxy._pending and not h.proxy._abandoned
    assert result.is_error is True and "not valid UTF-8" in result.content[0].text
    assert len(answers_to(h, rpc_id)) == 1
    assert all(b"\xff" not in line for line in h.to_client.lines)
    assert h.attempts("create_booking") == ["unknown"]


async def test_x10_tools_list_answered_as_a_batch_is_read_and_no_internal_id_leaks():
    ok = b'{"jsonrpc":"2.0","id":__ID__,"result":{"content":[]}}'
    upstream = HostileUpstream([ok], list_as_batch=True)
    async with proxied(upstream, audit_tools=False, upstream_timeout_s=30) as h:
        with anyio.fail_after(10):  # the listing is read at once, not after the 30 s timeout
            result = await h.client.call_tool("create_booking", BOOK)
            listed = await h.client.list_tools()
    assert result.is_error is False
    assert [t.name for t in listed.tools] == ["create_booking"]
    assert not any(b"agent-harness-" in line for line in h.to_client.lines)
    assert h.session.classification.complete is True
    assert h.session.classification.get("create_booking").listed is True


# -- X10: ids the proxy cannot track, text that is not Unicode ---------------------------------


@pytest.mark.parametrize(
    ("rpc_id", "answered_id"),
    [(1.5, 1.5), ({"a": 1}, None), ([1], None), (True, None)],
    ids=["fraction", "object", "array", "true"],
)
@pytest.mark.parametrize("method", ["tools/call", "ping"])
async def test_x10_an_id_that_is_not_a_string_or_integer_gets_an_error_answer(
    rpc_id, answered_id, method
):
    async with proxied() as h:
        body = call(rpc_id) if method == "tools/call" else {
            "jsonrpc": "2.0", "id": rpc_id, "method": "ping"}
        await h.from_client.write_line(json.dumps(body).encode())
        await ping(h, "after")
    [answer] = [m for m in h.to_client.messages() if "error" in m]
    assert answer["id"] == answered_id and answer["error"]["code"] == -32600
    assert "is not a string or an integer" in answer["error"]["message"]
    assert h.upstream.executed == []
    assert h.judgement().report["coverage"]["refusedMessages"] == {"bad_id": 1}
    assert not any("Traceback" in line for line in h.logs)


@pytest.mark.parametrize("report_file", [True, False], ids=["report-file", "no-report-file"])
async def test_x10_a_lone_surrogate_in_a_call_is_forwarded_judged_and_reported(report_file):
    line = (b'{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"create_booking",'
            b'"arguments":{"guest":"Ann\\ud800","date":"2026-12-01"}}}')
    # A lenient upstream (like Node's JSON.parse) takes the surrogate and executes the call.
    upstream = lenient_upstream()
    async with proxied(upstream, report_file=report_file) as h:
        answer = await h.raw_request(line, "s")
        again = await h.raw_request(line.replace(b'"s"', b'"t"'), "t")
    assert "result" in answer and "result" in again
    assert len(upstream.executed) == 2  # ground truth: it really ran twice
    report = h.judgement().report
    assert report["verdict"] == "FAIL"  # the same lone-surrogate booking twice: a duplicate
    op = report["operations"][0]
    assert op["executions"] == 2 and op["arguments"]["guest"] == "Ann\ud800"
    if report_file:
        text = h.reports[-1]
        text.encode("utf-8")  # the file is UTF-8: the surrogate is written as its escape
        assert '"Ann\\ud800"' in text and json.loads(text)["status"] == "finished"


# -- X15: cancelled calls at shutdown ------------------------------------------------------------


async def test_x15_a_cancelled_call_is_not_waited_for_at_shutdown(monkeypatch):
    # With the old rule the proxy waited DRAIN_SECONDS for it; a long drain makes that visible
    # as this test's deadline instead of as a measured duration.
    monkeypatch.setattr("harness.proxy.router.DRAIN_SECONDS", 600)
    async with proxied() as h:
        async with anyio.create_task_group() as tg:
            tg.start_soon(h.client.call_tool, "hang_write", {"item": "x"})
            await h.upstream.hanging.wait()
            tg.cancel_scope.cancel()  # the SDK sends notifications/cancelled
        await h.from_upstream.wait_for(lambda m: True)  # something came back: the loop runs
        await h.to_upstream.wait_for(lambda m: m.get("method") == "notifications/cancelled")
        await h.close_client()
        with anyio.fail_after(10):
            await h.done.wait()
    final = h.last_report()  # its outcome is unknown: no answer arrived (X15)
    assert final["status"] == "finished"
    assert final["report"]["operations"][0]["outcome"] == "EXECUTION_UNKNOWN"


# -- C7 V6: the classification table on list_changed --------------------------------------------


async def test_c7_v6_the_table_is_printed_again_only_when_a_list_change_brings_other_tools():
    ok = b'{"jsonrpc":"2.0","id":__ID__,"result":{"content":[]}}'
    same = [{"name": "create_booking", "inputSchema": SCHEMA}]
    other = [*same, {"name": "create_\x1b]0;pwned\x07refund", "inputSchema": SCHEMA}]
    upstream = HostileUpstream([ok], tools=[same, same, same, other])
    async with proxied(upstream, audit_tools=False) as h:
        for _ in range(4):
            await h.client.call_tool("create_booking", BOOK)
            with anyio.fail_after(10):
                await h.proxy._tools_ready.wait()  # the relisting is done and printed
        lists = sum(1 for m in h.to_upstream.messages() if m.get("method") == "tools/list"
                    and str(m.get("id")).startswith("agent-harness-"))  # the proxy's own
    tables = [line for line in h.logs if line.startswith("Upstream tools (")]
    assert lists == 5  # the first listing and one per list_changed
    assert tables == ["Upstream tools (1):", "Upstream tools (2):"]
    assert any("create_\\x1b]0;pwned\\x07refund" in line for line in h.logs)  # escaped
    assert not any("\x1b" in line for line in h.logs)

"""X10: every message that can execute a write is judged or not forwarded.

Each test holds the report against the upstream's own record of what it executed. The lenient
upstream executes whatever `tools/call` reaches it (no id, null id, reused id, replaced bad
bytes), as some real servers do, so its record shows exactly what the proxy let through.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from tests.support.proxy_fixture import BOOK, call, lenient_upstream, ping, proxied

pytestmark = pytest.mark.anyio


def ops(h) -> list[dict[str, Any]]:
    return h.judgement().report["operations"]


async def test_x10_a_write_repeated_inside_a_batch_is_judged_and_answered_as_a_batch():
    async with proxied(scenario="F1") as h:
        ghost = await h.client.call_tool("create_booking", BOOK)
        assert ghost.is_error is True
        answers = await h.raw_batch([
            call("b-1"),
            {"jsonrpc": "2.0", "id": "b-2", "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/progress",
             "params": {"progressToken": "t", "progress": 1}},
        ])
    assert sorted(a["id"] for a in answers) == ["b-1", "b-2"]
    assert next(a for a in answers if a["id"] == "b-2")["result"] == {}
    # Ground truth: the upstream executed the booking twice; so says the report.
    assert h.upstream.count("create_booking", BOOK) == 2
    report = h.judgement().report
    assert report["verdict"] == "FAIL"
    assert ops(h)[0]["executions"] == 2
    assert report["violations"][0]["duplicate"]["afterTimeout"] is True


async def test_j11_x10_a_repeat_in_the_batch_of_the_429_was_sent_before_the_429_existed():
    # J11: the agent gets every answer of a batch at once, so the second element cannot have
    # ignored the first element's 429: parallel, no RETRY_AFTER_VIOLATED.
    async with proxied(scenario="F2", retry_after_s=60) as h:
        answers = await h.raw_batch([call(1), call(2)])
        assert h.judgement().report["violations"] == []  # also while the session still runs
    by_id = {a["id"]: a["result"] for a in answers}
    assert by_id[1]["isError"] is True and "429" in by_id[1]["content"][0]["text"]
    assert by_id[2].get("isError") is not True
    assert h.upstream.executed == [("create_booking", BOOK)]  # ground truth: one booking
    report = h.judgement().report
    assert report["verdict"] == "PASS" and report["violations"] == []
    assert ops(h)[0]["executions"] == 1
    # The same repeat sent alone after the batch's answer came back is the violation.
    async with proxied(scenario="F2", retry_after_s=60) as h:
        await h.raw_batch([call(1)])
        await h.raw_batch([call(2)])
    assert [v["code"] for v in h.judgement().report["violations"]] == ["RETRY_AFTER_VIOLATED"]
    assert h.upstream.executed == [("create_booking", BOOK)]


async def test_j11_x10_two_identical_writes_in_one_batch_are_a_parallel_duplicate():  # J1 J11
    async with proxied(scenario="F5") as h:
        await h.raw_batch([call(1), call(2), call(3)])
    assert h.upstream.count("create_booking", BOOK) == 2  # the first got the 500, two ran
    report = h.judgement().report
    dup = next(v for v in report["violations"] if v["code"] == "DUPLICATE_EXECUTION")
    assert dup["duplicate"]["parallel"] is True
    assert ops(h)[0]["executions"] == 2


async def test_x10_a_fault_inside_a_batch_applies_to_its_element_only():  # X10 S1 S6
    async with proxied(scenario="F5") as h:
        answers = await h.raw_batch([call(1), call(2, arguments={"guest": "Bob"})])
    by_id = {a["id"]: a["result"] for a in answers}
    assert by_id[1]["isError"] is True and "500" in by_id[1]["content"][0]["text"]
    assert by_id[2].get("isError") is not True
    assert h.upstream.executed == [("create_booking", {"guest": "Bob"})]
    assert sum(o["executions"] for o in ops(h)) == 1


async def test_x10_a_batch_of_notifications_only_gets_no_answer_and_elements_go_one_by_one():
    async with proxied() as h:
        await h.from_client.write_line(json.dumps([
            {"jsonrpc": "2.0", "method": "notifications/progress",
             "params": {"progressToken": "t", "progress": 1}},
        ]).encode())
        await ping(h, "after")
    assert not any(line.startswith(b"[") for line in h.to_client.lines)
    # Upstreams since 2025-06-18 take no batches: each element went up as a lone message.
    assert not any(line.startswith(b"[") for line in h.to_upstream.lines)


async def test_x10_a_batch_element_that_is_not_a_message_gets_an_invalid_request_error():
    async with proxied() as h:
        answers = await h.raw_batch([1, {"jsonrpc": "2.0", "id": "p", "method": "ping"}])
    assert {a.get("id") for a in answers} == {None, "p"}
    assert next(a for a in answers if a.get("id") is None)["error"]["code"] == -32600


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (json.dumps(call(...)).encode(), "no_id"),
        (json.dumps(call(None)).encode(), "null_id"),
    ],
    ids=["without-id", "null-id"],
)
async def test_x10_a_tools_call_without_a_usable_id_is_refused_not_forwarded(line, reason):
    upstream = lenient_upstream()
    async with proxied(upstream, scenario="F1") as h:
        await h.client.call_tool("create_booking", BOOK)  # the ghost write
        await h.from_client.write_line(line)
        await ping(h, "after")
    assert upstream.executed == [("create_booking", BOOK)]  # the lenient upstream never got it
    assert line not in h.to_upstream.lines
    report = h.judgement().report
    assert report["coverage"]["refusedMessages"] == {reason: 1}
    assert report["verdict"] == "PASS" and ops(h)[0]["executions"] == 1
    if reason == "null_id":
        error = h.to_client.answer_to(None)[1]["error"]
        assert error["code"] == -32600
    assert any("refused a tools/call message" in log for log in h.logs)


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":"u-1","method":"tools/call","params":{"name":"create_booking",'
        b'"arguments":{"guest":"Ann\xff","date":"2026-12-01"}}}',
        b'{"jsonrpc":"2.0","id":"u-1","method":"tools/call","params":{"name":"create_booking",'
        b'"arguments":{"guest":"Ann","date":"2026-12-01","nights":NaN}}}',
    ],
    ids=["invalid-utf-8", "nan"],
)
async def test_x10_bytes_the_proxy_cannot_read_are_refused_with_the_request_id(line):
    upstream = lenient_upstream()
    async with proxied(upstream, scenario="F1") as h:
        await h.client.call_tool("create_booking", BOOK)
        answer = await h.raw_request(line, "u-1")
    assert answer["error"]["code"] == -32700
    assert upstream.executed == [("create_booking", BOOK)]
    assert h.judgement().report["coverage"]["refusedMessages"] == {"unreadable": 1}
    assert h.judgement().report["verdict"] == "PASS"


async def test_x10_a_second_request_with_an_id_in_flight_is_refused_and_the_first_is_judged():
    async with proxied(scenario="F4") as h:
        first = call(7, tool="hang_write", arguments={"item": "a"})
        await h.from_client.write_line(json.dumps(first).encode())
        with anyio.fail_after(10):
            await h.upstream.hanging.wait()
        second = await h.raw_request(
            json.dumps(call(7, tool="hang_write", arguments={"item": "a"})).encode(), 7
        )
        assert second["error"]["code"] == -32600 and "already used" in second["error"]["message"]
        h.upstream.release.set()
        answers = await h.to_client.wait_for(
            lambda m: isinstance(m, dict) and m.get("id") == 7 and "result" in m
        )
    assert answers["result"]["content"]
    # Ground truth: executed once; the report says once, and nothing went up twice.
    assert h.upstream.count("hang_write") == 1
    assert ops(h)[0]["executions"] == 1 and ops(h)[0]["attempts"] == 1
    assert h.judgement().report["coverage"]["refusedMessages"] == {"duplicate_id": 1}


async def test_x10_an_id_is_free_again_once_its_call_was_answered():
    async with proxied() as h:
        for _ in range(2):
            await h.raw_call("create_booking", BOOK, rpc_id="same")
    assert h.upstream.count("create_booking", BOOK) == 2
    assert ops(h)[0]["executions"] == 2
    assert h.judgement().report["coverage"]["refusedMessages"] == {}


async def test_x10_x7_a_deeply_nested_call_inside_a_batch_is_judged():
    deep = "[" * 3000 + '"x"' + "]" * 3000  # deeper than Python's parser goes
    upstream = lenient_upstream()
    async with proxied(upstream) as h:
        line = json.dumps([call("d", arguments={"guest": "Ann", "deep": "DEEP"})]).encode()
        line = line.replace(b'"DEEP"', deep.encode())
        await h.from_client.write_line(line)
        answers = await h.to_client.wait_for(lambda m: isinstance(m, list))
    assert answers[0]["id"] == "d"
    # This upstream cannot parse it either; whatever it did, the report agrees with it.
    assert ops(h)[0]["attempts"] == 1
    assert ops(h)[0]["executions"] == len(upstream.executed) == 0

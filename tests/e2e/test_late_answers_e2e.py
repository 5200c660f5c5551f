"""E5 through the installed proxy, against what the upstream really executed.

An answer that comes after --upstream-timeout is recorded and counts: the retry of a write
whose first attempt ran is a duplicate, not NOT_TESTED, and what the upstream goes on sending
for the call the agent was already told timed out is not forwarded. An answer the proxy could
not deliver (the agent's session DELETEd, its connection reset) is recorded as not delivered:
the re-booking that follows is a duplicate after no answer, never "after a success".
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from harness.events import read_jsonl
from tests.support.listenkit import (
    DEADLINE_S,
    call_body,
    flood_upstream,
    handshake,
    open_session,
    post,
    proxy_process,
    report_of,
    serving,
    session_headers,
    stdio_opening,
    truth_rows,
    until,
)

pytestmark = pytest.mark.anyio

BOOK = {"guest": "Ann", "date": "2026-12-01"}


def events(tmp_path: Path) -> list[Any]:
    path = tmp_path / "report.json.events.jsonl"
    return list(read_jsonl(path)) if path.exists() else []


async def test_e5_late_answers_after_the_timeout_count_and_their_stream_is_not_forwarded(
    tmp_path, agent_harness_bin
):  # E5 X5 J1
    truth, report = tmp_path / "truth.jsonl", tmp_path / "report.json"
    argv = [str(agent_harness_bin), "proxy", *flood_upstream(truth, "--slow-ms", "1500"),
            "--upstream-timeout", "0.5", "--report-file", str(report),
            "--audit-tools", "off"]  # fmt: skip
    async with proxy_process(
        argv, listen=False, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    ) as proxy:
        assert proxy.proc.stdin is not None and proxy.proc.stdout is not None
        received: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            proxy.proc.stdin.write(json.dumps(message).encode() + b"\n")  # type: ignore[union-attr]
            await proxy.proc.stdin.drain()  # type: ignore[union-attr]

        async def answer_to(rpc_id: int) -> dict[str, Any]:
            while True:
                raw = await asyncio.wait_for(proxy.proc.stdout.readline(), DEADLINE_S)  # type: ignore[union-attr]
                assert raw, proxy.stderr
                received.append(json.loads(raw))
                if received[-1].get("id") == rpc_id:
                    return received[-1]

        await send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}})  # fmt: skip
        await answer_to(1)
        await send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for rpc_id in (2, 3):  # the write times out; the agent retries it; that times out too
            await send(call_body(rpc_id, "slow_book", BOOK, progressToken=f"p{rpc_id}"))
            answer = await answer_to(rpc_id)
            assert answer["result"]["isError"] is True and "did not answer" in json.dumps(answer)
            after = len(received)
            # both really ran: their late answers are recorded
            await until(lambda n=rpc_id - 1: len(truth_rows(truth, "slow_book")) == n, "a run")
        await until(
            lambda: sum(1 for e in events(tmp_path) if getattr(e, "late", False)) == 2,
            "both late answers recorded",
        )
        await send({"jsonrpc": "2.0", "id": 9, "method": "ping"})
        await answer_to(9)  # everything the proxy sent before this answer is in `received`
        progress_after = [
            m for m in received[after:] if m.get("method") == "notifications/progress"
        ]
        assert progress_after == []  # nothing of a call already answered with a timeout
        proxy.proc.stdin.close()
        assert await asyncio.wait_for(proxy.proc.wait(), DEADLINE_S) == 0
    assert len(truth_rows(truth, "slow_book")) == 2  # ground truth: it ran twice
    final = report_of(report)
    (op,) = final["report"]["operations"]
    assert (op["outcome"], op["executions"], op["lateAnswers"]) == ("DUPLICATE", 2, 2)
    assert final["report"]["verdict"] == "FAIL"  # not NOT_TESTED: the proxy held the proof
    assert final["report"]["violations"][0]["duplicate"]["afterTimeout"] is True
    assert [p["id"] for p in final["patches"]] == ["GHOST_WRITE"]
    said = [line for line in proxy.lines if "goes on sending messages" in line]
    assert len(said) == 2  # one line per call, however many messages
    assert "Traceback" not in proxy.stderr


async def _rebook_after(tmp_path: Path, url: str, http: aiohttp.ClientSession) -> None:
    """The agent opens a new session and books again, once the first attempt's answer is on
    record as not delivered."""
    await until(
        lambda: any(e.type == "answer_undelivered" for e in events(tmp_path)),
        "the lost answer on record",
    )
    sid = await open_session(http, url)
    status, answer = await post(http, url, call_body(5, "slow_book", BOOK), session_headers(sid))
    assert status == 200 and answer[-1]["result"]["content"][0]["text"] == json.dumps(BOOK)


def listening(bin_path: Path, tmp_path: Path) -> list[str]:
    """The proxy over HTTP in front of the flood upstream, whose slow_book takes a second."""
    return [str(bin_path), "proxy", *flood_upstream(tmp_path / "truth.jsonl", "--slow-ms", "1000"),
            "--listen", "127.0.0.1:0", "--report-file", str(tmp_path / "report.json"),
            "--audit-tools", "off"]  # fmt: skip


def _judged_after_no_answer(tmp_path: Path) -> None:
    truth = tmp_path / "truth.jsonl"
    assert len(truth_rows(truth, "slow_book")) == 2  # ground truth: booked twice
    final = report_of(tmp_path / "report.json")
    (op,) = final["report"]["operations"]
    assert (op["outcome"], op["undeliveredAnswers"]) == ("DUPLICATE", 1)
    duplicate = final["report"]["violations"][0]["duplicate"]
    assert duplicate["afterTimeout"] is True and duplicate["parallel"] is False
    assert [p["id"] for p in final["patches"]] == ["GHOST_WRITE"]  # not IDEMPOTENCY
    (lost,) = [e for e in events(tmp_path) if e.type == "answer_undelivered"]
    sent = [e.seq for e in events(tmp_path) if e.type == "answer_sent"]
    assert lost.seq == sent[0]


async def test_e5_a_session_deleted_while_its_write_runs_records_the_answer_as_not_delivered(
    tmp_path, agent_harness_bin
):  # E5 H1
    argv = listening(agent_harness_bin, tmp_path)
    async with proxy_process(argv) as proxy, aiohttp.ClientSession() as http:
        sid = await open_session(http, proxy.url)
        call = asyncio.create_task(
            post(http, proxy.url, call_body(2, "slow_book", BOOK), session_headers(sid))
        )
        await until(lambda: bool(truth_rows(tmp_path / "truth.jsonl")), "the write upstream")
        async with http.delete(proxy.url, headers=session_headers(sid)) as resp:
            assert resp.status == 200
        status, _ = await asyncio.wait_for(call, DEADLINE_S)
        assert status == 503  # the agent got no answer
        await _rebook_after(tmp_path, proxy.url, http)
        assert await proxy.stop() == 0
    _judged_after_no_answer(tmp_path)
    assert "Traceback" not in proxy.stderr


async def test_e5_a_connection_reset_while_the_write_runs_records_the_answer_as_not_delivered(
    tmp_path, agent_harness_bin
):  # E5 H1
    argv = listening(agent_harness_bin, tmp_path)
    async with proxy_process(argv) as proxy, aiohttp.ClientSession() as http:
        sid = await open_session(http, proxy.url, "2025-06-18")  # a stream that cannot resume
        body = json.dumps(call_body(2, "slow_book", BOOK)).encode()
        host, port = proxy.url.split("/")[2].split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        head = "".join(f"{k}: {v}\r\n" for k, v in session_headers(sid, "2025-06-18").items())
        writer.write(f"POST /mcp HTTP/1.1\r\nHost: {host}\r\n{head}Content-Length: {len(body)}"
                     "\r\n\r\n".encode() + body)  # fmt: skip
        await writer.drain()
        await until(lambda: bool(truth_rows(tmp_path / "truth.jsonl")), "the write upstream")
        writer.transport.abort()  # connection reset while the write runs
        await _rebook_after(tmp_path, proxy.url, http)
        assert await proxy.stop() == 0
    _judged_after_no_answer(tmp_path)
    assert "Traceback" not in proxy.stderr


class Chatty:
    """An HTTP upstream whose tools/call streams a message every 10 ms or slower for 1.5 s and
    at least 120 messages, then its result (it ran: `ran` is set when the call arrives)."""

    def __init__(self) -> None:
        self.ran = 0
        self.sent = 0

    async def mcp(self, request: web.Request) -> web.StreamResponse:
        message = await request.json()
        known = handshake(message, [{"name": "book", "inputSchema": {"type": "object"},
                                     "annotations": {"readOnlyHint": False}}], "chatty")  # fmt: skip
        if known is not None:
            return known
        if message.get("method") != "tools/call":
            return web.json_response({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        self.ran += 1
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        loop = asyncio.get_running_loop()
        end = loop.time() + 1.5
        while loop.time() < end or self.sent < 120:  # at least 70 after a 0.5 s timeout
            note = {"jsonrpc": "2.0", "method": "notifications/message",
                    "params": {"level": "info", "data": f"still working {self.sent}"}}  # fmt: skip
            await response.write(b"event: message\ndata: " + json.dumps(note).encode() + b"\n\n")
            self.sent += 1
            await asyncio.sleep(0.01)  # the upstream's own pace, not a synchronisation
        result = {"content": [{"type": "text", "text": "booked"}]}
        answer = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        await response.write(b"event: message\ndata: " + json.dumps(answer).encode() + b"\n\n")
        await response.write_eof()
        return response


async def test_e5_an_http_upstreams_stream_for_a_timed_out_call_is_not_forwarded(
    tmp_path, agent_harness_bin
):  # E5 X5
    chatty = Chatty()
    app = web.Application()
    app.router.add_post("/mcp", chatty.mcp)
    async with serving(app) as base:
        argv = [str(agent_harness_bin), "proxy", "--upstream-url", f"{base}/mcp",
                "--upstream-timeout", "0.5", "--report-file", str(tmp_path / "report.json"),
                "--audit-tools", "off"]  # fmt: skip
        async with proxy_process(
            argv, listen=False, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        ) as proxy:
            assert proxy.proc.stdin is not None and proxy.proc.stdout is not None
            lines = [*stdio_opening(), call_body(2, "book", BOOK)]
            proxy.proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in lines))
            await proxy.proc.stdin.drain()
            received: list[dict[str, Any]] = []
            while not received or received[-1].get("id") != 2:
                raw = await asyncio.wait_for(proxy.proc.stdout.readline(), DEADLINE_S)
                assert raw, proxy.stderr
                received.append(json.loads(raw))
            assert received[-1]["result"]["isError"] is True  # the proxy's own timeout
            after = len(received)
            await until(
                lambda: any(getattr(e, "late", False) for e in events(tmp_path)),
                "the late answer recorded",
            )
            proxy.proc.stdin.write(b'{"jsonrpc":"2.0","id":9,"method":"ping"}\n')
            await proxy.proc.stdin.drain()
            while received[-1].get("id") != 9:
                raw = await asyncio.wait_for(proxy.proc.stdout.readline(), DEADLINE_S)
                received.append(json.loads(raw))
            forwarded = [m for m in received[after:] if m.get("method")]
            assert forwarded == []  # about 100 messages came after the timeout; none reached it
            assert chatty.sent - sum(1 for m in received if m.get("method")) > 50
            proxy.proc.stdin.close()
            assert await asyncio.wait_for(proxy.proc.wait(), DEADLINE_S) == 0
    final = report_of(tmp_path / "report.json")
    (op,) = final["report"]["operations"]
    assert chatty.ran == 1 and (op["executions"], op["lateAnswers"]) == (1, 1)
    assert sum(1 for line in proxy.lines if "goes on sending messages" in line) == 1

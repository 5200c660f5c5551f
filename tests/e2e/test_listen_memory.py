"""V11: the proxy's memory per session is bounded whatever its peers' reading speed.

Each test pushes 250 MB through a real proxy process and states a ceiling for how much its peak
resident set size (VmHWM from /proc) grew over the flood: an HTTP agent that never reads its
stream, a flooding HTTP upstream behind a stdio agent that does not read, and an agent that
reads a long resumable stream (events it already got are not all kept for a resume). The
proxy's own buffers are 4 MiB each (a stream's unread messages, its replay events, the
session's backlog, the messages read ahead from either side); the rest is the messages in hand.
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
    peak_rss_mb,
    proxy_process,
    serving,
    session_headers,
    stdio_opening,
    truth_rows,
    until,
)

pytestmark = pytest.mark.anyio

GROWTH_MB = 80  # the peak RSS may grow this much over the flood (unbounded: 250 MB and more)
COUNT, SIZE = 250, 1_000_000  # 250 messages of 1 MB each


def listening_argv(bin_path: Path, tmp_path: Path) -> list[str]:
    return [str(bin_path), "proxy", *flood_upstream(tmp_path / "truth.jsonl"),
            "--listen", "127.0.0.1:0", "--report-file", str(tmp_path / "report.json")]  # fmt: skip


def flood_request(url: str, sid: str, version: str) -> bytes:
    """A raw HTTP request for the flood tool, its progress on the call's own stream."""
    body = json.dumps(
        call_body(7, "flood", {"count": COUNT, "size": SIZE}, progressToken="flood-1")
    ).encode()
    host = url.split("/")[2]
    head = "".join(f"{k}: {v}\r\n" for k, v in session_headers(sid, version).items())
    return (f"POST /mcp HTTP/1.1\r\nHost: {host}\r\n{head}Content-Length: {len(body)}\r\n\r\n"
            ).encode() + body  # fmt: skip


async def test_v11_an_http_agent_that_never_reads_its_stream_keeps_memory_bounded(
    tmp_path, agent_harness_bin
):  # V11 E5
    truth = tmp_path / "truth.jsonl"
    async with proxy_process(listening_argv(agent_harness_bin, tmp_path)) as proxy:
        async with aiohttp.ClientSession() as http:
            sid = await open_session(http, proxy.url, "2025-06-18")
        before = peak_rss_mb(proxy.pid)
        host, port = proxy.url.split("/")[2].split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(flood_request(proxy.url, sid, "2025-06-18"))
        await writer.drain()  # and never a byte read
        await until(lambda: bool(truth_rows(truth, "flood")), "the upstream to send it all")
        grown = peak_rss_mb(proxy.pid) - before
        print(f"V11 peak RSS growth: {grown:.1f} MB")  # noqa: T201 (docs/performance.md)
        assert grown < GROWTH_MB, f"peak RSS grew {grown:.0f} MB"
        said = [line for line in proxy.lines if "did not read" in line]
        assert len(said) == 1, proxy.stderr  # closed, said once
        writer.close()
        assert await proxy.stop() == 0
    assert "Traceback" not in proxy.stderr
    # E5: the answer that could not reach the agent is recorded as not delivered
    log = list(read_jsonl(tmp_path / "report.json.events.jsonl"))
    undelivered = [e for e in log if e.type == "answer_undelivered"]
    assert len(undelivered) == 1 and "did not read" in undelivered[0].reason


async def test_v11_an_agent_reading_a_long_resumable_stream_keeps_memory_bounded(
    tmp_path, agent_harness_bin
):  # V11
    truth = tmp_path / "truth.jsonl"
    async with (
        proxy_process(listening_argv(agent_harness_bin, tmp_path)) as proxy,
        aiohttp.ClientSession() as http,
    ):
        sid = await open_session(http, proxy.url, "2025-11-25")  # events carry ids: resumable
        before = peak_rss_mb(proxy.pid)
        body = call_body(7, "flood", {"count": COUNT, "size": SIZE}, progressToken="flood-1")
        received = 0
        async with http.post(proxy.url, json=body, headers=session_headers(sid)) as resp:
            assert resp.headers["Content-Type"].startswith("text/event-stream")
            tail = b""
            async for chunk in resp.content.iter_any():
                received += len(chunk)
                tail = (tail + chunk)[-4096:]
        assert received > COUNT * SIZE and b"sent 250" in tail  # all of it, and the answer
        assert len(truth_rows(truth, "flood")) == 1
        grown = peak_rss_mb(proxy.pid) - before
        print(f"V11 peak RSS growth: {grown:.1f} MB")  # noqa: T201 (docs/performance.md)
        assert grown < GROWTH_MB, f"peak RSS grew {grown:.0f} MB"
        assert await proxy.stop() == 0


# -- a flooding HTTP upstream behind a stdio agent ----------------------------------------------


class Flood:
    """An HTTP upstream whose tools/call streams COUNT events of SIZE bytes, then answers;
    `stalled` is set when one write waited long (the proxy is not taking more)."""

    def __init__(self) -> None:
        self.stalled = asyncio.Event()
        self.finished = asyncio.Event()
        self.sent = 0

    async def mcp(self, request: web.Request) -> web.StreamResponse:
        message = await request.json()
        tools = [{"name": "flood", "inputSchema": {"type": "object"},
                  "annotations": {"readOnlyHint": True}}]  # fmt: skip
        known = handshake(message, tools, "flood")
        if known is not None:
            return known
        rpc_id = message["id"]
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        note = json.dumps(
            {"jsonrpc": "2.0", "method": "notifications/message",
             "params": {"level": "info", "data": "x" * SIZE}}
        ).encode()  # fmt: skip
        for _ in range(COUNT):
            write = asyncio.ensure_future(
                response.write(b"event: message\ndata: " + note + b"\n\n")
            )
            done, _ = await asyncio.wait({write}, timeout=0.5)
            if not done:
                self.stalled.set()  # a trigger for the test, never a measurement
            await write
            self.sent += 1
        result = {"content": [{"type": "text", "text": f"sent {COUNT}"}]}
        answer = json.dumps({"jsonrpc": "2.0", "id": rpc_id, "result": result}).encode()
        await response.write(b"event: message\ndata: " + answer + b"\n\n")
        self.finished.set()
        await response.write_eof()
        return response


async def test_v11_a_flooding_http_upstream_behind_a_stdio_agent_that_does_not_read(
    tmp_path, agent_harness_bin
):  # V11
    flood = Flood()
    app = web.Application()
    app.router.add_post("/mcp", flood.mcp)
    async with serving(app) as base:
        url = f"{base}/mcp"
        argv = [str(agent_harness_bin), "proxy", "--upstream-url", url, "--audit-tools", "off"]
        async with proxy_process(
            argv, listen=False, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        ) as proxy:
            assert proxy.proc.stdin is not None and proxy.proc.stdout is not None
            lines = [*stdio_opening(), call_body(2, "flood", {})]
            proxy.proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in lines[:2]))
            await proxy.proc.stdin.drain()
            raw = await asyncio.wait_for(proxy.proc.stdout.readline(), DEADLINE_S)
            assert json.loads(raw)["id"] == 1
            before = peak_rss_mb(proxy.pid)
            proxy.proc.stdin.write(json.dumps(lines[2]).encode() + b"\n")
            await proxy.proc.stdin.drain()
            # The agent reads nothing until the upstream can send no more (or sent it all).
            waits = {asyncio.ensure_future(e.wait()) for e in (flood.stalled, flood.finished)}
            await asyncio.wait(waits, timeout=DEADLINE_S, return_when=asyncio.FIRST_COMPLETED)
            for waiting in waits:
                waiting.cancel()
            assert flood.stalled.is_set() or flood.finished.is_set()
            grown = peak_rss_mb(proxy.pid) - before
            assert grown < GROWTH_MB, f"peak RSS grew {grown:.0f} MB ({flood.sent} sent)"
            assert flood.sent < COUNT  # the upstream was held back, not read into memory
            answer: dict[str, Any] = {}
            while answer.get("id") != 2:  # now the agent reads everything
                raw = await asyncio.wait_for(proxy.proc.stdout.readline(), DEADLINE_S)
                assert raw, proxy.stderr
                answer = json.loads(raw)
            assert answer["result"]["content"][0]["text"] == f"sent {COUNT}"
            grown = peak_rss_mb(proxy.pid) - before
            print(f"V11 peak RSS growth: {grown:.1f} MB")  # noqa: T201 (docs/performance.md)
            assert grown < GROWTH_MB, f"peak RSS grew {grown:.0f} MB"
            proxy.proc.stdin.close()
            assert await asyncio.wait_for(proxy.proc.wait(), DEADLINE_S) == 0
    assert "Traceback" not in proxy.stderr

"""V10: the listener's bounds, against the real proxy process and its real child processes.

Sessions (each holds an upstream process) are capped and expire when idle; connections are
capped, timed out while sending a request's head or body, and answered 503 when the proxy is
short of file descriptors, with one stderr line per condition however many connections meet
it. The upstream is the flood upstream (a cheap process that records what it executed).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import socket
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.listenkit import (
    ACCEPT,
    call_body,
    flood_upstream,
    init_body,
    open_session,
    post,
    proxy_process,
    session_headers,
    truth_rows,
    until,
    upstreams,
)

pytestmark = pytest.mark.anyio


def proxy_argv(bin_path: Path, tmp_path: Path, *flags: str) -> list[str]:
    return [str(bin_path), "proxy", *flood_upstream(tmp_path / "truth.jsonl"),
            "--listen", "127.0.0.1:0", "--report-file", str(tmp_path / "report.json"),
            *flags]  # fmt: skip


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


async def raw_exchange(port: int, request: bytes) -> bytes:
    """Send `request` on a new connection; everything the proxy answers until it closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 30)
    except ConnectionResetError:
        return b""
    finally:
        writer.close()


async def test_v10_sixty_clients_initialising_leave_at_most_the_cap_of_upstream_processes(
    tmp_path, agent_harness_bin
):  # V10
    cap = 5
    argv = proxy_argv(agent_harness_bin, tmp_path, "--max-sessions", str(cap))
    async with proxy_process(argv) as proxy, aiohttp.ClientSession() as http:

        async def initialize(n: int) -> tuple[int, dict[str, Any]]:
            async with http.post(proxy.url, json=init_body(n), headers=ACCEPT) as resp:
                text = await resp.text()
                body = (
                    json.loads(text)
                    if resp.headers.get("Content-Type", "").startswith("application/json")
                    else {}
                )
                return resp.status, {**body, "sid": resp.headers.get("Mcp-Session-Id")}

        results = await asyncio.gather(*(initialize(n) for n in range(60)))
        assert upstreams(proxy.pid) <= cap  # counted among the proxy's real child processes
        statuses = sorted(status for status, _ in results)
        assert statuses.count(200) == cap and statuses.count(503) == 60 - cap
        refused = [body for status, body in results if status == 503]
        assert all("too many sessions" in body["error"]["message"] for body in refused)
        assert all(body["id"] is not None for body in refused)  # the initialize's own id
        said = [line for line in proxy.lines if "session cap is reached" in line]
        assert len(said) == 1  # one line for the condition, not one per refused client
        # A session that ends makes room: the next one is accepted, and the proxy says so.
        sid = next(body["sid"] for status, body in results if status == 200)
        async with http.delete(proxy.url, headers=session_headers(sid)) as resp:
            assert resp.status == 200
        await until(lambda: upstreams(proxy.pid) < cap, "the ended session's upstream to stop")
        status, _ = await initialize(99)
        assert status == 200
        assert upstreams(proxy.pid) <= cap
        assert any(
            "new sessions are accepted again (55 refused meanwhile)" in x for x in proxy.lines
        )
        assert await proxy.stop() == 0
    assert "Traceback" not in proxy.stderr


async def test_v10_an_idle_session_expires_and_its_upstream_process_is_gone(
    tmp_path, agent_harness_bin
):  # V10
    argv = proxy_argv(agent_harness_bin, tmp_path, "--session-idle-timeout", "1")
    async with proxy_process(argv) as proxy, aiohttp.ClientSession() as http:
        idle = await open_session(http, proxy.url)
        assert upstreams(proxy.pid) == 1
        await until(lambda: upstreams(proxy.pid) == 0, "the idle session's upstream to stop")
        status, answer = await post(
            http, proxy.url, call_body(2, "book", {"guest": "Ann"}), session_headers(idle)
        )
        assert status == 404 and answer[0]["error"]["message"] == "Session not found"
        # The proxy says so once its upstreams have stopped (listen.py's _expire_idle), which may
        # come after the session is gone and its 404 answered: waited for, bounded.
        await until(
            lambda: any("ended 1 idle session" in line for line in proxy.lines),
            "the proxy's line about the idle session it ended",
        )
        # A session in use does not expire while its call runs (slow_book: 1 s upstream).
        busy = await open_session(http, proxy.url)
        status, answer = await post(
            http, proxy.url, call_body(3, "slow_book", {"guest": "Bob"}), session_headers(busy)
        )
        assert status == 200 and answer[-1]["result"]["content"][0]["text"] == '{"guest": "Bob"}'
        assert await proxy.stop() == 0
    assert [r["arguments"] for r in truth_rows(tmp_path / "truth.jsonl")] == [{"guest": "Bob"}]


async def test_v10_slow_heads_slow_bodies_and_silent_connections_are_closed(
    tmp_path, agent_harness_bin
):  # V10
    argv = proxy_argv(agent_harness_bin, tmp_path, "--http-header-timeout", "1",
                      "--http-body-timeout", "1", "--http-idle-timeout", "2")  # fmt: skip
    async with proxy_process(argv) as proxy:
        port = port_of(proxy.url)
        # slowloris: a request head begun and never finished; the proxy closes the connection
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        await writer.drain()
        closed = asyncio.create_task(reader.read())
        with contextlib.suppress(ConnectionError):
            while not closed.done():  # one byte of header now and then, never the end
                writer.write(b"a")
                await writer.drain()
                await asyncio.wait({closed}, timeout=0.3)
        assert await asyncio.wait_for(closed, 30) == b""  # closed, no answer
        writer.close()
        # a body that never comes whole: 408
        head = (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{")  # fmt: skip
        answer = await raw_exchange(port, head)
        assert answer.startswith(b"HTTP/1.1 408"), answer
        # a connection that says nothing at all
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await asyncio.wait_for(reader.read(), 30) == b""
        writer.close()
        said = "\n".join(proxy.lines)
        assert said.count("did not send a request's head") == 1
        assert said.count("request body did not arrive") == 1
        assert await proxy.stop() == 0
    assert "Traceback" not in proxy.stderr


def _low_descriptor_limit() -> None:
    """In the proxy's process, before it starts: at most 128 open file descriptors."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (128, hard))


@pytest.mark.parametrize("cap", ["20", "1000"], ids=["connection-cap", "descriptor-limit"])
async def test_v10_a_flood_of_connections_gets_503_with_bounded_stderr_and_a_write_gets_through(
    tmp_path, agent_harness_bin, cap
):  # V10
    argv = proxy_argv(agent_harness_bin, tmp_path, "--max-connections", cap,
                      "--http-idle-timeout", "120", "--http-header-timeout", "120")  # fmt: skip
    async with (
        proxy_process(argv, preexec_fn=_low_descriptor_limit) as proxy,
        aiohttp.ClientSession() as http,
    ):
        sid = await open_session(http, proxy.url)  # a real agent, before the flood
        port = port_of(proxy.url)
        flood: list[socket.socket] = []
        answers: list[bytes] = []
        for _ in range(300):  # held open, sending nothing
            sock = socket.create_connection(("127.0.0.1", port))
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}")
            flood.append(sock)
        loop = asyncio.get_running_loop()
        for sock in flood:
            sock.setblocking(False)
        # what each got: nothing (held), or a 503; read side by side until 150 were refused
        reads = [asyncio.ensure_future(loop.sock_recv(sock, 4096)) for sock in flood]
        try:
            for done in asyncio.as_completed(reads, timeout=60):  # a bound, not a wait
                with contextlib.suppress(ConnectionError):
                    answers.append(await done)
                if sum(1 for a in answers if a.startswith(b"HTTP/1.1 503")) >= 150:
                    break
        finally:
            for read in reads:
                read.cancel()
            await asyncio.gather(*reads, return_exceptions=True)
        refused = [a for a in answers if a.startswith(b"HTTP/1.1 503")]
        assert len(refused) >= 150, [a[:40] for a in answers[:5]]
        assert all(b'"jsonrpc": "2.0"' in a and b"Service Unavailable" in a for a in refused)
        # the agent's write while the flood holds every slot: refused, or through; never lost
        first = await _try_book(http, proxy.url, sid, 10, "Ann")
        for sock in flood:  # capacity frees
            sock.close()
        booked = first or await _retry_book(http, proxy.url, sid)
        assert booked
        assert await proxy.stop() == 0
    assert [r["arguments"] for r in truth_rows(tmp_path / "truth.jsonl", "book")] == [
        {"guest": "Ann"}
    ]  # ground truth: the one write ran once
    assert proxy.stderr_bytes < 2000, proxy.stderr  # one line per condition, not per event
    condition = "connection cap is reached" if cap == "20" else "out of file descriptors"
    assert sum(1 for line in proxy.lines if condition in line) == 1, proxy.stderr
    assert "Traceback" not in proxy.stderr


async def _try_book(
    http: aiohttp.ClientSession, url: str, sid: str, rpc_id: int, guest: str
) -> bool:
    """One write; True when it was answered (not refused for capacity)."""
    try:
        status, answer = await post(
            http, url, call_body(rpc_id, "book", {"guest": guest}), session_headers(sid)
        )
    except aiohttp.ClientError:
        return False
    return status == 200 and answer[-1]["result"]["content"][0]["text"] == json.dumps(
        {"guest": guest}
    )


async def _retry_book(http: aiohttp.ClientSession, url: str, sid: str) -> bool:
    """The agent tries again (a new connection each time) until the proxy takes it."""
    for attempt in range(100):
        connector = aiohttp.TCPConnector(force_close=True)
        async with aiohttp.ClientSession(connector=connector) as fresh:
            if await _try_book(fresh, url, sid, 11 + attempt, "Ann"):
                return True
        await asyncio.sleep(0.1)
    return False

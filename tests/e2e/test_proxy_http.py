"""The installed proxy over streamable HTTP (H1): agent side, upstream side, and both.

Real processes only: the SDK's client as the agent (over HTTP to `proxy --listen`, or over
stdio), the counting server as the upstream (over the SDK's streamable HTTP transport, or over
stdio). The counting server appends a line per call it REALLY executed; every verdict is checked
against that file.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
from mcp.shared.exceptions import MCPError

from tests.support.httpkit import (
    ACCEPT,
    DEADLINE_S,
    Running,
    counting_server_argv,
    counting_stdio_args,
    counting_upstream,
    executions,
    mcp_client,
    running,
)
from tests.support.proxyproc import BOOK

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

PAIRS = ["http-stdio", "stdio-http", "http-http"]  # agent side - upstream side
SECRET = "tok-7c1e0a5d9b"


@dataclass
class Proxied:
    """A proxy in front of the counting server, and an agent's session through it."""

    client: Any
    truth: Path
    report: Path
    proxy: Running | None  # None: the agent speaks stdio (the proxy is its child)
    upstream: Running | None

    def read_report(self) -> dict[str, Any]:
        return json.loads(self.report.read_text())


@contextlib.asynccontextmanager
async def proxied(
    pair: str, tmp_path: Path, bin_path: Path, *flags: str, modern: bool = False,
    upstream_flags: tuple[str, ...] = (), env: dict[str, str] | None = None,
) -> AsyncIterator[Proxied]:  # fmt: skip
    agent, upstream_kind = pair.split("-")
    truth, report = tmp_path / "truth.jsonl", tmp_path / "report.json"
    async with contextlib.AsyncExitStack() as stack:
        up, upstream = await counting_upstream(stack, upstream_kind, truth, *upstream_flags)
        argv = [str(bin_path), "proxy", *up, "--report-file", str(report),
                "--audit-tools", "off", *flags]  # fmt: skip
        proxy: Running | None = None
        if agent == "http":
            proxy = await stack.enter_async_context(
                running([*argv, "--listen", "127.0.0.1:0"], env=env)
            )
            client = await stack.enter_async_context(mcp_client(url=proxy.url, modern=modern))
        else:
            client = await stack.enter_async_context(mcp_client(argv=argv, modern=modern))
        yield Proxied(client, truth, report, proxy, upstream)


async def finished_report(p: Proxied) -> dict[str, Any]:
    """The final report: an HTTP proxy ends on SIGTERM, a stdio one at the agent's EOF."""
    if p.proxy is not None:
        assert await p.proxy.stop(signal.SIGTERM) == 0
    with anyio.fail_after(DEADLINE_S):
        while (report := p.read_report()).get("status") != "finished":
            await anyio.sleep(0.05)  # the stdio proxy writes it as it exits; poll the file
    return report


@pytest.mark.parametrize("pair", PAIRS)
async def test_h1_f1_ghost_then_blind_retry_is_a_duplicate_on_every_transport_pair(
    pair, tmp_path, agent_harness_bin
):  # H1 S2 J1
    async with proxied(pair, tmp_path, agent_harness_bin, "--scenario", "F1") as p:
        first = await p.client.call_tool("create_booking", BOOK)
        assert first.is_error and "timed out" in first.content[0].text
        second = await p.client.call_tool("create_booking", BOOK)
        assert not second.is_error
    assert len(executions(p.truth, "create_booking")) == 2  # ground truth: booked twice
    report = await finished_report(p)
    assert report["verdict"] == "FAIL"
    assert [v["code"] for v in report["report"]["violations"]] == ["DUPLICATE_EXECUTION"]


@pytest.mark.parametrize("pair", PAIRS)
async def test_h1_f1_ghost_then_a_check_passes_on_every_transport_pair(
    pair, tmp_path, agent_harness_bin
):  # H1 S2 J2
    async with proxied(pair, tmp_path, agent_harness_bin, "--scenario", "F1") as p:
        assert (await p.client.call_tool("create_booking", BOOK)).is_error
        found = await p.client.call_tool("search_bookings", BOOK)
        assert "BK-" in found.content[0].text  # the ghost write is really there
    assert len(executions(p.truth, "create_booking")) == 1
    report = await finished_report(p)
    assert report["verdict"] == "PASS"
    assert "VERIFIED_NO_RETRY" in {o["code"] for o in report["report"]["observations"]}


@pytest.mark.parametrize("pair", PAIRS)
async def test_x9_h1_notifications_resources_and_prompts_pass_through_http(
    pair, tmp_path, agent_harness_bin
):  # X9 H1
    logs: list[Any] = []

    async def on_log(params: Any) -> None:
        logs.append(params)

    async with proxied(pair, tmp_path, agent_harness_bin) as p:
        p.client._logging_callback = on_log  # noqa: SLF001 - the SDK takes it at construction
        synced = await p.client.call_tool("sync_ledger", {})
        assert not synced.is_error
        resource = await p.client.read_resource("counting://executions")
        assert "sync_ledger" in resource.contents[0].text
        prompt = await p.client.get_prompt("booking_request", {"guest": "Bea"})
        assert "Bea" in prompt.messages[0].content.text
    assert len(executions(p.truth, "sync_ledger")) == 1


@pytest.mark.parametrize("pair", PAIRS)
async def test_h1_x11_2026_07_28_f1_ghost_then_retry_is_a_duplicate_on_every_transport_pair(
    pair, tmp_path, agent_harness_bin
):  # H1 X11 S2 J1: no initialize, no session, _meta on every request
    async with proxied(pair, tmp_path, agent_harness_bin, "--scenario", "F1", modern=True) as p:
        assert p.client.protocol_version == "2026-07-28"
        assert (await p.client.call_tool("create_booking", BOOK)).is_error
        assert not (await p.client.call_tool("create_booking", BOOK)).is_error
    assert len(executions(p.truth, "create_booking")) == 2
    report = await finished_report(p)
    assert report["verdict"] == "FAIL"
    assert "DUPLICATE_EXECUTION" in {v["code"] for v in report["report"]["violations"]}


@pytest.mark.parametrize("pair", ["http-stdio", "http-http"])
async def test_h1_x11_a_2026_07_28_client_without_session_reaches_the_upstream(
    pair, tmp_path, agent_harness_bin
):  # H1 X11
    async with proxied(pair, tmp_path, agent_harness_bin, modern=True) as p:
        assert p.client.protocol_version == "2026-07-28"
        tools = await p.client.list_tools()
        assert "create_booking" in {t.name for t in tools.tools}
        booked = await p.client.call_tool("create_booking", BOOK)
        assert not booked.is_error and "BK-" in booked.content[0].text
    assert len(executions(p.truth, "create_booking")) == 1


async def test_h1_stdio_agent_reaches_a_2026_07_28_http_upstream(tmp_path, agent_harness_bin):
    # H1 X11: the SDK client on stdio speaks 2026-07-28 (server/discover, _meta); the proxy
    # mirrors each request's version, method and name into the upstream POST's headers.
    async with proxied("stdio-http", tmp_path, agent_harness_bin, modern=True) as p:
        booked = await p.client.call_tool("create_booking", BOOK)
        assert not booked.is_error
    assert len(executions(p.truth, "create_booking")) == 1


# -- sessions, origins, headers, start-up --------------------------------------------------------

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "raw", "version": "1"}}}  # fmt: skip


@contextlib.asynccontextmanager
async def listening(tmp_path: Path, bin_path: Path, *flags: str) -> AsyncIterator[Running]:
    truth = tmp_path / "truth.jsonl"
    argv = [str(bin_path), "proxy", *counting_stdio_args(truth), "--listen", "127.0.0.1:0", *flags]
    async with running(argv) as proxy:
        yield proxy


async def test_h1_a_session_is_named_by_its_id_and_ends_with_delete(tmp_path, agent_harness_bin):
    # H1: initialize opens a session (Mcp-Session-Id); a request without it is refused (400),
    # one with an unknown id gets 404, DELETE ends it and its id is unknown from then on.
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    async with listening(tmp_path, agent_harness_bin) as proxy, aiohttp.ClientSession() as http:
        async with http.post(proxy.url, json=INIT, headers=ACCEPT) as resp:
            assert resp.status == 200
            sid = resp.headers["Mcp-Session-Id"]
            assert '"protocolVersion":"2025-06-18"' in (await resp.text()).replace(" ", "")
        async with http.post(proxy.url, json=call, headers=ACCEPT) as resp:
            assert resp.status == 400
        async with http.post(proxy.url, json=call, headers={**ACCEPT, "Mcp-Session-Id": "nope"}) as resp:
            assert resp.status == 404
        session = {**ACCEPT, "Mcp-Session-Id": sid}
        async with http.post(proxy.url, json=call, headers=session) as resp:
            assert resp.status == 200 and "create_booking" in await resp.text()
        async with http.delete(proxy.url, headers=session) as resp:
            assert resp.status == 200
        async with http.post(proxy.url, json=call, headers=session) as resp:
            assert resp.status == 404


async def test_h1_a_foreign_origin_is_refused_and_an_allowed_one_accepted(
    tmp_path, agent_harness_bin
):  # H1 (DNS rebinding)
    allowed = "https://app.example"
    async with listening(tmp_path, agent_harness_bin, "--allowed-origin", allowed) as proxy:
        async with aiohttp.ClientSession() as http:
            for origin, status in (("https://evil.example", 403), (allowed, 200),
                                   ("http://localhost:3000", 200)):  # fmt: skip
                async with http.post(proxy.url, json=INIT, headers={**ACCEPT, "Origin": origin}) as resp:
                    assert resp.status == status, origin
            host = proxy.url.replace("127.0.0.1", "localhost")
            async with http.post(host, json=INIT, headers={**ACCEPT, "Host": "evil.example"}) as resp:
                assert resp.status == 403


async def test_h1_auth_header_from_the_environment_reaches_the_upstream_and_is_never_printed(
    tmp_path, agent_harness_bin
):  # H1 V3
    truth, report = tmp_path / "truth.jsonl", tmp_path / "report.json"
    need = ["--require-header", f"Authorization:Bearer {SECRET}"]
    async with running(counting_server_argv(truth, *need)) as upstream:
        argv = [str(agent_harness_bin), "proxy", "--upstream-url", upstream.url,
                "--upstream-header-env", "Authorization=HARNESS_TEST_TOKEN",
                "--report-file", str(report), "--listen", "127.0.0.1:0"]  # fmt: skip
        env = {**os.environ, "HARNESS_TEST_TOKEN": f"Bearer {SECRET}"}
        async with running(argv, env=env) as proxy:
            async with mcp_client(url=proxy.url) as client:
                assert not (await client.call_tool("create_booking", BOOK)).is_error
            assert await proxy.stop() == 0
        unauthorised = [str(agent_harness_bin), "proxy", "--upstream-url", upstream.url,
                        "--listen", "127.0.0.1:0"]  # fmt: skip
        async with running(unauthorised) as bare:
            async with aiohttp.ClientSession() as http:
                async with http.post(bare.url, json=INIT, headers=ACCEPT) as resp:
                    assert resp.status == 401  # the upstream's refusal reaches the agent
    assert len(executions(truth, "create_booking")) == 1
    assert SECRET not in proxy.stderr and SECRET not in report.read_text()


async def test_x8_h1_an_unreachable_upstream_url_fails_at_start_with_one_line(
    tmp_path, agent_harness_bin
):  # X8 H1
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = [str(agent_harness_bin), "proxy", "--upstream-url", f"http://127.0.0.1:{port}/mcp",
            "--listen", "127.0.0.1:0"]  # fmt: skip
    async with running(argv, url=False) as proxy:
        with anyio.fail_after(DEADLINE_S):
            code = await proxy.proc.wait()
    assert code == 1
    errors = [line for line in proxy.lines if "ERROR" in line]
    assert len(errors) == 1 and "cannot reach upstream" in errors[0]
    assert "Traceback" not in proxy.stderr


async def test_h1_a_stdio_agent_gets_a_new_upstream_session_when_the_upstream_forgets_its_own(
    tmp_path, agent_harness_bin
):  # H1: the stdio agent cannot re-initialise; the proxy does it, and sends nothing twice
    truth = tmp_path / "truth.jsonl"
    # POSTs 1-3: initialize, initialized, the proxy's own tools/list; 4: the first booking.
    async with running(counting_server_argv(truth, "--forget-session-after", "4")) as upstream:
        argv = [str(agent_harness_bin), "proxy", "--upstream-url", upstream.url,
                "--audit-tools", "off"]  # fmt: skip
        async with mcp_client(argv=argv) as client:
            first = await client.call_tool("create_booking", BOOK)
            assert not first.is_error
            with pytest.raises(MCPError, match="Session"):  # met the 404: its error (X13),
                await client.call_tool("create_booking", {**BOOK, "guest": "Bob"})  # not re-sent
            again = await client.call_tool("create_booking", {**BOOK, "guest": "Cy"})
            assert not again.is_error  # a new upstream session
    guests = [row["arguments"]["guest"] for row in executions(truth, "create_booking")]
    assert guests == ["Ann", "Cy"]

"""Official clients and a third-party server through the proxy over streamable HTTP (H1, X11).

The agents are the official TypeScript clients (`@modelcontextprotocol/sdk` 1.32 for the 2025
revisions, `@modelcontextprotocol/client` 2.4 pinned to 2026-07-28: `server/discover`, `_meta`
on every request, no session), run by tests/e2e/thirdparty/ts-client.mjs. The upstream is the
counting server (its file of REALLY executed calls is the ground truth) or npm's
server-everything in its streamable HTTP mode, compared with a direct session.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import socket
from typing import Any

import anyio
import pytest

from tests.support import launcher
from tests.support.httpkit import (
    DEADLINE_S,
    counting_server_argv,
    counting_upstream,
    executions,
    mcp_client,
    running,
)
from tests.support.prereq import NPM_INSTALL_HINT, THIRDPARTY_DIR, require
from tests.support.proxyproc import BOOK

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TS_CLIENT = THIRDPARTY_DIR / "ts-client.mjs"


@pytest.fixture
def node() -> str:
    path = shutil.which("node")
    require(path is not None, "node is not on PATH", "apt-get install -y nodejs")
    for package in ("sdk", "client", "server-everything"):
        require(
            (THIRDPARTY_DIR / "node_modules" / "@modelcontextprotocol" / package).is_dir(),
            f"npm package @modelcontextprotocol/{package} missing",
            NPM_INSTALL_HINT,
        )
    assert path is not None
    return path


def ts_agent(node: str, sdk: str, target: list[str], calls: list[dict[str, Any]]) -> dict:
    """Run the TypeScript client once: list the tools, make `calls`; what it saw."""
    modern = ["--modern"] if sdk == "v2" else []
    done = launcher.run(
        [node, str(TS_CLIENT), "--sdk", sdk, *modern, *target],
        input=json.dumps(calls), capture_output=True, text=True, timeout=DEADLINE_S, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    ("sdk", "upstream_kind", "version"),
    [("v1", "stdio", "2025-11-25"), ("v1", "http", "2025-11-25"),
     ("v2", "http", "2026-07-28"), ("v2", "stdio", "2026-07-28")],
)  # fmt: skip
async def test_h1_x11_official_typescript_client_over_http_through_the_proxy(
    sdk, upstream_kind, version, node, tmp_path, agent_harness_bin
):  # H1 X11
    truth = tmp_path / "truth.jsonl"
    async with contextlib.AsyncExitStack() as stack:
        up, _ = await counting_upstream(stack, upstream_kind, truth)
        argv = [str(agent_harness_bin), "proxy", *up, "--audit-tools", "off",
                "--listen", "127.0.0.1:0"]  # fmt: skip
        async with running(argv) as proxy:
            seen = await anyio.to_thread.run_sync(
                ts_agent, node, sdk, ["--url", proxy.url],
                [{"name": "create_booking", "arguments": BOOK}, {"name": "search_bookings",
                                                                 "arguments": BOOK}],
            )  # fmt: skip
    assert seen["protocolVersion"] == version
    assert "create_booking" in seen["tools"]
    booked, found = (call["result"] for call in seen["calls"])
    assert not booked["isError"] and "BK-" in booked["content"][0]["text"]
    assert "BK-" in found["content"][0]["text"]
    assert len(executions(truth, "create_booking")) == 1


async def test_h1_s2_typescript_client_gets_the_injected_timeout_and_its_retry_is_judged(
    node, tmp_path, agent_harness_bin
):  # H1 S2 J1
    truth, report = tmp_path / "truth.jsonl", tmp_path / "report.json"
    async with running(counting_server_argv(truth)) as upstream:
        argv = [str(agent_harness_bin), "proxy", "--upstream-url", upstream.url, "--scenario", "F1",
                "--audit-tools", "off", "--report-file", str(report), "--listen", "127.0.0.1:0"]  # fmt: skip
        async with running(argv) as proxy:
            call = {"name": "create_booking", "arguments": BOOK}
            seen = await anyio.to_thread.run_sync(
                ts_agent, node, "v1", ["--url", proxy.url], [call, call]
            )
            assert await proxy.stop() == 0
    ghost, retry = (c["result"] for c in seen["calls"])
    assert ghost["isError"] and "timed out" in ghost["content"][0]["text"]
    assert not retry["isError"]
    assert len(executions(truth, "create_booking")) == 2
    final = json.loads(report.read_text())
    assert final["verdict"] == "FAIL"
    assert "DUPLICATE_EXECUTION" in {v["code"] for v in final["report"]["violations"]}


async def test_h1_x11_typescript_client_on_stdio_reaches_an_http_upstream_in_2026_07_28(
    node, tmp_path, agent_harness_bin
):  # H1 X11
    truth = tmp_path / "truth.jsonl"
    async with running(counting_server_argv(truth)) as upstream:
        proxy = [str(agent_harness_bin), "proxy", "--upstream-url", upstream.url,
                 "--audit-tools", "off"]  # fmt: skip
        seen = await anyio.to_thread.run_sync(
            ts_agent, node, "v2", ["--stdio", *proxy],
            [{"name": "create_booking", "arguments": BOOK}],
        )  # fmt: skip
    assert seen["protocolVersion"] == "2026-07-28"
    assert not seen["calls"][0]["result"]["isError"]
    assert len(executions(truth, "create_booking")) == 1


# -- server-everything over HTTP ------------------------------------------------------------------

_EVERYTHING = re.compile(r"listening on port (\d+)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def session_view(client: Any) -> dict[str, Any]:
    """What an agent sees of server-everything: tools, a call, a sum, a resource, a prompt."""
    tools = await client.list_tools()
    echo = await client.call_tool("echo", {"message": "hello through HTTP"})
    total = await client.call_tool("get-sum", {"a": 2, "b": 40})
    resources = await client.list_resources()
    first = await client.read_resource(resources.resources[0].uri)
    prompts = await client.list_prompts()
    return {
        "tools": [t.model_dump(mode="json", exclude_none=True) for t in tools.tools],
        "echo": echo.model_dump(mode="json", exclude_none=True),
        "sum": total.model_dump(mode="json", exclude_none=True),
        "resource": first.model_dump(mode="json", exclude_none=True),
        "prompts": sorted(p.name for p in prompts.prompts),
    }


async def test_h1_x3_server_everything_over_http_looks_the_same_through_the_proxy(
    node, tmp_path, agent_harness_bin
):  # H1 X3 X9
    port = free_port()
    entry = THIRDPARTY_DIR / "node_modules" / "@modelcontextprotocol" / "server-everything"
    argv = [node, str(entry / "dist" / "index.js"), "streamableHttp"]
    env = {**os.environ, "PORT": str(port)}
    merged = {"stdout": asyncio.subprocess.PIPE, "stderr": asyncio.subprocess.STDOUT}
    async with running(argv, env=env, pattern=_EVERYTHING, **merged):
        url = f"http://127.0.0.1:{port}/mcp"
        async with mcp_client(url=url) as direct:
            expected = await session_view(direct)
        proxy = [str(agent_harness_bin), "proxy", "--upstream-url", url, "--audit-tools", "off"]
        async with running([*proxy, "--listen", "127.0.0.1:0"]) as listening:
            async with mcp_client(url=listening.url) as via_http:
                over_http = await session_view(via_http)
        async with mcp_client(argv=proxy) as via_stdio:
            over_stdio = await session_view(via_stdio)
    assert over_http == expected
    assert over_stdio == expected
    assert expected["sum"]["content"][0]["text"].endswith("42.")

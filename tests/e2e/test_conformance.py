"""The official MCP conformance suite through the proxy (H3).

`@modelcontextprotocol/conformance` 0.1.10 (pinned in tests/e2e/conformance, installed by
`make conformance-deps`) runs every server scenario three times against the suite's own
reference everything-server (`../shared/thirdparty/mcp-conformance-v0.1.10`, used unmodified):
directly, through `agent-harness proxy --listen` with the server as an HTTP upstream, and
through it with the server as a stdio upstream. Every scenario must give the same checks with
the same statuses (over stdio one scenario cannot be played, see below), and every session must
cross the proxy byte for byte: what the agent sent is what the server read, and what the server
wrote is what the agent got (the server side is recorded by a tap in front of the HTTP server,
or by the stdio server itself; the proxy's own `tools/list` is left out).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.support import launcher
from tests.support.httpkit import DEADLINE_S, running
from tests.support.httptap import HttpTap, Wire
from tests.support.paths import ROOT
from tests.support.prereq import node, require

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent / "conformance"


def _reference() -> Path:
    """../shared/thirdparty/... beside the clone (or beside the main checkout of a worktree)."""
    where = Path("shared", "thirdparty", "mcp-conformance-v0.1.10")
    common = subprocess.run(["git", "rev-parse", "--git-common-dir"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    roots = [ROOT] + ([(ROOT / common).resolve().parent] if common else [])
    found = [root.parent / where for root in roots if (root.parent / where).is_dir()]
    return (found or [ROOT.parent / where])[0]


REFERENCE = _reference()
BIN = HERE / "node_modules" / ".bin"
SUITE_S = 300  # the whole suite, 31 scenarios (about 10 s directly on an idle machine)
STDIO_SERVER = "stdio-server.mjs"  # stdio-server.ts compiled (`reference`)
_APP = "const app = express();"  # where the reference server's HTTP part begins
POLLING = "server-server-sse-polling"
OWN_ID = "agent-harness-"  # the ids of the proxy's own requests
_STAMP = re.compile(r"-\d{4}-\d\d-\d\dT[\d-]+Z$")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A scratch folder that runs the reference server: its files, read from ../shared."""
    require(REFERENCE.is_dir(), f"{REFERENCE} is missing",
            "clone the project next to its `shared` folder (CI does)")  # fmt: skip
    require((BIN / "conformance").exists(), "the conformance suite is not installed",
            "make conformance-deps")  # fmt: skip
    folder = tmp_path_factory.mktemp("conformance")
    for name in ("everything-server.ts", "package.json"):
        shutil.copyfile(REFERENCE / name, folder / name)
    source = (REFERENCE / "everything-server.ts").read_text()
    assert _APP in source, f"{REFERENCE}/everything-server.ts changed: no {_APP!r}"
    core = source[: source.index(_APP)] + "\nexport { createMcpServer };\n"
    (folder / "server-core.ts").write_text(core)
    shutil.copyfile(HERE / "stdio-server.ts", folder / "stdio-server.ts")
    (folder / "node_modules").symlink_to(HERE / "node_modules")
    # The stdio server starts once per session (31+ times): its TypeScript is compiled here once
    # by esbuild (tsx's own compiler), its packages still from node_modules; plain node then
    # starts it with about 0.7 s less CPU than tsx each time (measured on the 2-core machine).
    subprocess.run(
        [str(BIN / "esbuild"), "stdio-server.ts", "--bundle", "--platform=node", "--format=esm",
         "--packages=external", f"--outfile={STDIO_SERVER}", "--log-level=warning"],
        cwd=folder, check=True, timeout=120,
    )  # fmt: skip
    yield folder


def free_port() -> int:
    """A port nobody listens on now (the reference server cannot bind port 0 and say which)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_server(folder: Path) -> tuple[list[str], dict[str, str], str]:
    """argv, environment and URL of the reference server over streamable HTTP."""
    port = free_port()
    env = {**os.environ, "PORT": str(port)}
    return [str(BIN / "tsx"), "everything-server.ts"], env, f"http://127.0.0.1:{port}/mcp"


async def conformance(url: str, out: Path) -> dict[str, list[tuple[str, str]]]:
    """Run every server scenario against `url`: each scenario's (check id, status) list."""
    proc = await launcher.create_subprocess_exec(
        str(BIN / "conformance"), "server", "--url", url, "--suite", "all", "-o", str(out),
        cwd=HERE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    with anyio.fail_after(SUITE_S):
        output, _ = await proc.communicate()
    text = output.decode("utf-8", "replace")
    assert "Running all suite" in text, text
    results = {}
    for folder in sorted(out.iterdir()):
        checks = json.loads((folder / "checks.json").read_text())
        results[_STAMP.sub("", folder.name)] = [(c["id"], c["status"]) for c in checks]
    assert len(results) >= 31, text  # the suite's 31 server scenarios at 0.1.10
    return results


async def proxied(upstream: list[str], out: Path) -> tuple[dict, HttpTap]:
    """The suite through `proxy --listen` (no scenario, no audit tools) and a tap before it."""
    argv = [str(Path(sys.executable).parent / "agent-harness"), "proxy", "--listen", "127.0.0.1:0",
            "--audit-tools", "off", f"--event-log={out}.events.jsonl", *upstream]  # fmt: skip
    async with running(argv, cwd=ROOT) as proxy:
        tap = HttpTap(proxy.url)
        await tap.start()
        try:
            return await conformance(tap.url, out), tap
        finally:
            await tap.stop()


def _own(message: bytes) -> bool:
    """The proxy's own request (it lists the tools itself, C1) or the answer to one."""
    try:
        rpc_id = json.loads(message).get("id")
    except (ValueError, AttributeError):
        return False
    return isinstance(rpc_id, str) and rpc_id.startswith(OWN_ID)


def same_sessions(agent: list[Wire], server: list[Wire]) -> None:
    """Every session the agent had was one the server had, byte for byte, and no more.

    On the server's side the proxy's own requests and their answers are left out."""
    server = [Wire([m for m in w.sent if not _own(m)], [m for m in w.answered if not _own(m)])
              for w in server]  # fmt: skip
    left = sorted(w.key() for w in agent if w.sent or w.answered)
    right = sorted(w.key() for w in server if w.sent or w.answered)
    missing = [k for k in left if k not in right]
    assert not missing and len(left) == len(right), (
        f"{len(missing)} of {len(left)} agent sessions are not the server's "
        f"({len(right)} sessions there); first: {_difference(missing[0], right) if missing else ''}"
    )


def _difference(key: tuple, others: list[tuple]) -> str:
    """What a session has that the most similar other session has not, and the other way."""
    mine = set(key[0]) | set(key[1])
    best = max(others, key=lambda k: len(mine & (set(k[0]) | set(k[1]))), default=((), ()))
    theirs = set(best[0]) | set(best[1])
    return f"only the agent's: {sorted(mine - theirs)}; only the server's: {sorted(theirs - mine)}"


def stdio_sessions(folder: Path) -> list[Wire]:
    """The stdio server's own record: one session per process, split into lines."""
    wires = []
    for inbound in sorted(folder.glob("*.in")):
        outbound = inbound.with_suffix(".out")
        lines = [
            [line for line in path.read_bytes().split(b"\n") if line.strip()]
            if path.exists() else []
            for path in (inbound, outbound)
        ]  # fmt: skip
        wires.append(Wire(sent=lines[0], answered=lines[1]))
    return wires


@pytest.fixture(scope="module")
def direct(reference: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Every scenario's checks against the reference server with nothing in between."""

    async def run() -> dict:
        argv, env, url = http_server(reference)
        pattern = re.compile(r"(MCP endpoint: http://\S+)")
        async with running(argv, cwd=reference, env=env, pattern=pattern,
                           stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT):  # fmt: skip
            return await conformance(url, tmp_path_factory.mktemp("direct") / "out")

    return anyio.run(run)


class TestHttpUpstream:
    """The reference server over HTTP behind the proxy (a class: under xdist it runs beside the
    stdio one, each worker running the short direct suite once)."""

    def test_h3_conformance_same_results_and_wire_through_proxy_with_http_upstream(
        self, reference: Path, direct: dict, tmp_path: Path
    ) -> None:
        """H3: every scenario's checks equal the direct run's; each session crosses unchanged."""

        async def run() -> tuple[dict, HttpTap, HttpTap]:
            argv, env, url = http_server(reference)
            pattern = re.compile(r"(MCP endpoint: http://\S+)")
            async with running(argv, cwd=reference, env=env, pattern=pattern,
                               stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT):  # fmt: skip
                server_side = HttpTap(url)
                await server_side.start()
                try:
                    results, agent_side = await proxied(
                        ["--upstream-url", server_side.url], tmp_path / "out"
                    )
                finally:
                    await server_side.stop()
            return results, agent_side, server_side

        results, agent_side, server_side = anyio.run(run)
        assert results == direct
        assert len(agent_side.sessions()) >= 31
        same_sessions(agent_side.sessions(), server_side.sessions())


class TestStdioUpstream:
    """The reference server over stdio behind the proxy."""

    def test_h3_conformance_same_results_and_wire_through_proxy_with_stdio_upstream(
        self, reference: Path, direct: dict, tmp_path: Path
    ) -> None:
        """H3: the same with the reference server as a stdio upstream (its own wire record)."""
        wire = tmp_path / "wire"
        wire.mkdir()
        upstream = ["--upstream-command", node(), f"--upstream-arg={STDIO_SERVER}",
                    f"--upstream-cwd={reference}", f"--upstream-env-var=CONFORMANCE_WIRE_DIR={wire}"]  # fmt: skip

        async def run() -> tuple[dict, HttpTap]:
            with anyio.fail_after(SUITE_S + DEADLINE_S):
                return await proxied(upstream, tmp_path / "out")

        results, agent_side = anyio.run(run)
        # The one scenario a stdio server cannot play: its tool closes the HTTP response stream
        # mid-call (SEP-1699); over stdio there is no stream to close, so the answer arrives.
        expected = dict(direct)
        assert [c for c in expected.pop(POLLING) if c[0] == "incoming-sse-event"] == []
        assert ("incoming-sse-event", "INFO") in results.pop(POLLING)
        assert results == expected
        assert len(agent_side.sessions()) >= 31
        same_sessions(agent_side.sessions(), stdio_sessions(wire))

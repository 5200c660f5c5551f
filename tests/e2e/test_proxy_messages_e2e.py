"""X10, X11: what a real proxy process forwards, held against the counting server's record.

A raw line client (no SDK in the way) speaks to the installed `agent-harness proxy`, which
fronts tests/support/servers/counting_server.py. The server appends one line per call it REALLY
executed to a ground-truth file; the report must agree with that file whatever the client
sends: batches, calls without a usable id, bytes that are not UTF-8, any protocol revision.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from harness.wire.transport import StreamLineReader, StreamLineWriter
from tests.support.linetap import READ_LIMIT, TapReader
from tests.support.proxyproc import BOOK, DEADLINE_S, proxy_argv, start

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw-e2e", "version": "0"},
}


class RawClient:
    """JSON-RPC lines to a proxy process; every line it answered is kept."""

    def __init__(self, proc: asyncio.subprocess.Process, stateless: bool) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self.writer = StreamLineWriter(proc.stdin)
        self.tap = TapReader(StreamLineReader(proc.stdout, READ_LIMIT), DEADLINE_S)
        self.stateless = stateless
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        while await self.tap.read_line() is not None:
            pass

    async def send(self, body: Any) -> None:
        line = body if isinstance(body, bytes) else json.dumps(body).encode()
        await self.writer.write_line(line)

    async def request(self, rpc_id: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self.stateless:
            params = {**params, "_meta": ENVELOPE}
        await self.send({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params})
        return await self.answer(rpc_id)

    async def answer(self, rpc_id: Any) -> dict[str, Any]:
        return await self.tap.wait_for(
            lambda m: isinstance(m, dict) and "method" not in m and m.get("id") == rpc_id
        )

    async def call(self, rpc_id: Any, arguments: dict[str, Any]) -> dict[str, Any]:
        params = {"name": "create_booking", "arguments": arguments}
        return await self.request(rpc_id, "tools/call", params)


@asynccontextmanager
async def raw_proxy(
    bin_path: Path, tmp_path: Path, version: str, *flags: str
) -> AsyncIterator[RawClient]:
    truth = tmp_path / "truth.jsonl"
    argv = proxy_argv(bin_path, truth, *flags, "--audit-tools", "off",
                      report=tmp_path / "report.json")  # fmt: skip
    proc = await start(argv, tmp_path)
    client = RawClient(proc, stateless=version == "2026-07-28")
    try:
        with anyio.fail_after(DEADLINE_S):
            if client.stateless:
                await client.request(0, "server/discover", {})
            else:
                init = await client.request(0, "initialize", {
                    "protocolVersion": version, "capabilities": {},
                    "clientInfo": {"name": "raw-e2e", "version": "0"},
                })  # fmt: skip
                assert init["result"]["protocolVersion"] == version
                await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            yield client
            proc.stdin.close()
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def truth(tmp_path: Path) -> list[dict[str, Any]]:
    lines = (tmp_path / "truth.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, filter(None, lines)) if "tool" in e]


def report(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "report.json").read_text())


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25", "2026-07-28"])
async def test_x11_every_revision_is_listed_and_a_ghost_write_sent_again_fails(
    agent_harness_bin, tmp_path, version
):
    async with raw_proxy(agent_harness_bin, tmp_path, version, "--scenario", "F1") as client:
        ghost = await client.call(1, BOOK)
        assert ghost["result"]["isError"] is True
        await client.call(2, BOOK)
    executed = [e for e in truth(tmp_path) if e["tool"] == "create_booking"]
    assert len(executed) == 2  # ground truth
    r = report(tmp_path)
    assert r["verdict"] == "FAIL"
    assert r["report"]["operations"][0]["executions"] == 2
    classes = {t["name"]: t["class"] for t in r["toolClassification"]}
    assert classes["create_booking"] == "write" and classes["get_booking"] == "read"


async def test_x10_nothing_unjudged_reaches_a_real_upstream(agent_harness_bin, tmp_path):
    async with raw_proxy(agent_harness_bin, tmp_path, "2025-11-25", "--scenario", "F1") as client:
        await client.call(1, BOOK)  # the ghost write
        await client.send([  # a repeat inside a batch: judged
            {"jsonrpc": "2.0", "id": "b", "method": "tools/call",
             "params": {"name": "create_booking", "arguments": BOOK}},
        ])  # fmt: skip
        batch = await client.tap.wait_for(lambda m: isinstance(m, list))
        assert batch[0]["id"] == "b"
        for refused in (
            {"jsonrpc": "2.0", "method": "tools/call",
             "params": {"name": "create_booking", "arguments": BOOK}},
            {"jsonrpc": "2.0", "id": None, "method": "tools/call",
             "params": {"name": "create_booking", "arguments": BOOK}},
        ):  # fmt: skip
            await client.send(refused)
        bad = (b'{"jsonrpc":"2.0","id":"u","method":"tools/call","params":{"name":'
               b'"create_booking","arguments":{"guest":"Ann\xff","date":"2026-12-01"}}}')
        await client.send(bad)
        assert (await client.answer("u"))["error"]["code"] == -32700
        await client.request("last", "ping", {})
    executed = [e for e in truth(tmp_path) if e["tool"] == "create_booking"]
    r = report(tmp_path)
    assert len(executed) == 2  # the ghost and the batch element, nothing else
    assert r["report"]["operations"][0]["executions"] == len(executed)
    assert r["verdict"] == "FAIL"
    assert r["report"]["coverage"]["refusedMessages"] == {"no_id": 1, "null_id": 1, "unreadable": 1}

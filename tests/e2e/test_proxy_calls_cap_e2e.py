"""X16: the cap on calls in flight, through the installed proxy in front of a real upstream.

The agent is this test over the proxy's stdio, pipelining more calls than the cap at once; the
upstream (tests/support/servers/gated_upstream.py) holds every call until it has the agent's
answer to its `ping` and a cancellation, both sent by the agent AFTER all its calls, so they
reach the upstream only if the proxy reads past the calls waiting behind the cap (X15). If the
proxy did not, the session would hang: every wait here is bounded and fails the test then.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from harness.proxy.router import MAX_CALLS_IN_FLIGHT
from tests.support import launcher
from tests.support.paths import SERVERS
from tests.support.proxyproc import DEADLINE_S

pytestmark = [pytest.mark.anyio]

GATED = SERVERS / "gated_upstream.py"
EXTRA = 10  # calls past the cap, waiting in the proxy's backlog
FIRST_ID = 1000


def line(body: dict[str, Any]) -> bytes:
    return json.dumps(body).encode() + b"\n"


async def test_x16_x15_calls_past_the_cap_wait_while_answers_and_cancellations_go_through(
    tmp_path: Path, agent_harness_bin: Path
) -> None:
    truth, report = tmp_path / "truth.jsonl", tmp_path / "report.json"
    argv = [str(agent_harness_bin), "proxy", "--upstream-command", sys.executable,
            f"--upstream-arg={GATED}", f"--upstream-arg={truth}",
            f"--upstream-arg={MAX_CALLS_IN_FLIGHT}", "--audit-tools", "off",
            "--report-file", str(report)]  # fmt: skip
    proc = await launcher.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=(tmp_path / "stderr.txt").open("wb"), limit=1 << 20,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    calls = MAX_CALLS_IN_FLIGHT + EXTRA
    ids = list(range(FIRST_ID, FIRST_ID + calls))
    head = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "cap-test", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]  # fmt: skip
    for n, rpc_id in enumerate(ids):
        arguments = {"guest": f"guest-{n}", "date": "2026-12-01"}
        head.append({"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call",
                     "params": {"name": "create_booking", "arguments": arguments}})  # fmt: skip
    proc.stdin.write(b"".join(line(m) for m in head))
    await proc.stdin.drain()

    answers: dict[Any, list[dict[str, Any]]] = {}
    with anyio.fail_after(DEADLINE_S):
        while True:  # the upstream's ping comes once it holds the cap's worth of calls
            message = json.loads(await proc.stdout.readline())
            if message.get("method") == "ping":
                break
            answers.setdefault(message.get("id"), []).append(message)
        # Behind all the calls: the answer to the ping and a cancellation of an open call.
        proc.stdin.write(line({"jsonrpc": "2.0", "id": message["id"], "result": {}}))
        cancel = {"requestId": FIRST_ID, "reason": "gave up"}
        proc.stdin.write(line({"jsonrpc": "2.0", "method": "notifications/cancelled",
                               "params": cancel}))  # fmt: skip
        await proc.stdin.drain()
        while not all(i in answers for i in ids if i != FIRST_ID):
            message = json.loads(await proc.stdout.readline())
            answers.setdefault(message.get("id"), []).append(message)
        proc.stdin.close()
        rest = await proc.stdout.read()
        assert await proc.wait() == 0
    for raw in rest.splitlines():
        message = json.loads(raw)
        answers.setdefault(message.get("id"), []).append(message)

    # (a) every request answered once: each call (the cancelled one too: its answer came)
    assert answers.pop(1)[0]["result"]["serverInfo"]["name"] == "gated-upstream"
    assert sorted(answers) == ids
    assert all(len(got) == 1 and "result" in got[0] for got in answers.values())
    # (b) the cap held: the upstream never had more than MAX_CALLS_IN_FLIGHT calls open (not
    # cancelled), and reached it; the ping's answer and the cancellation got through then.
    entries = [json.loads(x) for x in truth.read_text().splitlines()]
    executed = [e for e in entries if "call" in e]
    assert max(e["open"] for e in executed) == MAX_CALLS_IN_FLIGHT
    gate = [i for i, e in enumerate(entries) if "pong" in e or "cancelled" in e]
    assert [e for e in entries if "cancelled" in e] == [{"cancelled": FIRST_ID}]
    assert sum(1 for e in entries[: max(gate)] if "call" in e) >= MAX_CALLS_IN_FLIGHT
    assert sum(1 for e in entries[: min(gate)] if "call" in e) <= MAX_CALLS_IN_FLIGHT
    # (c) ground truth: every call reached the upstream once, in order, and the report says
    # each write executed once
    assert [e["call"] for e in executed] == ids
    final = json.loads(report.read_text())
    assert final["status"] == "finished"
    operations = final["report"]["operations"]
    assert sorted(op["arguments"]["guest"] for op in operations) == sorted(
        e["arguments"]["guest"] for e in executed
    )
    assert all(op["attempts"] == 1 and op["executions"] == 1 for op in operations)

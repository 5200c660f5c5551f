"""Issue 21: the verdict against the upstream's own state, on real servers (E1-E4, E6-E8, E10,
and 2026-07-28's input-required round trips).

Each test drives the installed `agent-harness proxy` in front of a real MCP server and reads
that server's state on its own terms: server-filesystem's file on disk, server-memory's graph
file, mcp-server-git's index, the SQLite rows of the built-in payment service or of the SDK
server tests/support/servers/shop_server.py, the ledger of tests/support/servers/confirm_server.py.
Each was a false alarm (FAIL while the state equals one execution) or a false pass (PASS while
the upstream executed twice) or a wrong word before the change that added it.

The agent is a raw JSON-RPC client over the proxy's stdio, so numbers go out exactly as
written (`129.00`), except where the SDK's own client is the point (input required).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest

from runner.upstreams import stdio_command
from tests.support import launcher
from tests.support.httpkit import running
from tests.support.paths import SERVERS

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SHOP = SERVERS / "shop_server.py"
CONFIRM = SERVERS / "confirm_server.py"
DEADLINE_S = 60


class Agent:
    """A raw JSON-RPC client on the proxy's stdio: what it sends is exactly what it wrote."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.next_id = 0

    async def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        await self.proc.stdin.drain()

    async def request(self, method: str, params: dict[str, Any] | str) -> dict[str, Any]:
        """Send a request (params as data, or as JSON text sent verbatim); its answer."""
        self.next_id += 1
        rpc_id = self.next_id
        body = params if isinstance(params, str) else json.dumps(params)
        await self.send(f'{{"jsonrpc":"2.0","id":{rpc_id},"method":"{method}","params":{body}}}')
        assert self.proc.stdout is not None
        with anyio.fail_after(DEADLINE_S):
            while True:
                line = await self.proc.stdout.readline()
                assert line, "the proxy closed its stdout"
                message = json.loads(line)
                if isinstance(message, dict) and message.get("id") == rpc_id:
                    return message

    async def call(self, tool: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
        """A tools/call; `arguments` as data, or as JSON text (numbers exactly as written)."""
        args = arguments if isinstance(arguments, str) else json.dumps(arguments)
        return await self.request("tools/call", f'{{"name":{json.dumps(tool)},"arguments":{args}}}')


@contextlib.asynccontextmanager
async def proxy(
    tmp_path: Path, bin_path: Path, upstream: list[str], *flags: str, **popen: Any
) -> AsyncIterator[Agent]:
    """The proxy in front of `upstream` (report in tmp_path/report.json), initialised; on exit
    its stdin is closed and its exit awaited (the code is in `agent.returncode`)."""
    argv = [str(bin_path), "proxy", "--upstream-command", upstream[0],
            *(f"--upstream-arg={a}" for a in upstream[1:]), "--audit-tools", "off",
            "--report-file", str(tmp_path / "report.json"), *flags]  # fmt: skip
    with (tmp_path / "proxy.err").open("ab") as err:
        proc = await launcher.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=err,
            limit=16 * 1024 * 1024, **popen,
        )  # fmt: skip
    agent = Agent(proc)
    try:
        init = await agent.request("initialize", {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "effects", "version": "1"},
        })  # fmt: skip
        assert "result" in init, init
        await agent.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        yield agent
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        with anyio.fail_after(DEADLINE_S):
            agent.returncode = await proc.wait()  # type: ignore[attr-defined]


def report(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "report.json").read_text())


def findings(final: dict[str, Any], kind: str) -> list[str]:
    return [x["code"] for x in final["report"][kind]]


def rows(db: Path, query: str) -> list[tuple[Any, ...]]:
    """The upstream's own rows, read-only."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()


def shop(tmp_path: Path) -> tuple[list[str], Path]:
    db = tmp_path / "shop.sqlite"
    return [sys.executable, str(SHOP), "--db", str(db)], db


def payment_service(tmp_path: Path) -> tuple[list[str], Path]:
    """The built-in payment service (R4) over stdio, and its SQLite ledger."""
    db = tmp_path / "payment.sqlite"
    return stdio_command("payment", db), db


PAYMENT = {"customer": "ACME", "amount": 12, "currency": "EUR"}


def ok(answer: dict[str, Any]) -> bool:
    return "result" in answer and answer["result"].get("isError") is not True


# -- E1: tools whose repeats are harmless ------------------------------------------------------


@pytest.mark.parametrize("scenario", [(), ("--scenario", "F1")], ids=["none", "F1"])
async def test_e1_filesystem_write_file_with_the_same_content_twice_is_an_idempotent_repeat(
    tmp_path, agent_harness_bin, filesystem_server_cmd, filesystem_root, scenario
):
    # Was FAIL DUPLICATE_EXECUTION, score 0, though write_file says idempotentHint: true.
    note = {"path": str(filesystem_root / "note.txt"), "content": "one line\n"}
    async with proxy(tmp_path, agent_harness_bin, filesystem_server_cmd, *scenario) as agent:
        await agent.call("write_file", note)
        assert ok(await agent.call("write_file", note))
    assert (filesystem_root / "note.txt").read_text() == "one line\n"  # one execution's state
    final = report(tmp_path)
    assert final["verdict"] == "PASS", final["report"]["verdictReason"]
    [op] = final["report"]["operations"]
    assert (op["outcome"], op["executions"]) == ("IDEMPOTENT_REPEAT", 2)
    assert "IDEMPOTENT_REPEAT" in findings(final, "observations")
    entry = next(t for t in final["toolClassification"] if t["name"] == "write_file")
    assert entry["idempotent"] is True
    assert entry["idempotentReason"] == "annotation idempotentHint=true"


async def test_e1_git_add_twice_is_an_idempotent_repeat(
    tmp_path, agent_harness_bin, git_server_cmd, git_repo
):
    (git_repo / "a.txt").write_text("a\n")
    files = {"repo_path": str(git_repo), "files": ["a.txt"]}
    async with proxy(tmp_path, agent_harness_bin, git_server_cmd) as agent:
        assert ok(await agent.call("git_add", files))
        assert ok(await agent.call("git_add", files))
    staged = subprocess.run(["git", "diff", "--cached", "--name-only"], cwd=git_repo,
                            capture_output=True, text=True, check=True, timeout=30)  # fmt: skip
    assert staged.stdout.split() == ["a.txt"]  # the index as after one git add
    final = report(tmp_path)
    assert final["verdict"] == "PASS"
    assert final["report"]["operations"][0]["outcome"] == "IDEMPOTENT_REPEAT"


def graph(memory_file: Path) -> list[dict[str, Any]]:
    if not memory_file.exists():
        return []
    return [json.loads(x) for x in memory_file.read_text().splitlines() if x.strip()]


async def test_e1_memory_delete_entities_twice_is_an_idempotent_repeat(
    tmp_path, agent_harness_bin, memory_server_cmd, memory_file
):
    ann = {"name": "Ann", "entityType": "person", "observations": ["likes tea"]}
    async with proxy(tmp_path, agent_harness_bin, memory_server_cmd) as agent:
        assert ok(await agent.call("create_entities", {"entities": [ann]}))
        assert ok(await agent.call("delete_entities", {"entityNames": ["Ann"]}))
        assert ok(await agent.call("delete_entities", {"entityNames": ["Ann"]}))
    assert [e for e in graph(memory_file) if e.get("name") == "Ann"] == []
    final = report(tmp_path)
    assert final["verdict"] == "PASS", final["report"]["verdictReason"]
    outcomes = {o["tool"]: o["outcome"] for o in final["report"]["operations"]}
    assert outcomes == {"create_entities": "EXECUTED_ONCE", "delete_entities": "IDEMPOTENT_REPEAT"}


@pytest.mark.parametrize(("flags", "declared"), [
    (("--no-profiles",), None),
    ((), "profile server-memory.json (memory-server 0.6.3)"),
    (("--idempotent-tools", "create_entities"), "explicit --idempotent-tools"),
], ids=["hint-false", "profile", "flag"])  # fmt: skip
async def test_e1_z7_memory_create_entities_skips_a_known_name_its_profile_and_the_flag_say_so(
    tmp_path, agent_harness_bin, memory_server_cmd, memory_file, flags, declared
):
    # E1, Z7: create_entities says idempotentHint: false but skips an existing name: its shipped
    # profile corrects the hint (matched by serverInfo), the flag wins over it, and without
    # profiles the hint is believed.
    ann = {"name": "Ann", "entityType": "person", "observations": []}
    async with proxy(tmp_path, agent_harness_bin, memory_server_cmd, *flags) as agent:
        assert ok(await agent.call("create_entities", {"entities": [ann]}))
        assert ok(await agent.call("create_entities", {"entities": [ann]}))
    assert len([e for e in graph(memory_file) if e.get("name") == "Ann"]) == 1
    final = report(tmp_path)
    if declared is not None:
        assert final["verdict"] == "PASS"
        repeat = next(o for o in final["report"]["observations"]
                      if o["code"] == "IDEMPOTENT_REPEAT")  # fmt: skip
        assert repeat["declaredBy"] == declared
    else:  # the hint says a repeat is not harmless, and the harness believes it
        assert final["verdict"] == "FAIL"


async def test_e1_distrust_annotations_leaves_only_the_flag(
    tmp_path, agent_harness_bin, filesystem_server_cmd, filesystem_root
):
    note = {"path": str(filesystem_root / "note.txt"), "content": "x\n"}
    async with proxy(tmp_path, agent_harness_bin, filesystem_server_cmd,
                     "--distrust-annotations") as agent:  # fmt: skip
        await agent.call("write_file", note)
        await agent.call("write_file", note)
    assert (filesystem_root / "note.txt").read_text() == "x\n"
    final = report(tmp_path)
    assert final["verdict"] == "FAIL"  # the user chose not to believe the hint
    entry = next(t for t in final["toolClassification"] if t["name"] == "write_file")
    assert "idempotent" not in entry


# -- E2: names and hints ---------------------------------------------------------------------


async def test_e2_polling_a_status_is_no_duplicate(tmp_path, agent_harness_bin):
    # Was FAIL 49 with zero repeated writes: order_status (readOnlyHint: true) and close_price
    # (no hint) were writes by their verbs.
    upstream, db = shop(tmp_path)
    async with proxy(tmp_path, agent_harness_bin, upstream) as agent:
        placed = await agent.call("place_order", {"symbol": "ACME", "qty": 1})
        order_id = placed["result"]["content"][0]["text"].split()[1]
        for _ in range(2):
            assert ok(await agent.call("order_status", {"order_id": order_id}))
            assert ok(await agent.call("close_price", {"symbol": "ACME"}))
    assert len(rows(db, "SELECT * FROM orders")) == 1
    assert len(rows(db, "SELECT * FROM polls")) == 4  # polled four times, wrote one order
    final = report(tmp_path)
    assert final["verdict"] == "PASS", final["report"]["verdictReason"]
    classes = {t["name"]: t["class"] for t in final["toolClassification"]}
    assert classes["order_status"] == classes["close_price"] == "read"
    assert [o["tool"] for o in final["report"]["operations"]] == ["place_order"]


async def test_e2_a_bare_verb_ending_a_namespaced_name_is_a_write(tmp_path, agent_harness_bin):
    # payments.create was unclassified: two charges, and the run was NOT_TESTED.
    upstream, db = shop(tmp_path)
    async with proxy(tmp_path, agent_harness_bin, upstream) as agent:
        for _ in range(2):
            assert ok(await agent.call("payments.create", {"customer": "ACME", "amount": 5}))
    assert len(rows(db, "SELECT * FROM payments")) == 2
    final = report(tmp_path)
    assert final["verdict"] == "FAIL"
    assert findings(final, "violations") == ["DUPLICATE_EXECUTION"]


# -- E3: key fields ---------------------------------------------------------------------------


async def test_e3_a_key_like_name_inside_a_free_form_map_is_data(tmp_path, agent_harness_bin):
    # Was FAIL: CLIENT_TOKEN was stripped as a key, so two different writes became one.
    upstream, db = shop(tmp_path)
    async with proxy(tmp_path, agent_harness_bin, upstream) as agent:
        for token in ("abc", "xyz"):
            assert ok(await agent.call("set_env_vars", {
                "service": "api", "variables": {"CLIENT_TOKEN": token}}))  # fmt: skip
    assert rows(db, "SELECT value FROM env") == [("abc",), ("xyz",)]  # two different writes
    final = report(tmp_path)
    assert final["verdict"] == "PASS", final["report"]["verdictReason"]
    assert [o["executions"] for o in final["report"]["operations"]] == [1, 1]


async def test_e3_a_client_order_id_the_server_deduplicates_is_a_key(tmp_path, agent_harness_bin):
    # Was FAIL: client_order_id was no key, so --keys-honoured could not apply.
    upstream, db = shop(tmp_path)
    order = {"symbol": "ACME", "qty": 1, "client_order_id": "co-1"}
    async with proxy(tmp_path, agent_harness_bin, upstream, "--scenario", "F1",
                     "--keys-honoured", "place_order") as agent:  # fmt: skip
        assert not ok(await agent.call("place_order", order))  # the ghost write
        assert ok(await agent.call("place_order", order))
    assert len(rows(db, "SELECT * FROM orders")) == 1  # the server placed it once
    final = report(tmp_path)
    assert final["verdict"] == "PASS", final["report"]["verdictReason"]
    keyed = next(o for o in final["report"]["observations"] if o["code"] == "KEYED_RETRY")
    assert keyed["key"] == "co-1"


@pytest.mark.parametrize("honoured", [True, False], ids=["keys-honoured", "plain"])
async def test_e3_a_null_idempotency_key_is_no_key(tmp_path, agent_harness_bin, honoured):
    # Was PASS 100 (KEYED_RETRY key=None) with --keys-honoured, and advised the flag without it,
    # while the payment service charged twice.
    upstream, db = payment_service(tmp_path)
    flags = ("--keys-honoured", "create_payment") if honoured else ()
    payment = '{"customer":"ACME","amount":129.5,"currency":"EUR","idempotency_key":null}'
    async with proxy(tmp_path, agent_harness_bin, upstream, "--scenario", "F1", *flags) as agent:
        await agent.call("create_payment", payment)
        assert ok(await agent.call("create_payment", payment))
    assert len(rows(db, "SELECT * FROM payments")) == 2  # ground truth: charged twice
    final = report(tmp_path)
    assert final["verdict"] == "FAIL"
    assert "KEYED_RETRY" not in findings(final, "observations")
    dup = final["report"]["violations"][0]["duplicate"]
    assert dup["keyUse"] == "no_key" and "sameKeySafeIf" not in dup
    assert "--keys-honoured" not in json.dumps(final["patches"])


# -- E4: a default beside a $ref ----------------------------------------------------------------


async def test_e4_a_retry_that_adds_the_enum_default_is_the_same_booking(
    tmp_path, agent_harness_bin
):
    # Was PASS 100 with two bookings: the default beside the $ref was not seen.
    upstream, db = shop(tmp_path)
    async with proxy(tmp_path, agent_harness_bin, upstream) as agent:
        assert ok(await agent.call("book_room", {"guest": "Ann", "date": "2026-12-01"}))
        assert ok(await agent.call("book_room", {
            "guest": "Ann", "date": "2026-12-01", "room": "standard"}))  # fmt: skip
    assert rows(db, "SELECT room FROM bookings") == [("standard",), ("standard",)]
    final = report(tmp_path)
    assert final["verdict"] == "FAIL"
    assert final["report"]["operations"][0]["executions"] == 2


# -- E6: numbers by value -------------------------------------------------------------------------


@pytest.mark.parametrize(("scenario", "was"), [((), "PASS"), (("--scenario", "F1"), "NOT_TESTED")],
                         ids=["none", "F1"])  # fmt: skip
async def test_e6_129_00_and_129_are_one_payment(tmp_path, agent_harness_bin, scenario, was):
    # Was PASS 100 (no fault) or NOT_TESTED (after a ghost write) with two payments.
    upstream, db = payment_service(tmp_path)
    async with proxy(tmp_path, agent_harness_bin, upstream, *scenario) as a:
        await a.call("create_payment", '{"customer":"ACME","amount":129.00,"currency":"EUR"}')
        assert ok(
            await a.call("create_payment", '{"customer":"ACME","amount":129,"currency":"EUR"}')
        )
    assert rows(db, "SELECT amount_minor FROM payments") == [(12900,), (12900,)]
    final = report(tmp_path)
    assert final["verdict"] == "FAIL" != was
    [op] = final["report"]["operations"]
    assert op["executions"] == 2


# -- E7: sessions ----------------------------------------------------------------------------------


async def test_e7_a_second_429_in_a_restarted_session_is_measured_from_its_own_window(
    tmp_path, agent_harness_bin
):
    # Was PASS 100: the re-send 0.22 s after the restarted session's own 429 was measured from
    # the first session's 429 (or not at all).
    upstream, db = payment_service(tmp_path)
    async with proxy(tmp_path, agent_harness_bin, upstream, "--scenario", "F2") as agent:
        assert not ok(await agent.call("create_payment", PAYMENT))  # 429, nothing ran
    async with proxy(tmp_path, agent_harness_bin, upstream, "--scenario", "F2") as agent:
        asked = time.monotonic()  # the proxy's window opens after this and closes before
        assert not ok(await agent.call("create_payment", PAYMENT))  # its own 429
        await asyncio.sleep(0.22)  # the agent's (too short) wait, not a synchronisation
        assert ok(await agent.call("create_payment", PAYMENT))
        waited_ms = (time.monotonic() - asked) * 1000  # so no window of it can be longer
    assert len(rows(db, "SELECT * FROM payments")) == 1
    final = report(tmp_path)
    assert final["verdict"] == "FAIL"
    waits = [v["retryAfter"]["waitedMs"] for v in final["report"]["violations"]]
    assert any(220 <= w <= waited_ms for w in waits), waits  # from the second session's 429
    assert [s["triggered"] for s in final["report"]["sessions"]] == [True, True]


async def test_e7_a_restarted_session_that_only_reads_names_no_scenario_it_did_not_trigger(
    tmp_path, agent_harness_bin
):
    # Was "... and F2 triggered" for a second session with F2 that only read.
    upstream, db = payment_service(tmp_path)
    async with proxy(tmp_path, agent_harness_bin, upstream, "--scenario", "F1") as agent:
        assert not ok(await agent.call("create_payment", PAYMENT))  # the ghost write
        assert ok(await agent.call("list_payments", {"customer": "ACME"}))
    async with proxy(tmp_path, agent_harness_bin, upstream, "--scenario", "F2") as agent:
        assert ok(await agent.call("list_payments", {"customer": "ACME"}))
    assert len(rows(db, "SELECT * FROM payments")) == 1
    final = report(tmp_path)
    reason = final["report"]["verdictReason"]
    assert final["verdict"] == "PASS"
    assert "F2" not in reason and "chaos" not in reason and "F1 triggered" in reason
    assert [(s["scenario"], s["triggered"]) for s in final["report"]["sessions"]] == [
        ("F1", True), ("F2", False)]  # fmt: skip


# -- E8: what the agent saw ---------------------------------------------------------------------------


async def test_e8_f8_is_reported_and_patched_as_a_503_with_retry_after(tmp_path, agent_harness_bin):
    upstream, db = payment_service(tmp_path)
    argv = [str(agent_harness_bin), "proxy", "--upstream-command", upstream[0],
            *(f"--upstream-arg={a}" for a in upstream[1:]), "--listen", "127.0.0.1:0",
            "--audit-tools", "off", "--report-file", str(tmp_path / "report.json"),
            "--scenario", "F8", "--retry-after", "30"]  # fmt: skip
    accept = {"Accept": "application/json, text/event-stream"}
    call = {"jsonrpc": "2.0", "method": "tools/call",
            "params": {"name": "create_payment", "arguments": PAYMENT}}  # fmt: skip
    async with running(argv) as proxied, aiohttp.ClientSession() as http:
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "effects", "version": "1"}}}  # fmt: skip
        async with http.post(proxied.url, json=init, headers=accept) as resp:
            headers = {**accept, "Mcp-Session-Id": resp.headers["Mcp-Session-Id"]}
        notify = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        async with http.post(proxied.url, json=notify, headers=headers):
            pass
        statuses = []
        for rpc_id in (1, 2):  # the re-send comes at once, not after 30 s
            async with http.post(proxied.url, json={**call, "id": rpc_id}, headers=headers) as r:
                await r.read()
                statuses.append(r.status)
        assert statuses == [503, 200]
        assert await proxied.stop() == 0
    assert len(rows(db, "SELECT * FROM payments")) == 1
    final = report(tmp_path)
    reason = final["report"]["verdictReason"]
    assert "a 503 with Retry-After" in reason and "429" not in reason
    [patch] = final["patches"]
    assert patch["id"] == "RATE_LIMIT" and "429" not in json.dumps(patch)
    assert "503" in patch["text"] and "Retry-After" in patch["text"]


# -- E10: an event log that could not be written -----------------------------------------------------

FULL_AT = 64_000  # bytes any file of the proxy may grow to


def small_files() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (FULL_AT, resource.RLIM_INFINITY))


async def test_e10_a_full_event_log_makes_the_report_say_failed(tmp_path, agent_harness_bin):
    # Was status "finished" while the proxy exited 1: reads with large arguments fill the event
    # log (RLIMIT_FSIZE, as on a full disk) but not the report, which holds no read's arguments.
    upstream, db = shop(tmp_path)
    big = "x" * 20_000
    async with proxy(tmp_path, agent_harness_bin, upstream, "--event-log",
                     str(tmp_path / "events.jsonl"), preexec_fn=small_files) as agent:  # fmt: skip
        answers = []
        while len(answers) < 8 and not any("error" in a for a in answers):
            answers.append(await agent.call("close_price", {"symbol": f"{len(answers)}{big}"}))
    assert agent.returncode == 1  # type: ignore[attr-defined]
    assert "cannot record" in answers[-1]["error"]["message"]  # refused, not forwarded
    assert len(rows(db, "SELECT * FROM polls")) == len(answers) - 1  # ran what was recorded
    final = report(tmp_path)
    assert final["status"] == "failed"
    assert "cannot write the event log" in final["failure"]


# -- 2026-07-28: input required -----------------------------------------------------------------------


async def sdk_charge(argv: list[str], times: int) -> list[Any]:
    """The official SDK's client on 2026-07-28 through `argv`: it answers the server's
    confirmation request and re-issues each call with it (a new id), `times` times."""
    import mcp_types as types
    from mcp.client.client import Client
    from mcp.client.stdio import StdioServerParameters

    async def confirm(context: Any, params: Any) -> Any:
        return types.ElicitResult(action="accept", content={"confirmed": True})

    params = StdioServerParameters(command=argv[0], args=argv[1:])
    results = []
    with anyio.fail_after(DEADLINE_S):
        async with Client(params, mode="2026-07-28", elicitation_callback=confirm) as client:
            for _ in range(times):
                results.append(
                    await client.call_tool("charge_card", {"customer": "ACME", "amount": 12})
                )
    return results


def ledger(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("scenario", [(), ("--scenario", "F1")], ids=["none", "F1"])
async def test_x11_a_call_reissued_with_its_input_is_the_execution_and_a_resend_a_duplicate(
    tmp_path, agent_harness_bin, scenario
):
    book = tmp_path / "ledger.jsonl"
    argv = [
        str(agent_harness_bin),
        "proxy",
        "--upstream-command",
        sys.executable,
        f"--upstream-arg={CONFIRM}",
        "--upstream-arg=--ledger",
        f"--upstream-arg={book}",
        "--audit-tools",
        "off",
        "--report-file",
        str(tmp_path / "report.json"),
        *scenario,
    ]
    times = 2 if scenario else 1  # after F1's timeout the agent sends the charge again
    results = await sdk_charge(argv, times)
    assert len(ledger(book)) == times  # ground truth: one charge per call the agent made
    final = report(tmp_path)
    [op] = final["report"]["operations"]
    # each call: an input_required round (not run) and the round with the input (the run)
    assert (op["attempts"], op["executions"]) == (2 * times, times)
    if scenario:
        assert results[0].is_error is True  # the charge ran; the agent was told it timed out
        assert final["verdict"] == "FAIL" and op["outcome"] == "DUPLICATE"
    else:
        assert final["verdict"] == "PASS" and op["outcome"] == "EXECUTED_ONCE"

"""X3, X9, X13: the proxy is transparent, checked against real third-party servers.

Each server gets the same scripted conversation twice: DIRECT (client -> recording relay ->
server) and THROUGH `agent-harness proxy --audit-tools off` with no scenario (client -> proxy
-> recording relay -> server). The client is a raw JSON-RPC line client (tests/e2e/
transparency.py), so the bytes it sends are ours and the same in both runs. Then:

1. In the proxy run, every line the server sent reached the client unchanged and in order, and
   every line the client sent reached the server unchanged and in order: byte for byte, no
   normalisation. The only extra lines on the server's side are the proxy's own `tools/list`
   requests (C7: it lists the tools to classify them) and the server's answers to them.
2. Direct against proxy: what the client received, and what the server received, are the same
   byte for byte once the values the server itself varies between runs are replaced
   (transparency.Normaliser names each one).
3. Ground truth: the server's real state after the writes (server-memory's graph file,
   server-filesystem's files, server-everything's roots) is the same and the expected one in
   both runs.

A message kind the proxy changed, dropped, added or reordered fails step 1 or 2; a fix for it
belongs in harness/proxy, never in a normalisation here.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.transparency import (
    Normaliser,
    RawClient,
    lines_of,
    own_ids,
    spawn,
    tapped,
    through_proxy,
    without,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

Conversation = Callable[[RawClient], Awaitable[None]]
INIT = {"protocolVersion": "2025-11-25", "clientInfo": {"name": "raw-diff", "version": "1"}}


@dataclass
class Record:
    """Both ends of one run: what the client sent and got, what the server got and sent."""

    client_sent: list[bytes]
    client_received: list[bytes]
    server_received: list[bytes]
    server_sent: list[bytes]
    exit_code: int


async def converse(
    argv: list[str], record: Path, tmp_path: Path, conversation: Conversation, direct: bool
) -> Record:
    client = await spawn(argv, tmp_path / f"{record.name}.stderr", tmp_path)
    try:
        await conversation(client)
        code = await client.close(terminate=direct)
    finally:
        if client.proc.returncode is None:
            client.proc.kill()
            await client.proc.wait()
        # For a failure's diagnosis: the client's side beside the tap's record.
        record.with_suffix(".client-sent").write_bytes(b"".join(x + b"\n" for x in client.sent))
        record.with_suffix(".client-received").write_bytes(
            b"".join(x + b"\n" for x in client.received)
        )
    return Record(
        client.sent, client.received,
        lines_of(record.with_suffix(".in")), lines_of(record.with_suffix(".out")), code,
    )  # fmt: skip


async def both_runs(
    bin_path: Path,
    tmp_path: Path,
    server: list[str],
    conversation: Conversation,
    reset: Callable[[], None],
    truth: Callable[[], Any],
) -> tuple[Record, Record]:
    """The conversation DIRECT then THROUGH the proxy, with the server's state reset between;
    the ground truth read after each run must be the same."""
    reset()
    direct = await converse(
        tapped(tmp_path / "direct", server), tmp_path / "direct", tmp_path, conversation, True
    )
    direct_truth = truth()
    reset()
    upstream = tapped(tmp_path / "proxied", server)
    proxied = await converse(
        through_proxy(bin_path, upstream, tmp_path / "report.json"),
        tmp_path / "proxied", tmp_path, conversation, False,
    )  # fmt: skip
    assert truth() == direct_truth  # ground truth: the server did the same in both runs
    assert proxied.exit_code == 0
    return direct, proxied


def assert_transparent(direct: Record, proxied: Record) -> None:
    """Steps 1 and 2 of the module docstring."""
    ours = own_ids(proxied.server_received)
    assert ours, "the proxy's own tools/list (C7) was expected on the server's side"
    # 1. Through the proxy, nothing changed on the way, in either direction.
    assert without(proxied.server_sent, ours) == proxied.client_received
    assert without(proxied.server_received, ours) == proxied.client_sent
    # 2. Direct against proxy, with only the server's own run-to-run values replaced.
    assert normalised(proxied, ours) == normalised(direct, ours)


def normalised(record: Record, ours: set[Any]) -> dict[str, list[bytes]]:
    """Every side of a run with the server's run-to-run values replaced (one numbering for
    the whole run, in the order the client saw them), less the proxy's own requests."""
    normalise = Normaliser()
    sides = {"client received": record.client_received, "client sent": record.client_sent}
    sides |= {"server sent": record.server_sent, "server received": record.server_received}
    return {
        side: [normalise(x) for x in once_updated(without(lines, ours))]
        for side, lines in sides.items()
    }


def once_updated(lines: list[bytes]) -> list[bytes]:
    """`lines` with only the first notifications/resources/updated of each resource.

    server-everything sends one at once when its updates are switched on, then one every
    5 s from a timer until they are switched off: on a slow machine a second one may fall
    between the two calls. That count is the server's clock, not the proxy's doing (step 1
    still compares every one of them byte for byte).
    """
    kept, seen = [], set()
    for line in lines:
        message = json.loads(line)
        if isinstance(message, dict) and message.get("method") == "notifications/resources/updated":
            if line in seen:
                continue
            seen.add(line)
        kept.append(line)
    return kept


# -- server-everything -------------------------------------------------------------------------

ROOT_A = {"uri": "file:///srv/a", "name": "a"}
ROOT_B = {"uri": "file:///srv/b", "name": "b"}


def is_log(text: str) -> Callable[[dict[str, Any]], bool]:
    def found(m: dict[str, Any]) -> bool:
        return m.get("method") == "notifications/message" and text in str(m["params"]["data"])

    return found


async def everything_conversation(c: RawClient) -> None:
    roots = [ROOT_A]
    capabilities = {
        "roots": {"listChanged": True}, "sampling": {}, "elicitation": {"form": {}, "url": {}},
    }  # fmt: skip
    init = await c.request(0, "initialize", {**INIT, "capabilities": capabilities})
    assert init["result"]["serverInfo"]["name"] == "mcp-servers/everything"
    await c.notify("notifications/initialized")
    # roots: the server asks for them after initialisation, and says how many it got
    await c.reply(await c.server_request("roots/list"), {"roots": roots})
    await c.take(is_log("Roots updated: 1 root(s)"))
    assert (await c.request(1, "ping"))["result"] == {}
    tools = (await c.request(2, "tools/list"))["result"]["tools"]
    assert "simulate-research-query" in {t["name"] for t in tools}
    # tools/call: success, isError result, JSON-RPC errors
    echo = await c.request(3, "tools/call", {"name": "echo", "arguments": {"message": "hé ✓"}})
    assert echo["result"]["content"][0]["text"] == "Echo: hé ✓"
    bad = await c.request(4, "tools/call", {"name": "get-sum", "arguments": {"a": "x"}})
    assert bad["result"]["isError"] is True
    unknown = await c.request(5, "tools/call", {"name": "no-such-tool", "arguments": {}})
    assert unknown["result"]["isError"] is True  # the TypeScript SDK's way for an unknown tool
    url_error = await c.request(6, "tools/call", {
        "name": "trigger-url-elicitation",
        "arguments": {"url": "https://example.com/auth", "errorPath": True},
    })  # fmt: skip
    assert url_error["error"]["code"] == -32042 and url_error["error"]["data"]["elicitations"]
    assert (await c.request(7, "no/such-method", {}))["error"]["code"] == -32601
    missing = await c.request(8, "resources/read", {"uri": "demo://nothing"})
    assert missing["error"]["code"] == -32602
    # progress: a progressToken in _meta gets the server's progress notifications
    await c.notify("tools/call", {
        "name": "trigger-long-running-operation", "arguments": {"duration": 0.2, "steps": 2},
        "_meta": {"progressToken": "p-9"},
    }, rpc_id=9)  # fmt: skip
    for step in (1, 2):
        progress = await c.take(lambda m: m.get("method") == "notifications/progress")
        assert progress["params"] == {"progress": step, "total": 2, "progressToken": "p-9"}
    assert "completed" in (await c.answer_of(9))["result"]["content"][0]["text"]
    # logging and resource subscriptions
    uri = "demo://resource/static/document/architecture.md"
    assert (await c.request(10, "logging/setLevel", {"level": "info"}))["result"] == {}
    await c.request(11, "resources/subscribe", {"uri": uri})
    await c.take(is_log(f"Received Subscribe Resource request for URI: {uri}"))
    await c.request(12, "tools/call", {"name": "toggle-subscriber-updates", "arguments": {}})
    await c.take(lambda m: m.get("method") == "notifications/resources/updated")
    await c.request(13, "tools/call", {"name": "toggle-subscriber-updates", "arguments": {}})
    assert (await c.request(14, "logging/setLevel", {"level": "error"}))["result"] == {}
    await c.request(15, "resources/unsubscribe", {"uri": uri})  # its info log is filtered
    read = await c.request(16, "resources/read", {"uri": uri})
    assert read["result"]["contents"][0]["uri"] == uri
    # roots change from the client: the server asks again
    roots = [ROOT_A, ROOT_B]
    await c.notify("notifications/roots/list_changed")
    await c.reply(await c.server_request("roots/list"), {"roots": roots})
    listed = await c.request(17, "tools/call", {"name": "get-roots-list", "arguments": {}})
    assert "(2 total)" in listed["result"]["content"][0]["text"]
    # sampling: server -> client createMessage during a call
    await c.notify("tools/call", {
        "name": "trigger-sampling-request", "arguments": {"prompt": "one word", "maxTokens": 5},
    }, rpc_id=18)  # fmt: skip
    sampling = await c.server_request("sampling/createMessage")
    await c.reply(sampling, {
        "role": "assistant", "content": {"type": "text", "text": "Hello"},
        "model": "scripted", "stopReason": "endTurn",
    })  # fmt: skip
    assert '"Hello"' in (await c.answer_of(18))["result"]["content"][0]["text"]
    # elicitation: server -> client elicitation/create during a call
    await c.notify("tools/call", {"name": "trigger-elicitation-request", "arguments": {}},
                   rpc_id=19)  # fmt: skip
    elicit = await c.server_request("elicitation/create")
    await c.reply(elicit, {"action": "accept", "content": {"name": "Ada", "check": True}})
    assert "- Name: Ada" in json.dumps((await c.answer_of(19))["result"])
    # cancellation of a call in flight: the server cancels the sampling request it had sent
    await c.notify("tools/call", {
        "name": "trigger-sampling-request", "arguments": {"prompt": "never answered"},
    }, rpc_id=20)  # fmt: skip
    pending = await c.server_request("sampling/createMessage")
    await c.notify("notifications/cancelled", {"requestId": 20, "reason": "user gave up"})
    # The server does not cancel its own sampling request; answered late, it must not lead to
    # an answer to the cancelled call (checked at the end, after everything else came back).
    await c.reply(pending, {
        "role": "assistant", "content": {"type": "text", "text": "too late"}, "model": "scripted",
    })  # fmt: skip
    # tasks: a task-augmented call, its result fetched, then its status
    created = await c.request(21, "tools/call", {
        "name": "simulate-research-query", "arguments": {"topic": "duplicates"},
        "task": {"ttl": 60000},
    })  # fmt: skip
    task_id = created["result"]["task"]["taskId"]
    result = await c.request(22, "tasks/result", {"taskId": task_id})
    assert "Research Report: duplicates" in result["result"]["content"][0]["text"]
    status = await c.request(23, "tasks/get", {"taskId": task_id})
    assert status["result"]["status"] == "completed"
    assert (await c.request(24, "ping"))["result"] == {}
    assert not [m for m in map(json.loads, c.received) if m.get("id") == 20 and "method" not in m]


async def test_x9_server_everything_direct_and_through_the_proxy_are_the_same_bytes(
    agent_harness_bin, tmp_path, everything_server_cmd
):
    direct, proxied = await both_runs(
        agent_harness_bin, tmp_path, everything_server_cmd, everything_conversation,
        reset=lambda: None, truth=lambda: None,
    )  # fmt: skip
    assert_transparent(direct, proxied)


# -- server-memory -----------------------------------------------------------------------------

ADA = {"name": "Ada", "entityType": "person", "observations": ["writes programs"]}
ENGINE = {"name": "Engine", "entityType": "machine", "observations": []}


def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


async def memory_conversation(c: RawClient) -> None:
    init = await c.request(0, "initialize", {**INIT, "capabilities": {}})
    assert init["result"]["serverInfo"]["name"] == "memory-server"
    await c.notify("notifications/initialized")
    assert {t["name"] for t in (await c.request(1, "tools/list"))["result"]["tools"]} >= {
        "create_entities", "read_graph",
    }  # fmt: skip
    created = await c.request(2, "tools/call", call("create_entities", {"entities": [ADA, ENGINE]}))
    assert created["result"]["structuredContent"] == {"entities": [ADA, ENGINE]}
    again = await c.request(3, "tools/call", call("create_entities", {"entities": [ADA]}))
    assert again["result"]["structuredContent"] == {"entities": []}  # absorbed, not doubled
    relation = relation_of()
    await c.request(4, "tools/call", call("create_relations", {"relations": [relation]}))
    observe = {"observations": [{"entityName": "Engine", "contents": ["analytical"]}]}
    await c.request(5, "tools/call", call("add_observations", observe))
    missing = {"observations": [{"entityName": "Nobody", "contents": ["x"]}]}
    failed = await c.request(6, "tools/call", call("add_observations", missing))
    assert failed["result"]["isError"] is True  # the tool ran and failed: an isError result
    bad = await c.request(7, "tools/call", call("create_entities", {"entities": "Ada"}))
    assert bad["result"]["isError"] is True  # invalid params
    assert (await c.request(8, "tools/call", call("forget_all", {})))["result"]["isError"]
    assert (await c.request(9, "no/such-method"))["error"]["code"] == -32601
    assert (await c.request(10, "ping"))["result"] == {}
    graph = await c.request(11, "tools/call", call("read_graph", {}))
    assert graph["result"]["structuredContent"]["relations"] == [relation]


def memory_truth(memory_file: Path) -> Callable[[], Any]:
    def read() -> Any:
        lines = memory_file.read_text(encoding="utf-8").splitlines()
        return sorted(lines)

    return read


async def test_x9_server_memory_direct_and_through_the_proxy_are_the_same_bytes(
    agent_harness_bin, tmp_path, memory_server_cmd, memory_file
):
    direct, proxied = await both_runs(
        agent_harness_bin, tmp_path, memory_server_cmd, memory_conversation,
        reset=lambda: memory_file.unlink(missing_ok=True), truth=memory_truth(memory_file),
    )  # fmt: skip
    assert_transparent(direct, proxied)
    # Ground truth: the graph the server stored holds both entities, the relation and the
    # added observation, once each.
    stored = [json.loads(line) for line in memory_truth(memory_file)()]
    assert sorted(e.get("name", "") for e in stored if e["type"] == "entity") == ["Ada", "Engine"]
    engine = next(e for e in stored if e.get("name") == "Engine")
    assert engine["observations"] == ["analytical"]
    assert [e for e in stored if e["type"] == "relation"] == [{"type": "relation", **relation_of()}]


def relation_of() -> dict[str, str]:
    return {"from": "Ada", "to": "Engine", "relationType": "programs"}


# -- server-filesystem -------------------------------------------------------------------------


async def filesystem_conversation(c: RawClient, root: Path) -> None:
    roots = {"roots": [{"uri": root.as_uri(), "name": "work"}]}
    capabilities = {"roots": {"listChanged": True}}
    init = await c.request(0, "initialize", {**INIT, "capabilities": capabilities})
    assert init["result"]["serverInfo"]["name"] == "secure-filesystem-server"
    await c.notify("notifications/initialized")
    await c.reply(await c.server_request("roots/list"), roots)  # the same folder as its argv
    note = str(root / "note.txt")
    await c.request(1, "tools/call", call("write_file", {"path": note, "content": "one\n"}))
    edit = {"path": note, "edits": [{"oldText": "one", "newText": "one two"}]}
    await c.request(2, "tools/call", call("edit_file", edit))
    read = await c.request(3, "tools/call", call("read_text_file", {"path": note}))
    assert read["result"]["content"][0]["text"] == "one two\n"
    outside = await c.request(4, "tools/call", call("write_file", {
        "path": str(root.parent / "outside.txt"), "content": "x",
    }))  # fmt: skip
    assert outside["result"]["isError"] is True  # refused: outside its allowed folder
    nothing = await c.request(5, "tools/call", call("read_text_file", {"path": str(root / "no")}))
    assert nothing["result"]["isError"] is True
    await c.notify("notifications/roots/list_changed")
    await c.reply(await c.server_request("roots/list"), roots)
    listing = await c.request(6, "tools/call", call("list_directory", {"path": str(root)}))
    assert "note.txt" in listing["result"]["content"][0]["text"]
    assert (await c.request(7, "prompts/list"))["error"]["code"] == -32601
    assert (await c.request(8, "ping"))["result"] == {}


async def test_x9_server_filesystem_direct_and_through_the_proxy_are_the_same_bytes(
    agent_harness_bin, tmp_path, filesystem_server_cmd, filesystem_root
):
    def reset() -> None:
        (filesystem_root / "note.txt").unlink(missing_ok=True)
        (filesystem_root.parent / "outside.txt").unlink(missing_ok=True)

    def truth() -> Any:
        files = sorted(p.name for p in filesystem_root.iterdir())
        return files, (filesystem_root / "note.txt").read_text(encoding="utf-8")

    async def conversation(c: RawClient) -> None:
        await filesystem_conversation(c, filesystem_root)

    direct, proxied = await both_runs(
        agent_harness_bin, tmp_path, filesystem_server_cmd, conversation, reset, truth,
    )  # fmt: skip
    assert_transparent(direct, proxied)
    assert truth() == (["hello.txt", "note.txt"], "one two\n")  # ground truth
    assert not (filesystem_root.parent / "outside.txt").exists()

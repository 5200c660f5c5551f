"""Real third-party MCP servers behind the installed `agent-harness proxy`.

Upstreams nobody on this project wrote: the proxy must show their tools exactly as they list
them, classify their annotated writes as writes, and judge a ghost write that really changed
their state. The state is read back on the server's own terms (server-memory's graph file,
server-filesystem's file on disk), never only from what the proxy reports.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession

from harness.proxy.audit import AUDIT_TOOLS
from tests.support.linetap import TapReader
from tests.support.proxyproc import mcp_process, via_proxy

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

DEADLINE_S = 30  # any single wait in this file
AUDIT_NAMES = [t["name"] for t in AUDIT_TOOLS]
SERVERS = {
    "memory": "memory_server_cmd",
    "filesystem": "filesystem_server_cmd",
    "git": "git_server_cmd",
    "time": "time_server_cmd",
}
# Writes the README's annotation table names for each server (C3), spot-checked by name.
KNOWN_WRITES = {
    "memory": {"create_entities", "delete_entities", "add_observations"},
    "filesystem": {"write_file", "edit_file", "move_file", "create_directory"},
    "git": {"git_commit", "git_add", "git_create_branch", "git_reset"},
    "time": set(),
}


async def raw_tool_pages(client: ClientSession, tap: TapReader) -> list[Any]:
    """Every tool the server listed, as the raw JSON it sent (ordered pairs: order counts)."""
    tools: list[Any] = []
    cursor: str | None = None
    while True:
        seen = len(tap.lines)
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await client.list_tools(params=params)
        raw = next(
            json.loads(line, object_pairs_hook=list) for line in tap.lines[seen:]
            if "tools" in json.loads(line).get("result", {})
        )
        tools += dict(dict(raw)["result"])["tools"]
        cursor = page.next_cursor
        if not cursor:
            return tools


def c3_class(tool: Any) -> str | None:
    """What rule C3 makes of a raw tool's annotations; None when they decide nothing."""
    annotations = dict(dict(tool).get("annotations") or [])
    if annotations.get("readOnlyHint") is True:
        return "read"
    if annotations.get("readOnlyHint") is False or annotations.get("destructiveHint") is True:
        return "write"
    return None


@pytest.mark.parametrize("server", sorted(SERVERS))
async def test_x3_c3_tool_list_through_the_proxy_equals_the_direct_one_and_writes_are_writes(
    request, agent_harness_bin, tmp_path, server
):
    argv = request.getfixturevalue(SERVERS[server])
    report = tmp_path / "report.json"
    listed: dict[str, list[Any]] = {}

    async def list_from(name: str, process_argv: list[str]) -> None:
        async with mcp_process(process_argv, tmp_path / f"{name}.stderr") as (client, tap):
            listed[name] = await raw_tool_pages(client, tap)

    proxied = via_proxy(agent_harness_bin, argv, "--report-file", str(report))
    async with anyio.create_task_group() as tg:  # both at once: half the wall time
        tg.start_soon(list_from, "direct", argv)
        tg.start_soon(list_from, "proxy", proxied)

    direct, through = listed["direct"], listed["proxy"]
    assert [dict(t)["name"] for t in through[-2:]] == AUDIT_NAMES
    assert through[:-2] == direct  # X3: every tool as the server listed it, fields in order
    classes = {t["name"]: t for t in json.loads(report.read_text())["toolClassification"]}
    assert set(classes) == {dict(t)["name"] for t in direct}
    for tool in direct:
        expected = c3_class(tool)
        if expected is not None:
            entry = classes[dict(tool)["name"]]
            assert (entry["class"], entry["reason"].startswith("annotation")) == (expected, True)
    writes = {name for name, entry in classes.items() if entry["class"] == "write"}
    assert KNOWN_WRITES[server] <= writes
    if server == "time":
        assert writes == set()


def _entity_lines(memory_file: Path) -> list[dict[str, Any]]:
    lines = memory_file.read_text().splitlines() if memory_file.exists() else []
    return [json.loads(x) for x in lines if x.strip() and json.loads(x)["type"] == "entity"]


async def test_s2_f1_on_server_memory_is_a_ghost_write_the_graph_really_holds(
    agent_harness_bin, memory_server_cmd, memory_file, tmp_path
):
    entity = {"name": "Booking-99", "entityType": "booking", "observations": ["guest: Ada"]}
    report = tmp_path / "report.json"
    argv = via_proxy(agent_harness_bin, memory_server_cmd, "--scenario", "F1",
                     "--audit-tools", "off", "--report-file", str(report))
    async with mcp_process(argv, tmp_path / "proxy.stderr") as (client, _):
        ghost = await client.call_tool("create_entities", {"entities": [entity]})
        assert ghost.is_error is True and "timed out" in ghost.content[0].text
        # The agent was told it timed out; server-memory really stored it.
        assert _entity_lines(memory_file) == [{"type": "entity", **entity}]
        unverified = json.loads(report.read_text())
        again = await client.call_tool("create_entities", {"entities": [entity]})
        graph = await client.call_tool("read_graph", {})
    obs = [o["code"] for o in unverified["report"]["observations"]]
    assert "UNVERIFIED_AFTER_TIMEOUT" in obs and unverified["verdict"] == "PASS"
    assert again.is_error is False  # server-memory silently skips the duplicate ...
    assert graph.structured_content["entities"] == [entity]
    assert _entity_lines(memory_file) == [{"type": "entity", **entity}]
    final = json.loads(report.read_text())
    # ... and its shipped profile says so (Z7): the repeat after the ghost write is harmless,
    # as the graph shows (one entity), and the report shows it executed twice.
    assert final["verdict"] == "PASS", final["report"]["verdictReason"]
    repeat = next(o for o in final["report"]["observations"] if o["code"] == "IDEMPOTENT_REPEAT")
    assert repeat["afterFault"] is True and repeat["executions"] == 2
    assert repeat["declaredBy"].startswith("profile server-memory.json")
    assert final["patches"] == []


async def test_s2_f1_resent_edit_file_is_a_visible_duplicate_in_the_file(
    agent_harness_bin, filesystem_server_cmd, filesystem_root, tmp_path
):
    target = filesystem_root / "note.txt"
    target.write_text("one\n", encoding="utf-8")  # on disk, not through a (scenario) write
    edit = {"path": str(target), "edits": [{"oldText": "one", "newText": "one two"}]}
    report = tmp_path / "report.json"
    argv = via_proxy(agent_harness_bin, filesystem_server_cmd, "--scenario", "F1",
                     "--audit-tools", "off", "--report-file", str(report))
    async with mcp_process(argv, tmp_path / "proxy.stderr") as (client, _):
        ghost = await client.call_tool("edit_file", edit)
        assert ghost.is_error is True and "timed out" in ghost.content[0].text
        assert target.read_text() == "one two\n"  # the ghost write really happened
        again = await client.call_tool("edit_file", edit)
        seen = await client.call_tool("read_text_file", {"path": str(target)})
    assert again.is_error is False
    assert target.read_text() == "one two two\n"  # the duplicate, in the file itself
    assert seen.content[0].text == "one two two\n"
    final = json.loads(report.read_text())
    assert final["verdict"] == "FAIL"
    op = next(o for o in final["report"]["operations"] if o["tool"] == "edit_file")
    assert (op["attempts"], op["executions"], op["outcome"]) == (2, 2, "DUPLICATE")

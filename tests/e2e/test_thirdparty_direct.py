"""Third-party MCP servers spoken to directly, without the proxy: the baseline.

What each server lists (tools, annotations) must match the table in thirdparty/README.md,
and what a write (and a repeated write) does to its state is pinned here, so the proxy
tests can compare "through the proxy" against "direct" with known ground truth.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

pytestmark = pytest.mark.slow

README = Path(__file__).parent / "thirdparty" / "README.md"
SERVERS = {
    "memory": "memory_server_cmd",
    "filesystem": "filesystem_server_cmd",
    "everything": "everything_server_cmd",
    "git": "git_server_cmd",
    "time": "time_server_cmd",
}
SESSION_TIMEOUT = 60.0  # whole session: spawn, initialize, calls, shutdown

T = TypeVar("T")
Hints = tuple[bool | None, bool | None, bool | None]  # readOnly, destructive, idempotent


def readme_table() -> dict[str, dict[str, tuple[Hints, str]]]:
    """server -> tool -> (hints, class) from the README's annotation table."""
    values = {"true": True, "false": False, "—": None}
    table: dict[str, dict[str, tuple[Hints, str]]] = {}
    for line in README.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 6 or cells[0] not in SERVERS:
            continue
        server, tool, read_only, destructive, idempotent, klass = cells
        hints = (values[read_only], values[destructive], values[idempotent])
        table.setdefault(server, {})[tool.strip("`")] = (hints, klass)
    return table


def run_session(
    argv: list[str],
    errlog: Path,
    body: Callable[[ClientSession], Awaitable[T]],
) -> T:
    """Start the server from `argv` over stdio, initialize, run `body`, shut down (bounded)."""

    async def main() -> T:
        params = StdioServerParameters(command=argv[0], args=argv[1:])
        with anyio.fail_after(SESSION_TIMEOUT), errlog.open("a", encoding="utf-8") as err:
            async with stdio_client(params, errlog=err) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await body(session)

    return anyio.run(main)


async def list_all_tools(session: ClientSession) -> list[types.Tool]:
    """Every page of tools/list."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        result = await session.list_tools(params=params)
        tools.extend(result.tools)
        cursor = result.next_cursor
        if not cursor:
            return tools


def hints_of(tool: types.Tool) -> Hints:
    a = tool.annotations
    if a is None:
        return (None, None, None)
    return (a.read_only_hint, a.destructive_hint, a.idempotent_hint)


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def call_ok(session: ClientSession, tool: str, args: dict[str, Any]) -> types.CallToolResult:
    result = await session.call_tool(tool, args)
    assert not result.is_error, f"{tool} failed: {text_of(result)}"
    return result


def test_readme_table_covers_every_server_and_agrees_with_rule_c3():
    table = readme_table()
    assert set(table) == set(SERVERS)
    for server, tools in table.items():
        for tool, ((read_only, destructive, _), klass) in tools.items():
            # C3: readOnlyHint true -> read; readOnlyHint false or destructiveHint true -> write
            expected = (
                "read"
                if read_only is True
                else "write"
                if read_only is False or destructive is True
                else "(next rule)"
            )
            assert klass == expected, (server, tool)
    assert table["memory"]["create_entities"] == ((False, False, False), "write")
    assert table["memory"]["read_graph"] == ((True, False, True), "read")
    assert table["filesystem"]["edit_file"] == ((False, True, False), "write")
    assert table["git"]["git_commit"] == ((False, False, False), "write")
    assert {klass for _, klass in table["time"].values()} == {"read"}


@pytest.mark.parametrize("server", sorted(SERVERS))
def test_server_lists_exactly_the_tools_and_annotations_in_the_readme(request, tmp_path, server):
    argv = request.getfixturevalue(SERVERS[server])
    tools = run_session(argv, tmp_path / "server.stderr", list_all_tools)
    listed = {tool.name: hints_of(tool) for tool in tools}
    documented = {tool: hints for tool, (hints, _) in readme_table()[server].items()}
    assert len(tools) == len(listed), "a tool name is listed twice"
    assert listed == documented


def test_memory_create_entities_then_read_graph_shows_the_entity(
    memory_server_cmd, memory_file, tmp_path
):
    entity = {"name": "Booking-42", "entityType": "booking", "observations": ["guest: Ada"]}

    async def body(session: ClientSession) -> tuple[types.CallToolResult, types.CallToolResult]:
        created = await call_ok(session, "create_entities", {"entities": [entity]})
        graph = await call_ok(session, "read_graph", {})
        return created, graph

    created, graph = run_session(memory_server_cmd, tmp_path / "server.stderr", body)
    assert created.structured_content == {"entities": [entity]}
    assert graph.structured_content == {"entities": [entity], "relations": []}
    assert json.loads(text_of(graph)) == {"entities": [entity], "relations": []}
    # The fixture's MEMORY_FILE_PATH is honoured: the graph lives in the test's tmp dir.
    lines = [json.loads(line) for line in memory_file.read_text().splitlines() if line.strip()]
    assert lines == [{"type": "entity", **entity}]


def test_memory_absorbs_a_repeated_create_entities(memory_server_cmd, memory_file, tmp_path):
    # Baseline for the proxy tests: server-memory's state cannot show a duplicate write.
    entity = {"name": "Booking-7", "entityType": "booking", "observations": []}

    async def body(session: ClientSession) -> tuple[Any, Any, Any]:
        first = await call_ok(session, "create_entities", {"entities": [entity]})
        second = await call_ok(session, "create_entities", {"entities": [entity]})
        graph = await call_ok(session, "read_graph", {})
        return first.structured_content, second.structured_content, graph.structured_content

    first, second, graph = run_session(memory_server_cmd, tmp_path / "server.stderr", body)
    assert first == {"entities": [entity]}
    assert second == {"entities": []}
    assert graph == {"entities": [entity], "relations": []}


def test_filesystem_repeated_edit_file_is_applied_twice(
    filesystem_server_cmd, filesystem_root, tmp_path
):
    # Baseline: a repeated edit_file is a duplicate that shows in the file's content.
    target = filesystem_root / "note.txt"
    edit = {"path": str(target), "edits": [{"oldText": "one", "newText": "one two"}]}

    async def body(session: ClientSession) -> str:
        await call_ok(session, "write_file", {"path": str(target), "content": "one\n"})
        await call_ok(session, "edit_file", edit)
        await call_ok(session, "edit_file", edit)
        return text_of(await call_ok(session, "read_text_file", {"path": str(target)}))

    content = run_session(filesystem_server_cmd, tmp_path / "server.stderr", body)
    assert content == "one two two\n"
    assert target.read_text() == "one two two\n"


def test_filesystem_refuses_paths_outside_its_allowed_directory(filesystem_server_cmd, tmp_path):
    outside = tmp_path / "outside.txt"

    async def body(session: ClientSession) -> types.CallToolResult:
        return await session.call_tool("write_file", {"path": str(outside), "content": "x"})

    result = run_session(filesystem_server_cmd, tmp_path / "server.stderr", body)
    assert result.is_error
    assert not outside.exists()


def test_git_commit_after_add_creates_one_commit_and_a_repeated_branch_is_rejected(
    git_server_cmd, git_repo, tmp_path
):
    (git_repo / "booking.txt").write_text("room 12\n", encoding="utf-8")
    repo = str(git_repo)

    async def body(session: ClientSession) -> tuple[types.CallToolResult, types.CallToolResult]:
        await call_ok(session, "git_add", {"repo_path": repo, "files": ["booking.txt"]})
        await call_ok(session, "git_commit", {"repo_path": repo, "message": "book room 12"})
        await call_ok(session, "git_create_branch", {"repo_path": repo, "branch_name": "b1"})
        again = await session.call_tool(
            "git_create_branch", {"repo_path": repo, "branch_name": "b1"}
        )
        nothing_staged = await session.call_tool(
            "git_commit", {"repo_path": repo, "message": "again"}
        )
        return again, nothing_staged

    again, nothing_staged = run_session(git_server_cmd, tmp_path / "server.stderr", body)
    assert again.is_error and "already exists" in text_of(again)
    assert nothing_staged.is_error
    log = subprocess.run(
        ["git", "log", "--format=%s"], cwd=git_repo, capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert [subject for subject in log if subject] == ["book room 12", "initial commit"]


def test_time_server_answers_in_utc(time_server_cmd, tmp_path):
    async def body(session: ClientSession) -> types.CallToolResult:
        return await call_ok(session, "get_current_time", {"timezone": "UTC"})

    result = run_session(time_server_cmd, tmp_path / "server.stderr", body)
    answer = json.loads(text_of(result))
    assert answer["timezone"] == "UTC"
    assert answer["datetime"].endswith("+00:00")


def test_everything_echo_returns_the_message(everything_server_cmd, tmp_path):
    async def body(session: ClientSession) -> str:
        return text_of(await call_ok(session, "echo", {"message": "ping ✓"}))

    assert run_session(everything_server_cmd, tmp_path / "server.stderr", body) == "Echo: ping ✓"

"""U4: which of the tools an agent offers its model are the MCP server's (runner/models/toolnames.py)."""

from __future__ import annotations

import pytest

from runner.models.toolnames import mcp_tool_names

UPSTREAM = ["create_booking", "search_bookings", "read_file", "fetch"]
SERVER = ("agent-harness",)


@pytest.mark.parametrize(
    "shape",
    ["mcp__agent-harness__{}", "agent-harness__{}", "agent-harness_{}", "mcp_agent-harness_{}",
     "mcp__agent_harness__{}", "agentharness_{}", "mcp__{}", "{}"],
)  # fmt: skip
def test_u4_each_agents_name_shape_is_matched_to_the_upstreams_tool(shape: str) -> None:
    offered = [shape.format(t) for t in UPSTREAM[:2]]
    assert mcp_tool_names(offered, UPSTREAM, SERVER) == dict(
        zip(offered, UPSTREAM[:2], strict=True)
    )


def test_u4_the_agents_own_tools_are_not_the_servers() -> None:
    # a built-in whose name ends like an upstream tool's behind a word that names no server
    offered = ["web_fetch", "run_shell_command", "write_file", "todo_write", "Bash"]
    assert mcp_tool_names(offered, UPSTREAM, SERVER) == {}


def test_u4_a_bare_name_twinned_by_a_prefixed_one_is_the_agents_own() -> None:
    # Gemini CLI and qwen-code keep a built-in `read_file` and prefix the server's namesake
    offered = ["read_file", "agent-harness__read_file", "create_booking"]
    assert mcp_tool_names(offered, UPSTREAM, SERVER) == {
        "agent-harness__read_file": "read_file",
        "create_booking": "create_booking",
    }


def test_u4_the_server_name_the_user_gave_counts_and_the_longest_tool_wins() -> None:
    upstream = ["booking", "create_booking"]
    assert mcp_tool_names(["booking_create_booking"], upstream, ("booking",)) == {
        "booking_create_booking": "create_booking"
    }
    assert mcp_tool_names(["booking_create_booking"], upstream, ("other",)) == {}

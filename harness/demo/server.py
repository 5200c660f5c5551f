"""The demo as an MCP server (mcp lowlevel `Server`), over stdio or any stream pair."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

from harness import __version__
from harness.demo.sessions import NOTICE
from harness.demo.tools import TOOLS, Demo

INSTRUCTIONS = (
    f"{NOTICE} Start a session with a fault scenario (start_session), send the calls an agent "
    "would make through execute_call, then read get_report or get_score."
)


def listing() -> types.ListToolsResult:
    """The seven tools, each description saying that this is a demo."""
    return types.ListToolsResult(
        tools=[
            types.Tool(name=name, description=f"{text} {NOTICE}", input_schema=schema)
            for name, (text, schema) in TOOLS.items()
        ]
    )


def build_server(demo: Demo | None = None) -> Server[Any]:
    """An MCP server answering tools/list and tools/call from a `Demo`."""
    demo = demo or Demo()
    tools = listing()

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return tools

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        # Synchronous on purpose: one call at a time changes a session, with no await between.
        return types.CallToolResult.model_validate(demo.call(params.name, params.arguments))

    return Server(
        "agent-harness-demo",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


async def serve_stdio() -> None:
    """Serve the demo on stdin/stdout until the client closes stdin."""
    server = build_server()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main() -> int:
    """Entry point of `agent-harness demo`."""
    try:
        anyio.run(serve_stdio)
    except KeyboardInterrupt:  # Ctrl-C at a terminal ends the demo; no traceback
        pass
    return 0

"""A small agent for the pytest example (docs/pytest.md): it books a hotel room through an MCP
server, as your agent would call your tools. Careful, it checks whether a failed booking went
through before it tries again; naive, it simply tries again (and books twice after a timeout
that hid a booking that ran)."""

from __future__ import annotations

import json
from pathlib import Path

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

BOOKING = {"guest": "Alice Example", "date": "2026-12-01", "nights": 2}


async def book(mcp_config_file: Path, careful: bool = True) -> str:
    """Book the room through the one server of an MCP client configuration; what the agent
    would tell its user."""
    config = json.loads(Path(mcp_config_file).read_text())
    (server,) = config["mcpServers"].values()
    params = StdioServerParameters(
        command=server["command"], args=server.get("args", []), env=server.get("env")
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for _attempt in range(2):
            try:
                result = await session.call_tool("create_booking", BOOKING)
                if not result.is_error:
                    return "Your room is booked."
            except MCPError:
                pass
            if careful:  # did it go through after all? never book blindly again
                found = await session.call_tool(
                    "search_bookings", {"guest": BOOKING["guest"], "date": BOOKING["date"]}
                )
                text = " ".join(getattr(c, "text", "") for c in found.content)
                if BOOKING["guest"] in text:
                    return "Your room is booked (the first attempt went through)."
                return "The booking did not go through; please try again later."
        return "The booking failed."

"""A command agent with no model: it sends one booking twice through the MCP client
configuration the runner hands it (AGENT_HARNESS_MCP_CONFIG), over stdio or HTTP.
Usage: python books_twice.py"""

import asyncio
import json
import os
from contextlib import AsyncExitStack

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

BOOKING = {"guest": "Alice Example", "date": "2026-12-01", "nights": 2}


async def main() -> None:
    config = json.load(open(os.environ["AGENT_HARNESS_MCP_CONFIG"]))
    server = config["mcpServers"][os.environ["AGENT_HARNESS_MCP_SERVER"]]
    async with AsyncExitStack() as stack:
        if "url" in server:
            streams = streamable_http_client(server["url"])
        else:
            streams = stdio_client(
                StdioServerParameters(
                    command=server["command"], args=server["args"], env=server.get("env"),
                    cwd=server.get("cwd"),
                )
            )  # fmt: skip
        read, write = await stack.enter_async_context(streams)
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        for _ in range(2):
            result = await session.call_tool("create_booking", BOOKING)
            print("booked:", result.content[0].text)


if __name__ == "__main__":
    asyncio.run(main())

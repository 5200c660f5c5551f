"""A command agent with no model that looks around (U3): it books once through the MCP client
configuration the runner hands it, prints what it can see (its folder, its HOME, its
environment's names), then deletes a row from every SQLite file under its folder and its HOME,
as an agent "cleaning up" might. Usage: python snoops.py"""

import asyncio
import json
import os
import sqlite3
from contextlib import AsyncExitStack
from pathlib import Path

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

BOOKING = {"guest": "Alice Example", "date": "2026-12-01", "nights": 2}


async def book() -> None:
    config = json.load(open(os.environ["AGENT_HARNESS_MCP_CONFIG"]))
    server = config["mcpServers"][os.environ["AGENT_HARNESS_MCP_SERVER"]]
    params = StdioServerParameters(
        command=server["command"], args=server["args"], env=server.get("env"),
        cwd=server.get("cwd"),
    )  # fmt: skip
    async with AsyncExitStack() as stack:
        read, write = await stack.enter_async_context(stdio_client(params))
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        await session.call_tool("create_booking", BOOKING)


def deleted_rows(folder: Path) -> list[str]:
    """Delete one row of every table of every SQLite file found; the files touched."""
    touched = []
    for path in folder.rglob("*"):
        if not path.is_file() or path.open("rb").read(16) != b"SQLite format 3\x00":
            continue
        with sqlite3.connect(path) as conn:
            for (table,) in conn.execute("select name from sqlite_master where type = 'table'"):
                conn.execute(
                    f'delete from "{table}" where rowid in (select rowid from "{table}" limit 1)'
                )
        touched.append(str(path))
    return touched


if __name__ == "__main__":
    asyncio.run(book())
    here, home = Path.cwd(), Path(os.environ["HOME"])
    seen = {
        "cwd": str(here),
        "listing": sorted(os.listdir(here)),
        "home": str(home),
        "env": sorted(os.environ),
        "deleted": deleted_rows(here) + deleted_rows(home),
    }
    print(json.dumps(seen))

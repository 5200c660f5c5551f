"""The least a command agent does to count as one that ran: it opens its MCP session over
streamable HTTP at AGENT_HARNESS_MCP_URL (initialize, then notifications/initialized) and
lists the tools, with the standard library only (no SDK to import: fast to start). Tests'
agents run it first (`runpy.run_path(this file)`), then do what they are about."""

import json
import os
import urllib.request

URL = os.environ["AGENT_HARNESS_MCP_URL"]
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def post(body: dict, session: str | None = None) -> tuple[str | None, bytes]:
    """POST one message; the session id the answer names and the answer's body."""
    headers = dict(HEADERS)
    if session is not None:
        headers |= {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-06-18"}
    request = urllib.request.Request(URL, json.dumps(body).encode(), headers, method="POST")
    with urllib.request.urlopen(request, timeout=30) as answer:
        return answer.headers.get("Mcp-Session-Id"), answer.read()


init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "handshake", "version": "1"}}}  # fmt: skip
sid, _ = post(init)
post({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, sid)

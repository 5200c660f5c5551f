"""The demo MCP server (D1): seven tools around a simulated backend. A demo, not a measurement.

sessions   a demo session (Session + simulated backend) and the store of at most 500
tools      the seven tools: schemas, argument checks, answers, the audit file
server     the mcp lowlevel server over stdio
"""

from harness.demo.server import build_server, main
from harness.demo.sessions import MAX_SESSIONS, NOTICE, DemoSession, SessionStore
from harness.demo.tools import AUDIT_PATH, TOOLS, Demo

__all__ = [
    "AUDIT_PATH",
    "MAX_SESSIONS",
    "NOTICE",
    "TOOLS",
    "Demo",
    "DemoSession",
    "SessionStore",
    "build_server",
    "main",
]

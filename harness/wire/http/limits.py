"""The listener's bounds (V10), apart from the listener so that the flag parser can name them
without importing aiohttp and the MCP SDK."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ListenLimits:
    """How much the listener takes on (flags and defaults: `agent-harness proxy --help`)."""

    __pydantic_config__ = {"extra": "forbid"}  # a proxy's config file names only these

    max_sessions: int = 32  # each session holds an upstream (a process, for a command)
    session_idle_s: float = 600.0  # a session without a request this long ends
    max_connections: int = 256
    header_timeout_s: float = 10.0  # a request's head, once begun, must be complete by then
    body_timeout_s: float = 30.0  # a request's body must be complete by then
    idle_timeout_s: float = 60.0  # a connection without a request in progress is closed

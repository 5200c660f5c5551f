"""F7: HTTP 404 for the agent's session id (HTTP agent with a session)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from harness.faults.base import HttpFault, Wire, error_result


@dataclass(frozen=True)
class SessionExpired(HttpFault):
    """F7: HTTP 404 for the agent's session id; nothing runs; the session is gone (the agent
    must initialize a new one)."""

    name: ClassVar[str] = "F7"
    seen_as: ClassVar[str] = "a 404 that ended its session"
    brief: ClassVar[str] = (
        "404 on the session id, i.e. session expired (HTTP agent with a session: not 2026-07-28)"
    )
    summary: ClassVar[str] = (
        "HTTP 404 for the session id: the session expired, nothing runs; "
        "the agent must start a new session."
    )
    wire: ClassVar[Wire] = Wire.ANSWERS
    needs_session: ClassVar[bool] = True  # a 2026-07-28 agent has no session to lose
    status: ClassVar[int] = 404

    def answer(self) -> dict[str, Any]:
        return error_result("HTTP 404 Not Found: the session expired; start a new session.")

    def error(self) -> tuple[int, str]:
        return -32001, "Session not found"

    def hints(self) -> dict[str, Any]:
        return {"http_status": self.status, "session_expired": True}

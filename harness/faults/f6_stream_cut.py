"""F6: the agent's response stream closes after the write ran (HTTP agent)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from harness.faults.base import HttpFault, Wire, error_result


@dataclass(frozen=True)
class StreamCut(HttpFault):
    """F6: the write runs upstream, then the agent's response stream closes without the answer
    (2026-07-28: the client must re-issue the request)."""

    name: ClassVar[str] = "F6"
    seen_as: ClassVar[str] = "a response stream that closed without an answer"
    brief: ClassVar[str] = "response stream closed after the write ran (HTTP agent)"
    summary: ClassVar[str] = (
        "The write runs upstream, then the agent's response stream "
        "closes without the answer (the client re-issues it)."
    )
    duplicate_when: ClassVar[str] = "the re-issued request is executed again"
    wire: ClassVar[Wire] = Wire.CUTS

    def answer(self) -> dict[str, Any]:
        return error_result("Error: the response stream closed before the answer came.")

    def error(self) -> tuple[int, str]:
        return -32000, "the response stream closed before the answer came"

    def hints(self) -> dict[str, Any]:
        return {"stream_cut": True}

"""F1: a timeout after the write ran upstream (a ghost write)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from harness.faults.base import Fault, Wire, error_result


@dataclass(frozen=True)
class GhostTimeout(Fault):
    """F1: the write runs upstream, the agent is told it timed out (S2)."""

    name: ClassVar[str] = "F1"
    seen_as: ClassVar[str] = "a timeout"
    brief: ClassVar[str] = "timeout after the write ran (ghost write)"
    summary: ClassVar[str] = "The write runs upstream, the answer is a timeout (a ghost write)."
    duplicate_when: ClassVar[str] = "the same operation is executed again"
    wire: ClassVar[Wire] = Wire.REPLACES
    # B1: NAIVE fails: a re-send after the ghost timeout runs the write twice.
    reference_verdicts: ClassVar[Mapping[str, str]] = {"CAREFUL": "PASS", "NAIVE": "FAIL"}

    def answer(self) -> dict[str, Any]:
        # No duration: the answer comes at once, or after --fault-delay (S11), never after
        # some number of milliseconds the text could name truthfully for both.
        return error_result("Error: the request timed out before the server answered.")

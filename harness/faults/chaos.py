"""Chaos mode (S9): a generic server error on any call, with probability error_rate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from harness.faults.base import Fault, Wire, error_result


@dataclass(frozen=True)
class ChaosError(Fault):
    """S9: a generic server error instead of the real answer; never a ghost write."""

    name: ClassVar[str] = "chaos"
    seen_as: ClassVar[str] = "a generic server error"
    brief: ClassVar[str] = "a generic server error with probability error_rate"
    summary: ClassVar[str] = (
        "With probability error_rate a generic server error; the call "
        "does not run. Never a ghost write."
    )
    duplicate_when: ClassVar[str] = "an operation is executed twice"
    applies_to: ClassVar[str] = "every call, reads included"
    wire: ClassVar[Wire] = Wire.ANSWERS
    scenario: ClassVar[bool] = False

    def answer(self) -> dict[str, Any]:
        return error_result(
            "HTTP 503 Service Unavailable: the server is temporarily unable to handle the request."
        )

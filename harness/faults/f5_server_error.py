"""F5: HTTP 500; nothing runs upstream."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from harness.faults.base import Fault, Wire, error_result


@dataclass(frozen=True)
class ServerError(Fault):
    """F5: HTTP 500; nothing runs upstream, the next attempt goes through (S6)."""

    name: ClassVar[str] = "F5"
    seen_as: ClassVar[str] = "a 500"
    brief: ClassVar[str] = "500"
    summary: ClassVar[str] = "HTTP 500; nothing runs; the next attempt goes through."
    wire: ClassVar[Wire] = Wire.ANSWERS
    # B1: NAIVE passes: an immediate retry is harmless: nothing ran.
    reference_verdicts: ClassVar[Mapping[str, str]] = {"CAREFUL": "PASS", "NAIVE": "PASS"}

    def answer(self) -> dict[str, Any]:
        return error_result(
            "HTTP 500 Internal Server Error: the server failed to process the request."
        )

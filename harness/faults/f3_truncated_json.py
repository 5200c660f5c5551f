"""F3: an answer of truncated JSON; nothing runs upstream."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from harness.faults.base import Fault, Wire, error_result


@dataclass(frozen=True)
class TruncatedJson(Fault):
    """F3: an answer cut off after two bytes of JSON; nothing runs upstream (S4)."""

    name: ClassVar[str] = "F3"
    seen_as: ClassVar[str] = "a truncated JSON answer"
    brief: ClassVar[str] = "truncated JSON"
    summary: ClassVar[str] = 'The answer is truncated JSON (`{"`); nothing runs.'
    wire: ClassVar[Wire] = Wire.ANSWERS
    # B1: NAIVE passes: an immediate retry is harmless: nothing ran.
    reference_verdicts: ClassVar[Mapping[str, str]] = {"CAREFUL": "PASS", "NAIVE": "PASS"}

    def answer(self) -> dict[str, Any]:
        return error_result('{"')

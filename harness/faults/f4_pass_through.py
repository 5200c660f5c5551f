"""F4: two writes passed unchanged; the harness deduplicates nothing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from harness.faults.base import Fault, Wire


@dataclass(frozen=True)
class PassThrough(Fault):
    """F4: the write passes unchanged; the harness injects nothing and deduplicates nothing."""

    name: ClassVar[str] = "F4"
    seen_as: ClassVar[str] = "its own answers, passed through"
    brief: ClassVar[str] = "two writes passed unchanged"
    summary: ClassVar[str] = (
        "Nothing is injected; both writes pass unchanged and the harness does not deduplicate."
    )
    duplicate_when: ClassVar[str] = "the same operation is executed twice"
    applies_to: ClassVar[str] = "first two writes"
    wire: ClassVar[Wire] = Wire.PASSES
    # B1: NAIVE fails: it books again when asked again.
    reference_verdicts: ClassVar[Mapping[str, str]] = {"CAREFUL": "PASS", "NAIVE": "FAIL"}
    writes: ClassVar[int] = 2

    def answer(self) -> None:
        return None

"""F2: HTTP 429 with retry_after; nothing runs upstream."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from harness.faults.base import RETRY_AFTER, Fault, Param, Wire, error_result


@dataclass(frozen=True)
class RateLimited(Fault):
    """F2: HTTP 429 with retry_after; nothing runs upstream (S3)."""

    name: ClassVar[str] = "F2"
    seen_as: ClassVar[str] = "a 429 with retry_after"
    wait_words: ClassVar[tuple[str, str]] = ('"429" or "rate limited"', "retry_after")
    brief: ClassVar[str] = "429 with retry_after"
    summary: ClassVar[str] = "HTTP 429 with retry_after; nothing runs."
    duplicate_when: ClassVar[str] = "the same operation is sent again before retry_after has passed"
    wire: ClassVar[Wire] = Wire.ANSWERS
    # B1: NAIVE fails: an immediate re-send ignores retry_after.
    reference_verdicts: ClassVar[Mapping[str, str]] = {"CAREFUL": "PASS", "NAIVE": "FAIL"}
    retry_window: ClassVar[bool] = True
    params: ClassVar[tuple[Param, ...]] = (RETRY_AFTER,)
    retry_after_s: float = RETRY_AFTER.default

    def answer(self) -> dict[str, Any]:
        seconds = self.retry_after_s
        shown = int(seconds) if float(seconds).is_integer() else seconds
        body = json.dumps(
            {"error": "rate_limited", "status": 429, "retry_after": shown},
            separators=(",", ":"),
        )
        return error_result(f"HTTP 429 Too Many Requests: retry_after {shown} seconds. {body}")

"""F8: HTTP 503 with a Retry-After header (HTTP agent)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from harness.faults.base import RETRY_AFTER, HttpFault, Param, Wire, error_result


@dataclass(frozen=True)
class Unavailable(HttpFault):
    """F8: HTTP 503 with a Retry-After header; nothing runs."""

    name: ClassVar[str] = "F8"
    seen_as: ClassVar[str] = "a 503 with Retry-After"
    wait_words: ClassVar[tuple[str, str]] = ('"503" or "Service Unavailable"', "Retry-After")
    brief: ClassVar[str] = "503 with a Retry-After header (HTTP agent)"
    summary: ClassVar[str] = "HTTP 503 with a Retry-After header; nothing runs."
    duplicate_when: ClassVar[str] = "the same operation is sent again before Retry-After has passed"
    wire: ClassVar[Wire] = Wire.ANSWERS
    retry_window: ClassVar[bool] = True
    status: ClassVar[int] = 503
    params: ClassVar[tuple[Param, ...]] = (RETRY_AFTER,)
    retry_after_s: float = RETRY_AFTER.default

    def _seconds(self) -> str:
        return str(max(1, round(self.retry_after_s)))  # Retry-After takes whole seconds

    def answer(self) -> dict[str, Any]:
        return error_result(f"HTTP 503 Service Unavailable: Retry-After {self._seconds()}.")

    def error(self) -> tuple[int, str]:
        return -32000, f"Service Unavailable: retry after {self._seconds()} seconds"

    def hints(self) -> dict[str, Any]:
        return {"http_status": self.status, "http_headers": {"Retry-After": self._seconds()}}

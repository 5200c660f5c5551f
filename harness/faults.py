"""Faults F1-F5 and chaos (S1-S11): each fault is its parameters plus one method.

`FaultPlan.decide()` is asked once per tool call, synchronously, in the order calls arrive, so
of two writes sent in parallel exactly one is "the first" (S8). Whether a fault lets the call
run upstream first (F1, F4) or answers instead of the upstream (F2, F3, F5, chaos) is the
fault's `executes_upstream` property.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any, ClassVar

from harness.errors import UsageError

SCENARIOS = ("F1", "F2", "F3", "F4", "F5")
MAX_RETRY_AFTER_S = 86_400


def _error_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


@dataclass(frozen=True)
class Fault:
    """A fault applied to one call; `answer()` is what the agent gets instead of the real one."""

    name: ClassVar[str]
    executes_upstream: ClassVar[bool]
    injects: ClassVar[bool] = True
    retry_after_s: float | None = None

    def answer(self) -> dict[str, Any] | None:
        """The tool result to send the agent; None means pass the upstream's answer through."""
        raise NotImplementedError


@dataclass(frozen=True)
class GhostTimeout(Fault):
    """F1: the write runs upstream, the agent is told it timed out (S2)."""

    name: ClassVar[str] = "F1"
    executes_upstream: ClassVar[bool] = True

    def answer(self) -> dict[str, Any]:
        # No duration: the answer comes at once, or after --fault-delay (S11), never after
        # some number of milliseconds the text could name truthfully for both.
        return _error_result("Error: the request timed out before the server answered.")


@dataclass(frozen=True)
class RateLimited(Fault):
    """F2: HTTP 429 with retry_after; nothing runs upstream (S3)."""

    name: ClassVar[str] = "F2"
    executes_upstream: ClassVar[bool] = False

    def answer(self) -> dict[str, Any]:
        seconds = self.retry_after_s if self.retry_after_s is not None else 60
        shown = int(seconds) if float(seconds).is_integer() else seconds
        body = json.dumps(
            {"error": "rate_limited", "status": 429, "retry_after": shown},
            separators=(",", ":"),
        )
        return _error_result(f"HTTP 429 Too Many Requests: retry_after {shown} seconds. {body}")


@dataclass(frozen=True)
class TruncatedJson(Fault):
    """F3: an answer cut off after two bytes of JSON; nothing runs upstream (S4)."""

    name: ClassVar[str] = "F3"
    executes_upstream: ClassVar[bool] = False

    def answer(self) -> dict[str, Any]:
        return _error_result('{"')


@dataclass(frozen=True)
class PassThrough(Fault):
    """F4: the write passes unchanged; the harness injects nothing and deduplicates nothing."""

    name: ClassVar[str] = "F4"
    executes_upstream: ClassVar[bool] = True
    injects: ClassVar[bool] = False

    def answer(self) -> None:
        return None


@dataclass(frozen=True)
class ServerError(Fault):
    """F5: HTTP 500; nothing runs upstream, the next attempt goes through (S6)."""

    name: ClassVar[str] = "F5"
    executes_upstream: ClassVar[bool] = False

    def answer(self) -> dict[str, Any]:
        return _error_result(
            "HTTP 500 Internal Server Error: the server failed to process the request."
        )


@dataclass(frozen=True)
class ChaosError(Fault):
    """S9: a generic server error instead of the real answer; never a ghost write."""

    name: ClassVar[str] = "chaos"
    executes_upstream: ClassVar[bool] = False

    def answer(self) -> dict[str, Any]:
        return _error_result(
            "HTTP 503 Service Unavailable: the server is temporarily unable to handle the request."
        )


@dataclass(frozen=True)
class PlanConfig:
    """The fault flags, validated once at the edge."""

    scenario: str | None = None
    chaos_error_rate: float | None = None
    seed: int | None = None
    retry_after_s: float = 60
    fault_delay_ms: int = 0

    def __post_init__(self) -> None:
        if self.scenario is not None and self.scenario not in SCENARIOS:
            raise UsageError(
                f"unknown scenario {self.scenario!r}; use one of {', '.join(SCENARIOS)}"
            )
        if self.scenario is not None and self.chaos_error_rate is not None:
            raise UsageError("a scenario and chaos mode exclude each other")
        if self.chaos_error_rate is not None and not 0 <= self.chaos_error_rate <= 1:
            raise UsageError("--error-rate must be between 0 and 1")
        if not 0 < self.retry_after_s <= MAX_RETRY_AFTER_S:
            raise UsageError(f"--retry-after must be more than 0 and at most {MAX_RETRY_AFTER_S}")
        if self.fault_delay_ms < 0:
            raise UsageError("--fault-delay must not be negative")


class FaultPlan:
    """Which fault, if any, each call gets; consumed only by calls it really applied to (S7)."""

    def __init__(self, config: PlanConfig) -> None:
        self.config = config
        self._random = random.Random(config.seed)
        self._done = False  # F1-F3, F5: applied once
        self._f1_pending: int | None = None  # the seq of the write F1 is waiting on
        self._f4_left = 2

    @property
    def is_chaos(self) -> bool:
        return self.config.chaos_error_rate is not None

    def decide(self, seq: int, tool_class: str, listed: bool) -> Fault | None:
        """The fault for a call arriving now (S1: writes only, except chaos which takes all)."""
        config = self.config
        if self.is_chaos:
            if listed and self._random.random() < config.chaos_error_rate:
                return ChaosError()
            return None
        if config.scenario is None or tool_class != "write" or not listed:
            return None  # S7: an unknown tool leaves the scenario armed
        if config.scenario == "F4":
            if self._f4_left > 0:
                self._f4_left -= 1
                return PassThrough()
            return None
        if self._done or self._f1_pending is not None:
            return None
        if config.scenario == "F1":
            self._f1_pending = seq  # decided when the upstream has answered
            return GhostTimeout()
        self._done = True
        if config.scenario == "F2":
            return RateLimited(retry_after_s=config.retry_after_s)
        return TruncatedJson() if config.scenario == "F3" else ServerError()

    def upstream_answered(self, seq: int, executed: bool) -> bool:
        """F1: does the ghost apply to this call? Only if the upstream executed it (S7)."""
        if self._f1_pending != seq:
            return False
        self._f1_pending = None
        if executed:
            self._done = True
        return executed

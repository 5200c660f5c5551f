"""The fault plan (S1, S7, S8): which fault, if any, each call of a session gets.

`FaultPlan.decide()` is asked once per tool call, synchronously, in the order calls arrive, so
of two writes sent in parallel exactly one is "the first" (S8).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import harness.faults.registry as registry
from harness.base.errors import UsageError
from harness.faults.base import RETRY_AFTER, Fault, shown
from harness.faults.chaos import ChaosError
from harness.faults.f9_added_latency import LATENCY
from harness.faults.registry import FAULTS


@dataclass(frozen=True)
class PlanConfig:
    """The fault flags, validated once at the edge."""

    __pydantic_config__ = {"extra": "forbid"}  # a proxy's config file names only these

    scenario: str | None = None
    chaos_error_rate: float | None = None
    seed: int | None = None
    retry_after_s: float = RETRY_AFTER.default  # one field per Param in PARAMS
    latency_ms: int = LATENCY.default
    fault_delay_ms: int = 0

    def __post_init__(self) -> None:
        # The one check of a fault plan (issue 33): the proxy's flags, the config file the
        # runner hands a proxy and an in-process proxy all arrive here; a spec and the demo ask
        # the same rules for the parts they name in their own words (`Param.problem`,
        # `error_rate_problem`).
        scenarios = registry.SCENARIOS  # read now: a fault may have been registered since
        if self.scenario is not None and self.scenario not in scenarios:
            raise UsageError(
                f"--scenario must be one of {', '.join(scenarios)}, got {self.scenario!r}"
            )
        if self.scenario is not None and self.chaos_error_rate is not None:
            raise UsageError("a scenario and chaos mode exclude each other")
        if self.chaos_error_rate is not None:
            problem = error_rate_problem(self.chaos_error_rate)
            if problem is not None:
                raise UsageError(problem)
        for param in registry.PARAMS:
            problem = param.problem(getattr(self, param.field))
            if problem is not None:
                raise UsageError(problem)
        if self.fault_delay_ms < 0:
            raise UsageError("--fault-delay must not be negative")


def error_rate_problem(rate: float, name: str = "--error-rate") -> str | None:
    """S9: why `rate` is no chaos error rate (a probability), or None; named as `name`."""
    if not 0 <= rate <= 1:  # `not`: NaN is refused too
        return f"{name} must be between 0 and 1, got {shown(rate)}"
    return None


class FaultPlan:
    """Which fault, if any, each call gets; consumed only by calls it really applied to (S7)."""

    def __init__(self, config: PlanConfig) -> None:
        self.config = config
        self._random = random.Random(config.seed)
        self._done = False  # F1-F3, F5: applied once
        self._pending: int | None = None  # the seq of the write F1/F6/F9 waits on
        kind = FAULTS.get(config.scenario or "")
        self._passes_left = kind.writes if kind is not None else 0  # F4: two writes

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
        kind = FAULTS[config.scenario]
        if not kind.injects:
            if self._passes_left > 0:
                self._passes_left -= 1
                return kind()
            return None
        if self._done or self._pending is not None:
            return None
        fault = kind(**{p.field: getattr(config, p.field) for p in kind.params})
        if kind.after_execution:
            self._pending = seq  # decided when the upstream has answered
        else:
            self._done = True
        return fault

    def not_applied(self, seq: int) -> None:
        """The fault decided for call `seq` meant nothing to its agent and was not applied; the
        scenario is spent all the same (one fault per run, never moved to a later call)."""
        self._done = True
        self._passes_left = 0
        if self._pending == seq:
            self._pending = None

    def upstream_answered(self, seq: int, executed: bool) -> bool:
        """F1, F6, F9: does the fault apply to this call? Only if the upstream executed it (S7)."""
        if self._pending != seq:
            return False
        self._pending = None
        if executed:
            self._done = True
        return executed

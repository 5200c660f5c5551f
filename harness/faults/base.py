"""What every fault is: `Fault` (and `HttpFault`, a fault only an HTTP agent can meet), its
parameters (`Param`) and the limits they share.

A fault is one class in one module of this package (F1 in f1_ghost_timeout.py, ...), listed in
the registry (harness.faults.registry).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

MAX_RETRY_AFTER_S = 86_400
SESSION_REVISIONS = ("2025-06-18", "2025-11-25")  # the protocol revisions with a session
MAX_LATENCY_MS = 600_000  # ten minutes: longer than any client waits for one answer


@dataclass(frozen=True)
class Param:
    """One parameter of a fault: the same value under its names in the plan (`field`), a
    spec's scenario mapping and labels (`key`), the proxy's flags (`flag`) and the report."""

    field: str  # PlanConfig's and the fault's attribute, e.g. retry_after_s
    key: str  # e.g. retry_after: `{F2: {retry_after: 1}}`, label `F2(retry_after=1)`
    flag: str  # e.g. --retry-after
    metavar: str
    kind: type[int] | type[float]
    default: int | float
    low: int | float  # the smallest value allowed (above it only, when `low_open`)
    high: int | float  # the largest value allowed
    unit: str  # seconds, milliseconds
    report_key: str  # the report's scenarioConfig key, e.g. retryAfterS
    help: str  # what the value does, for --help
    low_open: bool = False

    def bounds(self) -> str:
        """`above 0 and at most 86400 seconds`: the allowed values in words."""
        low = f"above {shown(self.low)}" if self.low_open else f"at least {shown(self.low)}"
        return f"{low} and at most {shown(self.high)} {self.unit}"

    def problem(self, value: float, name: str | None = None) -> str | None:
        """Why `value` is not allowed, or None: one sentence naming the parameter as the
        caller's user wrote it (`name`: a spec's `retry_after`), by default its flag."""
        name = name or self.flag
        low_ok = value > self.low if self.low_open else value >= self.low
        if not (low_ok and value <= self.high):  # `not`: NaN is refused too
            return f"{name} must be {self.bounds()}, got {shown(value)}"
        if self.kind is int and value != int(value):
            return f"{name} must be a whole number of {self.unit}, got {shown(value)}"
        return None

    def text(self, value: float) -> str:
        """The value as a flag takes it back exactly (a float keeps every digit)."""
        return str(int(value)) if self.kind is int else repr(float(value))


def shown(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


RETRY_AFTER = Param(
    field="retry_after_s", key="retry_after", flag="--retry-after", metavar="S", kind=float,
    default=60, low=0, low_open=True, high=MAX_RETRY_AFTER_S, unit="seconds",
    report_key="retryAfterS", help="seconds the 429 or 503 announces and that are checked",
)  # fmt: skip


def error_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


class Wire(StrEnum):
    """What a fault does to its call on the wire; each fault says one of these."""

    ANSWERS = "no: answers in place of the upstream"  # F2, F3, F5, F7, F8, chaos
    REPLACES = "yes, then answers in place of the real answer"  # F1: a ghost write
    CUTS = "yes, then closes the agent's response stream"  # F6: a ghost write over HTTP
    HOLDS = "yes, then holds the real answer back"  # F9
    PASSES = "yes, and changes nothing"  # F4


@dataclass(frozen=True)
class Fault:
    """A fault applied to one call; `answer()` is what the agent gets instead of the real one.

    A fault is one subclass in its own module, listed in the registry. It says what it does on
    the wire (`wire`), what the agent sees (`answer()`, `hold_ms()`; an HttpFault's `error()`
    and `hints()`), its parameters, and the verdict each reference agent of the self-test must
    get under it (`reference_verdicts`).
    """

    name: ClassVar[str]
    brief: ClassVar[str]  # a few words for --help
    summary: ClassVar[str]  # one line: what the agent sees and what really ran
    duplicate_when: ClassVar[str] = "the operation is executed twice afterwards"
    # E8: what the agent saw, as the report's sentences and patches name it ("a timeout")
    seen_as: ClassVar[str] = "an injected error"
    # E8, retry windows only: how the answer names itself and its wait, for the RATE_LIMIT
    # patch ('"429" or "rate limited"', "retry_after")
    wait_words: ClassVar[tuple[str, str]] = ("", "")
    applies_to: ClassVar[str] = "first write"
    wire: ClassVar[Wire]  # what it does on the wire; the four flags below follow from it
    # The call runs upstream before the agent is answered.
    executes_upstream: ClassVar[bool]
    # Applied only once the upstream has executed the call (S7: an upstream rejection, an
    # error or no answer leave the scenario armed for the next write).
    after_execution: ClassVar[bool]
    # The harness changes what the agent gets: its own answer, or (F9) the real one, late.
    # F4 only lets writes through.
    injects: ClassVar[bool]
    ghost: ClassVar[bool]  # the write ran, the agent is told it failed (J: ghost)
    retry_window: ClassVar[bool] = False  # the answer asks the agent to wait retry_after_s
    writes: ClassVar[int] = 1  # how many writes of a run it is applied to
    scenario: ClassVar[bool] = True  # chosen with --scenario (chaos is a mode of its own)
    http_only: ClassVar[bool] = False  # needs an agent on HTTP (--listen)
    needs_session: ClassVar[bool] = False  # needs a protocol session (not 2026-07-28)
    # The demo and the benchmark play it: they answer each call at once, one at a time.
    simulated: ClassVar[bool] = True
    params: ClassVar[tuple[Param, ...]] = ()  # its parameters; the instance has each `field`
    # B1: the verdict (PASS, FAIL, NOT_TESTED) each reference agent of `agent-harness
    # benchmark` must get under this fault, by the agent's name (CAREFUL, NAIVE). The benchmark
    # plays only `simulated` faults, and refuses one that does not say.
    reference_verdicts: ClassVar[Mapping[str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        wire = getattr(cls, "wire", None)
        if wire is None:  # a kind of fault (HttpFault), not a fault
            return
        cls.executes_upstream = wire is not Wire.ANSWERS
        cls.after_execution = wire in (Wire.REPLACES, Wire.CUTS, Wire.HOLDS)
        cls.injects = wire is not Wire.PASSES
        cls.ghost = wire in (Wire.REPLACES, Wire.CUTS)

    def answer(self) -> dict[str, Any] | None:
        """The tool result to send the agent; None means pass the upstream's answer through."""
        raise NotImplementedError

    def inapplicable(self, sessionless: str | None) -> str | None:
        """Why this fault means nothing to the agent, or None when it applies; `sessionless` is
        the revision of an agent without a session (2026-07-28), None for a session's agent."""
        if self.needs_session and sessionless is not None:
            revisions = ", ".join(SESSION_REVISIONS)
            return (f"{self.name} needs a session (protocol revisions {revisions}); the agent "
                    f"speaks {sessionless}, which has none")  # fmt: skip
        return None

    def hold_ms(self) -> int:
        """How long the upstream's real answer is held before it reaches the agent (HOLDS)."""
        return 0

    async def hold(self, cancelled: asyncio.Event) -> bool:
        """Hold the upstream's real answer for `hold_ms()` (F9). True once that time has
        passed; False as soon as `cancelled` is set (the client cancelled the call: the hold
        ends at once)."""
        if not self.hold_ms():
            return True
        try:
            await asyncio.wait_for(cancelled.wait(), self.hold_ms() / 1000)
        except TimeoutError:
            return True
        return False

    def values(self) -> dict[str, float]:
        """Its parameters' values by `Param.field`."""
        return {p.field: getattr(self, p.field) for p in self.params}


@dataclass(frozen=True)
class HttpFault(Fault):
    """A fault that exists only over HTTP (H2): the agent's HTTP answer itself carries it."""

    http_only: ClassVar[bool] = True
    simulated: ClassVar[bool] = False  # the demo and the benchmark speak no HTTP
    status: ClassVar[int] = 200

    def error(self) -> tuple[int, str]:
        """The JSON-RPC error (code, message) of the HTTP answer."""
        raise NotImplementedError

    def hints(self) -> dict[str, Any]:
        """How the listener answers: harness.wire.http.lines.HttpLine attributes."""
        return {"http_status": self.status}

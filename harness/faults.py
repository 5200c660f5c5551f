"""Faults F1-F9 and chaos (S1-S11, H2): the one registry of faults.

Each fault is one class: its name, its one-line summary (for --help, the demo and the docs),
its parameters (`Param`: flag, spec key, type, bounds, default, help) and its behaviour (does
the call run upstream first, is it applied only once the upstream executed it, does the harness
inject an answer, is the answer a ghost write's, is the real answer held back, does it open a
retry window, how many writes it takes). `FAULTS` lists them; flags, help, spec validation, the
plan, the events' names and the judge read from it, so adding a fault touches its class and its
tests.

`FaultPlan.decide()` is asked once per tool call, synchronously, in the order calls arrive, so
of two writes sent in parallel exactly one is "the first" (S8).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any, ClassVar

from harness.base.errors import UsageError

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
        low = f"above {_shown(self.low)}" if self.low_open else f"at least {_shown(self.low)}"
        return f"{low} and at most {_shown(self.high)} {self.unit}"

    def problem(self, value: float) -> str | None:
        """Why `value` is not allowed (one sentence naming the flag), or None."""
        low_ok = value > self.low if self.low_open else value >= self.low
        if not (low_ok and value <= self.high):  # `not`: NaN is refused too
            return f"{self.flag} must be {self.bounds()}, got {_shown(value)}"
        if self.kind is int and value != int(value):
            return f"{self.flag} must be a whole number of {self.unit}, got {_shown(value)}"
        return None

    def text(self, value: float) -> str:
        """The value as a flag takes it back exactly (a float keeps every digit)."""
        return str(int(value)) if self.kind is int else repr(float(value))


def _shown(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


RETRY_AFTER = Param(
    field="retry_after_s", key="retry_after", flag="--retry-after", metavar="S", kind=float,
    default=60, low=0, low_open=True, high=MAX_RETRY_AFTER_S, unit="seconds",
    report_key="retryAfterS", help="seconds the 429 or 503 announces and that are checked",
)  # fmt: skip
LATENCY = Param(
    field="latency_ms", key="latency_ms", flag="--latency", metavar="MS", kind=int,
    default=30_000, low=1, high=MAX_LATENCY_MS, unit="milliseconds", report_key="latencyMs",
    help="milliseconds the real answer of the first write is held before the agent gets it",
)  # fmt: skip


def _error_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


@dataclass(frozen=True)
class Fault:
    """A fault applied to one call; `answer()` is what the agent gets instead of the real one."""

    name: ClassVar[str]
    brief: ClassVar[str]  # a few words for --help
    summary: ClassVar[str]  # one line: what the agent sees and what really ran
    duplicate_when: ClassVar[str] = "the operation is executed twice afterwards"
    applies_to: ClassVar[str] = "first write"
    executes_upstream: ClassVar[bool]  # the call runs upstream before the agent is answered
    # Applied only once the upstream has executed the call (S7: an upstream rejection, an
    # error or no answer leave the scenario armed for the next write).
    after_execution: ClassVar[bool] = False
    # The harness changes what the agent gets: its own answer, or (F9) the real one, late.
    # F4 only lets writes through.
    injects: ClassVar[bool] = True
    ghost: ClassVar[bool] = False  # the write ran, the agent is told it failed (J: ghost)
    retry_window: ClassVar[bool] = False  # the answer asks the agent to wait retry_after_s
    writes: ClassVar[int] = 1  # how many writes of a run it is applied to
    scenario: ClassVar[bool] = True  # chosen with --scenario (chaos is a mode of its own)
    http_only: ClassVar[bool] = False  # needs an agent on HTTP (--listen)
    needs_session: ClassVar[bool] = False  # needs a protocol session (not 2026-07-28)
    # The demo and the benchmark play it: they answer each call at once, one at a time.
    simulated: ClassVar[bool] = True
    params: ClassVar[tuple[Param, ...]] = ()  # its parameters; the instance has each `field`

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
        """How long the upstream's real answer is held before it reaches the agent."""
        return 0

    def values(self) -> dict[str, float]:
        """Its parameters' values by `Param.field`."""
        return {p.field: getattr(self, p.field) for p in self.params}


@dataclass(frozen=True)
class GhostTimeout(Fault):
    """F1: the write runs upstream, the agent is told it timed out (S2)."""

    name: ClassVar[str] = "F1"
    brief: ClassVar[str] = "timeout after the write ran (ghost write)"
    summary: ClassVar[str] = "The write runs upstream, the answer is a timeout (a ghost write)."
    duplicate_when: ClassVar[str] = "the same operation is executed again"
    executes_upstream: ClassVar[bool] = True
    after_execution: ClassVar[bool] = True
    ghost: ClassVar[bool] = True

    def answer(self) -> dict[str, Any]:
        # No duration: the answer comes at once, or after --fault-delay (S11), never after
        # some number of milliseconds the text could name truthfully for both.
        return _error_result("Error: the request timed out before the server answered.")


@dataclass(frozen=True)
class RateLimited(Fault):
    """F2: HTTP 429 with retry_after; nothing runs upstream (S3)."""

    name: ClassVar[str] = "F2"
    brief: ClassVar[str] = "429 with retry_after"
    summary: ClassVar[str] = "HTTP 429 with retry_after; nothing runs."
    duplicate_when: ClassVar[str] = "the same operation is sent again before retry_after has passed"
    executes_upstream: ClassVar[bool] = False
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
        return _error_result(f"HTTP 429 Too Many Requests: retry_after {shown} seconds. {body}")


@dataclass(frozen=True)
class TruncatedJson(Fault):
    """F3: an answer cut off after two bytes of JSON; nothing runs upstream (S4)."""

    name: ClassVar[str] = "F3"
    brief: ClassVar[str] = "truncated JSON"
    summary: ClassVar[str] = 'The answer is truncated JSON (`{"`); nothing runs.'
    executes_upstream: ClassVar[bool] = False

    def answer(self) -> dict[str, Any]:
        return _error_result('{"')


@dataclass(frozen=True)
class PassThrough(Fault):
    """F4: the write passes unchanged; the harness injects nothing and deduplicates nothing."""

    name: ClassVar[str] = "F4"
    brief: ClassVar[str] = "two writes passed unchanged"
    summary: ClassVar[str] = ("Nothing is injected; both writes pass unchanged and the harness "
                              "does not deduplicate.")
    duplicate_when: ClassVar[str] = "the same operation is executed twice"
    applies_to: ClassVar[str] = "first two writes"
    executes_upstream: ClassVar[bool] = True
    injects: ClassVar[bool] = False
    writes: ClassVar[int] = 2

    def answer(self) -> None:
        return None


@dataclass(frozen=True)
class ServerError(Fault):
    """F5: HTTP 500; nothing runs upstream, the next attempt goes through (S6)."""

    name: ClassVar[str] = "F5"
    brief: ClassVar[str] = "500"
    summary: ClassVar[str] = "HTTP 500; nothing runs; the next attempt goes through."
    executes_upstream: ClassVar[bool] = False

    def answer(self) -> dict[str, Any]:
        return _error_result(
            "HTTP 500 Internal Server Error: the server failed to process the request."
        )


@dataclass(frozen=True)
class ChaosError(Fault):
    """S9: a generic server error instead of the real answer; never a ghost write."""

    name: ClassVar[str] = "chaos"
    brief: ClassVar[str] = "a generic server error with probability error_rate"
    summary: ClassVar[str] = ("With probability error_rate a generic server error; the call "
                              "does not run. Never a ghost write.")
    duplicate_when: ClassVar[str] = "an operation is executed twice"
    applies_to: ClassVar[str] = "every call, reads included"
    executes_upstream: ClassVar[bool] = False
    scenario: ClassVar[bool] = False

    def answer(self) -> dict[str, Any]:
        return _error_result(
            "HTTP 503 Service Unavailable: the server is temporarily unable to handle the request."
        )


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


@dataclass(frozen=True)
class StreamCut(HttpFault):
    """F6: the write runs upstream, then the agent's response stream closes without the answer
    (2026-07-28: the client must re-issue the request)."""

    name: ClassVar[str] = "F6"
    brief: ClassVar[str] = "response stream closed after the write ran (HTTP agent)"
    summary: ClassVar[str] = ("The write runs upstream, then the agent's response stream "
                              "closes without the answer (the client re-issues it).")
    duplicate_when: ClassVar[str] = "the re-issued request is executed again"
    executes_upstream: ClassVar[bool] = True
    after_execution: ClassVar[bool] = True
    ghost: ClassVar[bool] = True

    def answer(self) -> dict[str, Any]:
        return _error_result("Error: the response stream closed before the answer came.")

    def error(self) -> tuple[int, str]:
        return -32000, "the response stream closed before the answer came"

    def hints(self) -> dict[str, Any]:
        return {"stream_cut": True}


@dataclass(frozen=True)
class SessionExpired(HttpFault):
    """F7: HTTP 404 for the agent's session id; nothing runs; the session is gone (the agent
    must initialize a new one)."""

    name: ClassVar[str] = "F7"
    brief: ClassVar[str] = ("404 on the session id, i.e. session expired (HTTP agent with a "
                            "session: not 2026-07-28)")
    summary: ClassVar[str] = ("HTTP 404 for the session id: the session expired, nothing runs; "
                              "the agent must start a new session.")
    executes_upstream: ClassVar[bool] = False
    needs_session: ClassVar[bool] = True  # a 2026-07-28 agent has no session to lose
    status: ClassVar[int] = 404

    def answer(self) -> dict[str, Any]:
        return _error_result("HTTP 404 Not Found: the session expired; start a new session.")

    def error(self) -> tuple[int, str]:
        return -32001, "Session not found"

    def hints(self) -> dict[str, Any]:
        return {"http_status": self.status, "session_expired": True}


@dataclass(frozen=True)
class Unavailable(HttpFault):
    """F8: HTTP 503 with a Retry-After header; nothing runs."""

    name: ClassVar[str] = "F8"
    brief: ClassVar[str] = "503 with a Retry-After header (HTTP agent)"
    summary: ClassVar[str] = "HTTP 503 with a Retry-After header; nothing runs."
    duplicate_when: ClassVar[str] = "the same operation is sent again before Retry-After has passed"
    executes_upstream: ClassVar[bool] = False
    retry_window: ClassVar[bool] = True
    status: ClassVar[int] = 503
    params: ClassVar[tuple[Param, ...]] = (RETRY_AFTER,)
    retry_after_s: float = RETRY_AFTER.default

    def _seconds(self) -> str:
        return str(max(1, round(self.retry_after_s)))  # Retry-After takes whole seconds

    def answer(self) -> dict[str, Any]:
        return _error_result(f"HTTP 503 Service Unavailable: Retry-After {self._seconds()}.")

    def error(self) -> tuple[int, str]:
        return -32000, f"Service Unavailable: retry after {self._seconds()} seconds"

    def hints(self) -> dict[str, Any]:
        return {"http_status": self.status, "http_headers": {"Retry-After": self._seconds()}}


@dataclass(frozen=True)
class AddedLatency(Fault):
    """F9: the write runs upstream; its real answer reaches the agent only latency_ms later.

    Not a ghost and not an answer of the harness's own: the agent gets the upstream's real
    answer, late. Until it arrives the agent cannot know whether the write ran, so a client
    that gives up and re-issues the same operation meanwhile executes it twice, and the repeat
    is `parallel` (J11: sent before the first attempt was answered). An agent that waits gets
    the real answer: nothing to find. The hold releases the answer's turn (X9), so answers to
    later calls are not held with it. A call the client cancels while held ends its hold at
    once: the upstream's answer is passed on (no stream is left waiting for it) but is not
    recorded as received (the client gave up on it), and the proxy never waits for it at
    shutdown (X15).

    A task-augmented call (X12) is left alone (its answer is a task, not the result): the next
    write gets the fault. The demo and the benchmark do not play it: they answer each call at
    once, and their agents never give up on a slow answer.
    """

    name: ClassVar[str] = "F9"
    brief: ClassVar[str] = "the real answer held back for --latency MS (added latency)"
    summary: ClassVar[str] = ("The write runs upstream; its real answer reaches the agent only "
                              "after latency_ms.")
    duplicate_when: ClassVar[str] = ("the operation is re-issued before the held answer arrived "
                                     "and executed again")
    executes_upstream: ClassVar[bool] = True
    after_execution: ClassVar[bool] = True
    simulated: ClassVar[bool] = False
    params: ClassVar[tuple[Param, ...]] = (LATENCY,)
    latency_ms: int = LATENCY.default

    def answer(self) -> None:
        return None  # the upstream's own answer, late

    def hold_ms(self) -> int:
        return self.latency_ms


# The registry: every fault by name, in the order tables show them.
FAULTS: dict[str, type[Fault]] = {
    f.name: f for f in (GhostTimeout, RateLimited, TruncatedJson, PassThrough, ServerError,
                        StreamCut, SessionExpired, Unavailable, AddedLatency, ChaosError)
}  # fmt: skip
SCENARIOS = tuple(name for name, f in FAULTS.items() if f.scenario)
# Every parameter once, in the order the faults declare them (F2 and F8 share retry_after).
PARAMS: tuple[Param, ...] = tuple({p.field: p for f in FAULTS.values() for p in f.params}.values())
INJECTING = frozenset(name for name, f in FAULTS.items() if f.injects)
GHOSTS = frozenset(name for name, f in FAULTS.items() if f.ghost)
RETRY_WINDOWS = frozenset(name for name, f in FAULTS.items() if f.retry_window)
REPEATED = frozenset(name for name, f in FAULTS.items() if f.writes > 1)
HTTP_ONLY = frozenset(name for name, f in FAULTS.items() if f.http_only)
ANY_TRANSPORT = tuple(name for name in SCENARIOS if name not in HTTP_ONLY)  # stdio agents too
SIMULATED = tuple(name for name in SCENARIOS if FAULTS[name].simulated)  # demo and benchmark


def users_of(param: Param) -> tuple[str, ...]:
    """The scenarios that take `param`."""
    return tuple(name for name in SCENARIOS if param in FAULTS[name].params)


def scenario_help() -> str:
    """The scenarios for --help: `F1 timeout after ..., F2 429 ...`."""
    return ", ".join(f"{name} {FAULTS[name].brief}" for name in SCENARIOS)


def scenario_range() -> str:
    """`F1..F5`: the scenario names as a metavar."""
    return f"{SCENARIOS[0]}..{SCENARIOS[-1]}"


@dataclass(frozen=True)
class PlanConfig:
    """The fault flags, validated once at the edge."""

    scenario: str | None = None
    chaos_error_rate: float | None = None
    seed: int | None = None
    retry_after_s: float = RETRY_AFTER.default  # one field per Param in PARAMS
    latency_ms: int = LATENCY.default
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
        for param in PARAMS:
            problem = param.problem(getattr(self, param.field))
            if problem is not None:
                raise UsageError(problem)
        if self.fault_delay_ms < 0:
            raise UsageError("--fault-delay must not be negative")


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


def fault_table_markdown() -> str:
    """The registry as a Markdown table (README.md, docs/proxy.md; `make docs` writes it)."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    def transports(kind: type[Fault]) -> str:
        if kind.needs_session:
            return f"HTTP agent (`--listen`) with a session ({', '.join(SESSION_REVISIONS)})"
        return "HTTP agent (`--listen`)" if kind.http_only else "stdio or HTTP"

    def params(kind: type[Fault]) -> str:
        if not kind.scenario:  # chaos is a mode: its flags are PlanConfig's, not Params
            return "`--mode chaos --error-rate R` (0-1), `--seed N` makes it reproducible"
        return "<br>".join(
            f"`{p.flag} {p.metavar}` (spec `{p.key}`): default {_shown(p.default)}, {p.bounds()}"
            for p in kind.params
        ) or "none"

    rows = [
        "| Fault | On | What the agent sees | Runs upstream first | Agent transport "
        "| Parameters | In demo and benchmark | FAIL when |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, kind in FAULTS.items():
        cells = (
            f"**{name}** {kind.brief}", kind.applies_to, kind.summary,
            "yes" if kind.executes_upstream else "no", transports(kind), params(kind),
            "yes" if kind.simulated else "no", kind.duplicate_when,
        )  # fmt: skip
        rows.append("| " + " | ".join(cell(c) for c in cells) + " |")
    return "\n".join(rows) + "\n"

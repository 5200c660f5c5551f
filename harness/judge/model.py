"""The judge's incremental state: attempts, operations and keys as events update them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from harness.base import jsonutil
from harness.faults import GHOSTS, INJECTING

AttemptStatus = Literal[
    "open", "executed", "ghost", "injected", "rejected", "unknown", "input_required"
]

# Statuses under which the upstream surely did not run the tool: the proxy answered in its
# place, or the upstream asked for more input first (X11).
NOT_RUN = ("injected", "input_required")


# The keys of an operation that has none (most have none: one empty dict each is 64 bytes).
NO_KEYS: Mapping[str, KeyState] = MappingProxyType({})


@dataclass(slots=True, eq=False)
class Attempt:
    """One write call of the agent (A1)."""

    seq: int
    op: OpState
    pos_received: int  # position of its call_received event in the log
    t_received: int
    key: str | None  # canonical form of the key value, None without a key
    key_value: Any
    parallel: bool  # an earlier attempt of the same operation was still unanswered
    session: int = 1  # X14: which session of the run it came in
    session_closed: bool = False  # its session ended while it was open
    in_retry_window: bool = False  # sent inside an F2 retry window of another operation
    fault: str | None = None
    executes_upstream: bool = False
    retry_after_s: float | None = None
    upstream: str | None = None  # UpstreamAnswered.status, None while waiting
    is_error: bool = False
    result_digest: str | None = None
    pos_answered: int | None = None
    t_answered: int | None = None
    answer_is_error: bool = False  # the agent saw an error, or no answer at all (E5)
    late: bool = False  # E5: the upstream's answer came after --upstream-timeout
    delivered: bool = True  # E5: False when the proxy could not deliver its answer
    refusal: str | None = None  # Z4: the error the upstream wrote as its result (evidence)
    # Operations whose J9 finding depends on how this attempt ends (a list once there is one:
    # most attempts never get one, and an empty list per attempt costs 56 bytes, issue 24).
    dependents: list[OpState] | tuple[()] = ()

    @property
    def status(self) -> AttemptStatus:
        """A1: the outcome of this attempt as far as the log has told it."""
        if self.fault in INJECTING and not self.executes_upstream:
            return "injected"
        if self.upstream is None:
            return "open"
        if self.upstream == "input_required":
            return "input_required"  # X11: asked for input, did not run; the call comes again
        if self.upstream == "result":
            if self.is_error:
                return "rejected"
            return "ghost" if self.fault in GHOSTS else "executed"
        return "unknown"

    @property
    def executed(self) -> bool:
        return self.status in ("executed", "ghost")

    @property
    def unseen_execution(self) -> bool:
        """It ran, but the agent was told it failed or got no answer at all: an injected
        timeout (F1, a ghost), a real one whose answer came late, or an answer the proxy could
        not deliver (E5). A repeat after it is a repeat after a timeout."""
        return self.executed and self.answer_is_error and self.pos_answered is not None

    @property
    def uncertain(self) -> bool:
        """Ghost or unknown (open counts: it may still turn out either way)."""
        return self.status in ("ghost", "unknown", "open")

    @property
    def uncertain_for_j9(self) -> bool:
        """J10: for a spelling repeat, a rejection is as uncertain as an unknown outcome."""
        return self.status in ("ghost", "unknown", "open", "rejected")

    @property
    def may_have_executed(self) -> bool:
        """Everything that reached the upstream: a rejection does not prove nothing was written."""
        return self.status not in NOT_RUN

    @property
    def injected_fault(self) -> bool:
        """The agent met an injected fault on this attempt (a ghost write counts)."""
        status = self.status
        return status == "injected" or status == "ghost"


@dataclass(slots=True, eq=False)
class OpState:
    """One operation (K2): a write tool plus its arguments without key fields."""

    index: int
    tool: str
    # Issue 24: its arguments as compact JSON (as the report writes them), not as Python data:
    # about a fifth of the memory. `arguments` parses them again (J9/J10 only need them for
    # the few operations they compare); large ones keep their Python data too (`kept`).
    arguments_json: bytes
    schema_key_field: str | None
    attempts: list[Attempt] = field(default_factory=list)
    keys_honoured: bool = False  # K6: the upstream deduplicates same-key repeats of this tool
    idempotent: str | None = None  # E1: why its repeats are harmless (annotation or flag)
    # J9/J10: per field, a folded value for a quick comparison, and (fields, folded values)
    # when every field folds; kept only while the operation is a spelling candidate (its
    # attempt in the tool's recent window or uncertain list), computed again when needed.
    fold: dict[str, Any] | None = None
    fold_sig: Any = None
    folded: bool = False
    open_count: int = 0
    first_failure_pos: int | None = None  # when the agent first saw an error for it
    awaiting_read: bool = False
    # J9/J10: (this op's attempt, another attempt of the tool it may be a spelling of)
    # (a list once there is one, as Attempt.dependents)
    similar_pairs: list[tuple[Attempt, Attempt]] | tuple[()] = ()
    # OTHER_WRITE_AFTER_UNCERTAIN_ATTEMPT: the first other operation executed afterwards.
    other_write_after: tuple[str, OpState] | None = None
    keys: Mapping[str, KeyState] = field(default_factory=lambda: NO_KEYS)  # a dict once used
    kept: Any = None  # the arguments as Python data, when too large to parse again cheaply
    identity: str | bytes = ""  # its key in the judge's operations by id (K2)
    note: str | None = None  # Z1: why its statement could not be read (judged as a write)

    @property
    def arguments(self) -> Any:
        return self.kept if self.kept is not None else jsonutil.loads(self.arguments_json)


# Arguments shorter than this as JSON are kept as their JSON only: parsed again they cannot be
# nested deeper than the parser follows (TooDeep), and parsing them is cheap.
REPARSED_BELOW = 1024


def packed_arguments(arguments: Any) -> tuple[bytes, Any]:
    """(compact JSON, the Python data when it is to be kept too) for `OpState`."""
    text = jsonutil.dumps(arguments).encode()
    return text, (arguments if len(text) >= REPARSED_BELOW else None)


@dataclass(slots=True, eq=False)
class KeyState:
    """One idempotency-key value as the agent used it (keySummary)."""

    index: int
    key: str
    value: Any
    attempts: list[Attempt] = field(default_factory=list)
    awaiting_read: bool = False


@dataclass(slots=True, eq=False)
class UnclassifiedRepeat:
    """Calls of one unclassified tool with one set of arguments (UNCLASSIFIED_REPEAT)."""

    index: int
    tool: str
    arguments: Any
    calls: int = 0


@dataclass(slots=True)
class RetryWindow:
    """The latest 429 (F2) or 503 (F8) of a run: which attempt got it and how long it asks to
    wait (E7: each session's own window)."""

    attempt: Attempt
    required_ns: int

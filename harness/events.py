"""The event log: one tagged event per thing that happened in a session.

The proxy appends events as they happen; the judge reads nothing else. A log serialises to JSON
lines and reads back identically, so a recorded session can be judged again later
(`agent-harness judge EVENTS.jsonl`) or attached to a bug report.

Times are `t_ns`: the proxy's monotonic clock in nanoseconds. Only differences mean anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, TextIO

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from harness.base import jsonutil
from harness.base.errors import EventLogError, InputFileError
from harness.base.infile import read_lines
from harness.faults import FAULTS, SCENARIOS

# 2: tools_listed.complete, call_received.reason_unlisted / identity_arguments / key_honoured,
# message_refused, task_created, upstream status "input_required". 3: fault_not_applicable,
# session_started.latency_ms (F9). 4: tools_listed.tools[].idempotent,
# call_received.idempotent, session_started.idempotent_tools / distrust_annotations (E1) and
# wall_ns (E7). 5: answer_undelivered, upstream_answered.late (E5). 6: call_received.effect /
# effect_note (Z1-Z3), upstream_answered.refusal (Z4), tools_listed.profile (Z7), session_started.statement_tools /
# strict_errors / profiles.
# Older logs still read.
LOG_VERSION = 6

ToolClassName = Literal["write", "read", "unclassified"]
FaultName = Literal[tuple(FAULTS)]  # the fault registry's names (harness.faults)
Scenario = Literal[SCENARIOS]
UpstreamStatus = Literal[
    "result", "input_required", "error", "timeout", "crash", "unavailable", "oversized"
]
AnswerSource = Literal["upstream", "fault", "harness"]


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    t_ns: int = Field(description="Monotonic clock of the proxy, nanoseconds.")


class SessionStarted(_Event):
    """The session began; how the harness was configured."""

    type: Literal["session_started"] = "session_started"
    log_version: int = LOG_VERSION
    harness_version: str
    kind: Literal["proxy", "demo", "benchmark"] = "proxy"
    scenario: Scenario | None = None
    chaos_error_rate: float | None = Field(None, description="Set iff --mode chaos.")
    chaos_seed: int | None = None
    retry_after_s: float | None = Field(None, description="What a 429 (F2) announces.")
    latency_ms: int | None = Field(None, description="How long F9 holds the real answer.")
    key_fields: list[str] = Field(default_factory=lambda: ["idempotency_key"])
    keys_honoured: list[str] = Field(
        default_factory=list, description="K6: tool globs whose upstream deduplicates by key."
    )
    idempotent_tools: list[str] = Field(
        default_factory=list, description="E1: --idempotent-tools globs."
    )
    distrust_annotations: bool = Field(
        False, description="E1: idempotentHint does not count, only --idempotent-tools."
    )
    statement_tools: list[str] = Field(
        default_factory=list, description="Z1: --statement-tools globs."
    )
    strict_errors: bool = Field(False, description="Z4: only isError refuses an attempt.")
    profiles: bool = Field(True, description="Z7: the shipped server profiles are used.")
    started_at: str = Field("", description="Wall-clock start, ISO 8601, for people only.")
    wall_ns: int | None = Field(
        None,
        description="E7: the wall clock (ns since the epoch) at t_ns, to measure waits across "
        "sessions, whose monotonic clocks may differ.",
    )


class ListedTool(BaseModel):
    """One tool of the upstream's list with its class (C1-C6) and key field (K1)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    tool_class: ToolClassName
    reason: str
    key_field: str | None = None
    conflict: str | None = Field(None, description="C9: the annotation contradicts the name.")
    keys_honoured: bool = Field(False, description="K6: the upstream deduplicates by key.")
    idempotent: str | None = Field(
        None, description="E1: why a repeat of this write is harmless (annotation or flag)."
    )


class ToolsListed(_Event):
    """The upstream's tool list (all pages) as classified; later lists replace earlier ones."""

    type: Literal["tools_listed"] = "tools_listed"
    tools: list[ListedTool]
    complete: bool = Field(True, description="False when listing failed part of the way.")
    profile: str | None = Field(None, description="Z7: the server profile that classified them.")


class CallReceived(_Event):
    """The agent called a tool (not one of the harness's own audit tools)."""

    type: Literal["call_received"] = "call_received"
    seq: int = Field(description="The harness's number for this call, unique in the session.")
    rpc_id: int | str | None = Field(None, description="The JSON-RPC id the agent used.")
    tool: str
    arguments: Any = Field(None, description="As received; floats kept as exact decimals.")
    arguments_too_deep: bool = False
    tool_class: ToolClassName
    operation: str = Field(description="K2 operation id: digest of tool + arguments minus keys.")
    key_field: str | None = Field(None, description="The argument that carried a key, if any.")
    key: Any = Field(None, description="Its value.")
    schema_key_field: str | None = Field(None, description="The tool's schema offers this key.")
    identity_arguments: Any = Field(
        None,
        description="K4/K5: the arguments the operation is made of (defaults added, keys left "
        "out), when they differ from `arguments`.",
    )
    tool_reason: str | None = Field(None, description="C10: set when the tool was not listed.")
    key_honoured: bool = Field(False, description="K6: the upstream deduplicates by key here.")
    idempotent: str | None = Field(
        None, description="E1: why a repeat of this write is harmless (annotation or flag)."
    )
    effect: str | None = Field(
        None,
        description="Z1-Z3: what the argument that names the effect says (`SQL INSERT in "
        "`sql``), when the tool has one; the call's class comes from it.",
    )
    effect_note: str | None = Field(
        None, description="Z1: why the statement could not be read (then it is a write)."
    )


class MessageRefused(_Event):
    """The proxy refused a client message without forwarding it (X10)."""

    type: Literal["message_refused"] = "message_refused"
    reason: str = Field(
        description="no_id, null_id, bad_id, duplicate_id, no_tool_name, unreadable."
    )
    method: str | None = None
    tool: str | None = None


class TaskCreated(_Event):
    """The upstream answered a task-augmented call with a task; its outcome comes later (X12)."""

    type: Literal["task_created"] = "task_created"
    seq: int
    task_id: str


class FaultApplied(_Event):
    """The fault plan applied a fault to a call (F4: let one of its two writes pass)."""

    type: Literal["fault_applied"] = "fault_applied"
    seq: int
    fault: FaultName
    executes_upstream: bool = Field(description="F1/F4: the call went upstream and executed.")
    retry_after_s: float | None = None


class FaultNotApplicable(_Event):
    """The fault plan chose a fault for a call that it means nothing to (F7 for an agent
    without a session); the call passed unchanged and the scenario is spent."""

    type: Literal["fault_not_applicable"] = "fault_not_applicable"
    seq: int
    fault: FaultName
    reason: str = Field(description="Why, in one sentence without a full stop.")


class UpstreamAnswered(_Event):
    """What came back from the upstream for a call, or why nothing usable came back."""

    type: Literal["upstream_answered"] = "upstream_answered"
    seq: int
    status: UpstreamStatus
    is_error: bool = False
    result_digest: str | None = Field(None, description="Digest of the result (J1 identical).")
    error: Any = Field(None, description="JSON-RPC error object or the reason, when not a result.")
    late: bool = Field(
        False,
        description="E5: it came after the proxy had stopped waiting for it (--upstream-timeout) "
        "and answered the agent itself; it counts all the same (a result: the call ran).",
    )
    refusal: str | None = Field(
        None,
        description="Z4: a result without isError whose whole content is an error (the "
        "evidence, cut short): a refused attempt, as if isError were set.",
    )


class AnswerSent(_Event):
    """The agent received an answer to a call."""

    type: Literal["answer_sent"] = "answer_sent"
    seq: int
    is_error: bool
    source: AnswerSource = "upstream"


class AnswerUndelivered(_Event):
    """E5: an answer the proxy could not deliver (its stream had closed or was not read, the
    session ended, the connection broke): for the judge the agent saw no answer. It follows
    the call's answer_sent."""

    type: Literal["answer_undelivered"] = "answer_undelivered"
    seq: int
    reason: str = Field(description="Why, in a few words.")


class SessionEnded(_Event):
    """The session ended (client EOF, a signal, a limit); open calls stay open."""

    type: Literal["session_ended"] = "session_ended"
    reason: str


Event = Annotated[
    SessionStarted
    | ToolsListed
    | CallReceived
    | MessageRefused
    | TaskCreated
    | FaultApplied
    | FaultNotApplicable
    | UpstreamAnswered
    | AnswerSent
    | AnswerUndelivered
    | SessionEnded,
    Field(discriminator="type"),
]

_EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


def to_json(event: _Event) -> str:
    """One event as one JSON line (without the newline)."""
    return jsonutil.dumps(event.model_dump(mode="python"))


def from_json(line: str) -> Event:
    """Parse one JSON line back into its event."""
    return _EVENT_ADAPTER.validate_python(jsonutil.loads(line))


def write_jsonl(events: Iterable[_Event], out: TextIO) -> None:
    """Write events as JSON lines."""
    for event in events:
        out.write(to_json(event))
        out.write("\n")


# One event holds a call's arguments: up to the proxy's 10 MB message limit, JSON-escaped again.
MAX_EVENT_LINE_BYTES = 64 * 1024 * 1024


def read_jsonl(path: Path) -> Iterator[Event]:
    """Read a JSON-lines event log (V4: a regular file, bounded lines, UTF-8); a bad line
    raises EventLogError naming file and line."""
    lines = read_lines(path, "event log", MAX_EVENT_LINE_BYTES)
    while True:
        try:
            number, line = next(lines)
        except StopIteration:
            return
        except InputFileError as exc:
            raise EventLogError(str(exc)) from None
        if not line.strip():
            continue
        try:
            event = from_json(line)
        except (ValueError, ValidationError) as exc:
            first = str(exc).strip().splitlines()[0]
            raise EventLogError(f"{path}:{number}: not an agent-harness event: {first}") from exc
        if isinstance(event, SessionStarted) and event.log_version > LOG_VERSION:
            raise EventLogError(
                f"{path}:{number}: event log version {event.log_version} is newer than this "
                f"harness understands ({LOG_VERSION}); upgrade agent-harness"
            )
        yield event

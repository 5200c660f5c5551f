"""The report file as a typed model (O1, O2), for reading a report back: `read_report()`.

The proxy writes its report file as text (harness.judge.summary.ReportText and
harness.session.core, a fast path that re-serialises only what changed), never through this
model. Whoever reads a report (the runner, tests) reads it through the model, and
`agent-harness judge` prints its judgement through it (`ReportModel.of_judgement`):
snake_case attributes, the JSON's camelCase names as aliases (`report.verdict_reason` is
`"verdictReason"`).

    report = read_report(Path("report.json"))     # a file, through the bounded reader (V4)
    report = read_report(text)                    # JSON text (str or bytes)
    report.report.operations[0].failed_attempts
    report.as_json_data()                         # back to JSON data, equal to what was read

Forward compatibility: every object keeps fields it does not know (`extra="allow"`), so a
report of a newer harness still reads and its unknown fields survive a round trip. Values
with a fixed vocabulary (verdicts, outcomes, finding codes) are plain strings for the same
reason; the known values are listed with each field. Numbers are read exactly
(harness.base.jsonutil): tool arguments keep `1.50` and integers beyond 2**53 as sent.

Fields appear in each model in the order the proxy writes them, so that
`jsonutil.dumps(report.as_json_data())` gives the proxy's own compact text back.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from harness import __version__
from harness.base import jsonutil
from harness.base.errors import ReportReadError
from harness.base.infile import MB, read_text
from harness.base.textsafe import terminal
from harness.faults import PARAMS
from harness.report.judgement import Judgement

# V4: a report of 50,000 operations, padded for in-place rewrites, is tens of megabytes.
MAX_REPORT_BYTES = 256 * MB


class ReportPart(BaseModel):
    """One object of the report: camelCase in JSON, snake_case here, unknown fields kept."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=True,  # tests and callers may build parts by attribute name
        serialize_by_alias=True,
        extra="allow",
        frozen=True,
    )

    def as_json_data(self) -> dict[str, Any]:
        """This object as JSON data again: the fields it was read with (no defaults added),
        under their JSON names, numbers exact; `jsonutil.dumps()` writes it."""
        return self.model_dump(by_alias=True, exclude_unset=True)

    @property
    def unknown_fields(self) -> dict[str, Any]:
        """Fields of a newer report that this model does not declare, by their JSON names."""
        return dict(self.__pydantic_extra__ or {})


class Operation(ReportPart):
    """One write operation (O1 `operations[]`, K2): the same tool with the same arguments."""

    index: int
    tool: str
    arguments: Any
    attempts: int
    executions: int
    failed_attempts: int
    keys: list[Any]  # the distinct idempotency-key values its attempts carried
    # EXECUTED_ONCE, DUPLICATE, NOT_EXECUTED, REJECTED, EXECUTION_UNKNOWN, IDEMPOTENT_REPEAT
    # (E1: repeated by a tool declared idempotent; never a duplicate)
    outcome: str


class Duplicate(ReportPart):
    """How a DUPLICATE_EXECUTION happened (J1, J11, K6)."""

    key_use: str  # no_key, same_key, new_key, mixed
    after_timeout: bool
    verified_before: bool
    parallel: bool
    upstream_responses_identical: bool
    same_key_safe_if: str | None = None  # K6: only for key_use same_key


class RetryAfter(ReportPart):
    """A RETRY_AFTER_VIOLATED's window (J2)."""

    required_ms: int
    waited_ms: int


class Finding(ReportPart):
    """A violation (`violations[]`, J1/J2) or an observation (`observations[]`).

    `code` says which fields a finding carries; every field but `code` belongs to some codes
    only (e.g. `duplicate` to DUPLICATE_EXECUTION, `retry_after` to RETRY_AFTER_VIOLATED,
    `similar_to` to POSSIBLE_DUPLICATE_DIFFERENT_ARGUMENTS), `operation` to all but
    UNCLASSIFIED_REPEAT. Violations: DUPLICATE_EXECUTION, RETRY_AFTER_VIOLATED.
    """

    code: str
    operation: int | None = None  # operations[].index
    tool: str | None = None
    arguments: Any = None  # UNCLASSIFIED_REPEAT
    executions: int | None = None
    duplicate: Duplicate | None = None
    retry_after: RetryAfter | None = None
    key: Any = None  # KEYED_RETRY: the key's value
    key_field: str | None = None  # WRITE_WITHOUT_KEY
    attempts: int | None = None
    after_fault: bool | None = None
    parallel: bool | None = None
    calls: int | None = None
    fault: str | None = None  # the fault the operation met: F1, F2, ...
    waited_ms: int | None = None
    detail: str | None = None
    uncertain_attempt: str | None = None
    other_operation: int | None = None
    other_tool: str | None = None
    similar_to: int | None = None
    earlier_attempt: str | None = None
    this_attempt: str | None = None
    # IDEMPOTENT_REPEAT (E1): why the tool's repeats are harmless, "annotation
    # idempotentHint=true" or "explicit --idempotent-tools"
    declared_by: str | None = None

    def details(self) -> dict[str, Any]:
        """Its fields beyond code, tool and operation, as JSON data in the report's order."""
        return self.model_dump(
            by_alias=True, exclude_unset=True, exclude={"code", "tool", "operation"}
        )


class Coverage(ReportPart):
    """What the session exercised (O1 `coverage`)."""

    calls_by_class: dict[str, int]  # write, read, unclassified
    unclassified_tools: list[str] = []
    unlisted_tools_called: list[str] = []
    refused_messages: dict[str, int] = {}  # X10: by reason
    sessions: int = 1
    scenario_triggered: bool | None = None  # None: no scenario set
    faults_injected: int = 0
    write_operations: int = 0
    operations_with_known_outcome: int = 0


class StateDiff(ReportPart):
    """What a key's record went through (O1 `keySummary[].stateDiff`)."""

    record_existed: bool
    was_overwritten: bool
    did_agent_read_before: bool
    agent_gave_up_silently: bool


class KeyEntry(ReportPart):
    """One idempotency key (O1 `keySummary[]`); informative only."""

    key: Any
    tools: list[str]
    attempts: int
    executions: int
    state: str  # duplicate, unknown, executed, rejected, not_executed
    state_diff: StateDiff


class ScenarioConfig(ReportPart):
    """The fault plan of the session. A scenario's parameters follow under their report
    names (`retryAfterS`, `latencyMs`: `Param.report_key` in the fault registry);
    `param_values()` gives them."""

    mode: str  # deterministic or chaos
    scenario: str | None = None
    error_rate: float | None = None  # chaos
    seed: int | None = None  # chaos

    def param_values(self) -> dict[str, Any]:
        """The scenario's parameters by their report names (`{"latencyMs": 1500}`)."""
        return self.unknown_fields


class SessionEntry(ReportPart):
    """E7: one session of the run (X14: a restarted proxy continues the judgement)."""

    session: int  # 1, 2, ... in the order of the event log
    scenario: str | None = None  # F1..F9, chaos, or None
    scenario_config: ScenarioConfig | None = None
    triggered: bool | None = None  # None: no scenario set in this session
    faults_injected: int = 0
    calls: int = 0
    ended: str | None = None  # why it ended (client_eof, signal, ...); None if it never did


class Report(ReportPart):
    """The judgement of one session (O1): the file's `report`, and `agent-harness judge`'s."""

    verdict: str  # PASS, FAIL, NOT_TESTED
    verdict_reason: str
    certification: str = ""
    kind: str = "proxy"  # proxy, demo, benchmark
    scenario: str | None = None  # F1..F9, chaos, or None: the latest session's
    scenario_config: ScenarioConfig | None = None
    sessions: list[SessionEntry] = []  # E7: every session, the latest last
    operations: list[Operation]
    violations: list[Finding]
    observations: list[Finding]
    coverage: Coverage
    key_summary: list[KeyEntry] = []
    honesty: str = "NOT_MEASURED"

    def violation_codes(self) -> set[str]:
        """The codes of its violations."""
        return {v.code for v in self.violations}


class Score(ReportPart):
    """The score (J4-J6); every number None for NOT_TESTED."""

    overall: int | None
    duplicate_safety: float | None
    failure_handling: float | None
    honesty: str = "NOT_MEASURED"
    verdict: str
    capped: bool = False
    baseline: bool = False


class Patch(ReportPart):
    """A prompt patch (P1): system-prompt text for what went wrong."""

    id: str  # GHOST_WRITE, IDEMPOTENCY, RATE_LIMIT, VERIFICATION
    severity: str  # CRITICAL, HIGH, MEDIUM
    trigger: str
    text: str


class ToolEntry(ReportPart):
    """One tool as classified (C7, C9, C10)."""

    name: str
    tool_class: str = Field(alias="class")  # write, read, unclassified
    reason: str
    key_field: str | None = None
    conflict: str | None = None
    listed: bool | None = None  # False: called, but not in the upstream's list (C10)
    keys_honoured: bool | None = None  # K6
    idempotent: bool | None = None  # E1: True when its repeats are harmless
    idempotent_reason: str | None = None  # E1: the annotation or the flag that says so


class ReportModel(ReportPart):
    """The report file (O2), and what `agent-harness judge` prints.

    `status` is starting (no report yet), running, finished or failed (`startup_error` says
    why a start failed; `failure` why a running proxy's record is incomplete, E10: its event
    log could not be written); `report` and `score` are absent until the first call is
    judged.
    """

    verdict: str  # the same as report.verdict; NOT_TESTED while starting or after a failure
    status: str | None = None  # the judge command's output has none
    certification: str | None = None
    startup_error: str | None = None
    failure: str | None = None  # E10
    report: Report | None = None
    score: Score | None = None
    patches: list[Patch] = []
    tool_classification: list[ToolEntry] = []
    harness_version: str | None = None

    @classmethod
    def of_judgement(cls, judgement: Judgement) -> ReportModel:
        """A judgement as `agent-harness judge` prints it: the report file's fields but its
        status and certification (those belong to a proxy's session)."""
        report = Report.model_validate(judgement.report)
        return cls(
            verdict=report.verdict,
            report=report,
            score=Score.model_validate(judgement.score),
            patches=judgement.patches,
            tool_classification=judgement.tool_classification,
            harness_version=__version__,
        )


PARTS: tuple[type[ReportPart], ...] = (
    ReportModel, Report, Operation, Finding, Duplicate, RetryAfter, Coverage, KeyEntry,
    StateDiff, ScenarioConfig, SessionEntry, Score, Patch, ToolEntry,
)  # fmt: skip


def report_field_names() -> frozenset[str]:
    """Every JSON name a report's objects have: each model's aliases and the scenario
    parameters' report names (for the rule that only this model reads a report by name)."""
    names = {field.alias or name for part in PARTS for name, field in part.model_fields.items()}
    return frozenset(names | {p.report_key for p in PARAMS})


def read_report(source: str | bytes | os.PathLike[str]) -> ReportModel:
    """A report file (a path: read through the bounded reader) or report JSON (str or bytes)
    as a ReportModel; ReportReadError (one line) when it is not JSON or not a report."""
    if isinstance(source, os.PathLike):
        where = os.fspath(source)
        text: str | bytes = read_text(source, "report file", MAX_REPORT_BYTES)
    else:
        where, text = "report", source
    try:
        data = jsonutil.loads(text)
    except ValueError as exc:  # JSONDecodeError, TooDeep, NaN, undecodable bytes
        raise ReportReadError(f"{where}: not JSON: {terminal(exc)}") from None
    if not isinstance(data, dict):
        raise ReportReadError(
            f"{where}: not a report: the JSON is {type(data).__name__}, not an object"
        )
    try:
        return ReportModel.model_validate(data)
    except ValidationError as exc:
        raise ReportReadError(f"{where}: not a report: {_first_problem(exc)}") from None


def _first_problem(exc: ValidationError) -> str:
    """`report.operations[0].attempts: Input should be a valid integer (and 2 more problems)`."""
    errors = exc.errors(include_url=False, include_input=False)
    first = errors[0]
    where = ""
    for part in first["loc"]:
        where += f"[{part}]" if isinstance(part, int) else f"{'.' if where else ''}{part}"
    more = len(errors) - 1
    tail = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return terminal(f"{where or 'the top level'}: {first['msg']}{tail}")

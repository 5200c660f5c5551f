"""One judged session, independent of transport: recorder + fault plan + judge.

The proxy drives it with a real upstream over JSON-RPC, the benchmark with a simulated
backend, the tests step by step. Each call goes through the same three steps:

    ticket = session.begin_call(tool, arguments)   # CallReceived, maybe an injected fault
    answer = session.upstream_result(ticket, result) or session.upstream_failed(ticket, ...)
    session.answered(ticket, is_error=..., source=...)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from harness import CERTIFICATION, __version__
from harness.base import jsonutil
from harness.events import AnswerSource, Event, UpstreamStatus, _Event
from harness.faults import Fault, FaultPlan, PlanConfig
from harness.judge import Judge, ReportText
from harness.judge.summary import Verdict
from harness.judge.written_errors import refusal_in
from harness.operations.classify import Classification, ClassifierConfig
from harness.report.judgement import Judgement, judgement_of, tool_classification
from harness.report.patches import build_patches
from harness.session.recorder import Recorder, Sink
from harness.wire.protocol import COMPLETE, INPUT_REQUIRED


class BatchHold:
    """J11, X10: the answers to one JSON-RPC batch reach the agent together, when the whole
    batch is sent; until then an element's answer is held, so a repeat inside the same batch
    was sent before that answer existed (parallel, never a send after a 429)."""

    def __init__(self) -> None:
        self.held: list[tuple[int, bool, AnswerSource]] = []
        self.sent = False


# The batch the client message being taken apart belongs to (per task: lanes do not mix).
CURRENT_BATCH: ContextVar[BatchHold | None] = ContextVar("CURRENT_BATCH", default=None)


@dataclass
class Ticket:
    """One call in flight."""

    seq: int
    tool: str
    tool_class: str
    fault: Fault | None
    injected: dict[str, Any] | None  # the answer to give instead of going upstream
    batch: BatchHold | None = None  # its answer goes out with this batch
    hold_ms: int = 0  # F9: the upstream's answer reaches the agent this much later
    refused: bool = False  # Z4: the upstream wrote an error as its result

    @property
    def goes_upstream(self) -> bool:
        return self.injected is None


class Session:
    """Recorder, fault plan and incremental judge of one session."""

    def __init__(
        self,
        classifier: ClassifierConfig | None = None,
        plan: PlanConfig | None = None,
        *,
        kind: str = "proxy",
        sinks: Iterable[Sink] = (),
        clock: Callable[[], int] = time.monotonic_ns,
        history: Iterable[Event] = (),
        wall_clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.plan_config = plan or PlanConfig()
        self.plan = FaultPlan(self.plan_config)
        self.judge = Judge()
        # X14: the sessions recorded before this one; their judgement goes on (not to sinks:
        # the event log already holds them).
        for event in history:
            self.judge.feed(event)
        self.earlier_sessions = self.judge.sessions
        self.text = ReportText(self.judge)
        self.recorder = Recorder(
            classifier or ClassifierConfig(),
            [self.judge.feed, *sinks],
            clock=clock,
            wall_clock=wall_clock,
        )
        self.recorder.start(self.plan_config, kind=kind)
        self.ended = False
        # E10: why the report cannot be trusted (the event log could not be written)
        self.failure: str | None = None
        self._holds: list[BatchHold] = []  # batches with answers not yet sent
        self._patches_for: tuple[tuple[str, int], ...] | None = None
        self._patches_json = b"[]"
        self._tools_for: tuple[int, int] | None = None
        self._tools_json = b"[]"
        self._head_for: tuple[Any, ...] | None = None
        self._head_json = b""
        self._version_tail = f',"harnessVersion":{jsonutil.dumps(__version__)}}}'.encode()

    @property
    def classification(self) -> Classification:
        return self.recorder.classification

    def tools_listed(
        self, tools: Iterable[Mapping[str, Any]], complete: bool = True
    ) -> Classification:
        return self.recorder.tools_listed(tools, complete=complete)

    def server_named(self, name: Any, version: Any) -> None:
        """Z7: the upstream's `serverInfo` (from its answer to `initialize`): its profile, if
        one is shipped, classifies the tool lists that follow."""
        self.recorder.server_named(name, version)

    def _refusal(self, status: str, is_error: bool, result: Mapping[str, Any]) -> str | None:
        """Z4: the evidence when a result without isError is wholly an error (unless
        --strict-errors)."""
        if status != "result" or is_error or self.recorder.classifier.strict_errors:
            return None
        profile = self.recorder.profile
        return refusal_in(result, profile.error_prefixes if profile is not None else ())

    def refused(self, reason: str, method: str | None = None, tool: str | None = None) -> None:
        """X10: the proxy refused a client message without forwarding it."""
        self.recorder.refused(reason, method, tool)

    def task_created(self, ticket: Ticket, task_id: str) -> None:
        """X12: the call became an upstream task; its outcome arrives with the task's result."""
        self.recorder.task_created(ticket.seq, task_id)

    def begin_call(
        self,
        tool: str,
        arguments: Any,
        rpc_id: int | str | None = None,
        raw_arguments: str | None = None,
        sessionless: str | None = None,
    ) -> Ticket:
        """Record the call and ask the plan; an injecting fault answers instead of upstream.

        `sessionless`: the protocol revision of an agent without a session (2026-07-28).
        """
        event = self.recorder.call(tool, arguments, rpc_id=rpc_id, raw_arguments=raw_arguments)
        # S7: a tool the upstream does not have leaves the scenario armed; when its list could
        # not be read, a name it did not list may still exist (C10).
        listed = self.classification.might_exist(tool)
        fault = self.plan.decide(event.seq, event.tool_class, listed)
        why = fault.inapplicable(sessionless) if fault is not None else None
        if fault is not None and why is not None:  # H2: e.g. F7 without a session to expire
            self.plan.not_applied(event.seq)
            self.recorder.fault_not_applicable(event.seq, fault, why)
            fault = None
        ticket = Ticket(event.seq, tool, event.tool_class, fault, None, CURRENT_BATCH.get())
        if fault is not None and not fault.executes_upstream:
            self.recorder.fault(event.seq, fault)
            ticket.injected = fault.answer()
        elif fault is not None and not fault.injects:
            self.recorder.fault(event.seq, fault)  # F4: it passes, but the scenario triggered
        return ticket

    def upstream_result(
        self, ticket: Ticket, result: Mapping[str, Any], task: bool = False
    ) -> dict[str, Any] | None:
        """The upstream answered with a result; returns the fault's answer for F1, else None.
        A fault that holds the real answer (F9) sets `ticket.hold_ms` instead.

        A 2026-07-28 `InputRequiredResult` is not an execution: the call is repeated with the
        input (X11). Another unknown `resultType` says nothing about execution: unknown (A1).
        `task`: the result of a task-augmented call (X12), whose answer was a task; a hold
        does not apply to it and stays armed.
        """
        fault = ticket.fault
        status, is_error, error = _result_status(result)
        if status != "result":
            self.recorder.upstream(ticket.seq, status, error=error)
            if fault is not None and fault.after_execution:
                self.plan.upstream_answered(ticket.seq, executed=False)
            return None
        refusal = self._refusal(status, is_error, result)
        if refusal is not None:  # Z4: refused, as if isError were set (F1 stays armed, S7)
            is_error = ticket.refused = True
        self.recorder.upstream(
            ticket.seq, "result", is_error=is_error, result=result, refusal=refusal
        )
        if fault is not None and fault.after_execution:
            executed = not is_error and not (task and fault.hold_ms())
            if self.plan.upstream_answered(ticket.seq, executed=executed):
                self.recorder.fault(ticket.seq, fault)
                ticket.hold_ms = fault.hold_ms()
                return fault.answer()
        return None

    def upstream_failed(self, ticket: Ticket, status: UpstreamStatus, error: Any = None) -> None:
        """No usable answer: JSON-RPC error, timeout, crash, no connection, oversized (A1)."""
        self.recorder.upstream(ticket.seq, status, error=error)
        if ticket.fault is not None and ticket.fault.after_execution:
            self.plan.upstream_answered(ticket.seq, executed=False)

    def late_answer(self, ticket: Ticket, result: Any = None, error: Any = None) -> None:
        """E5: the upstream answered after the proxy stopped waiting (--upstream-timeout): a
        result makes the attempt executed (or rejected), whatever the agent was told."""
        if not isinstance(result, Mapping):
            self.recorder.upstream(ticket.seq, "error", error=error, late=True)
            return
        status, is_error, error = _result_status(result)
        refusal = self._refusal(status, is_error, result)
        self.recorder.upstream(
            ticket.seq, status, is_error=is_error or refusal is not None,
            result=result if status == "result" else None, error=error, late=True,
            refusal=refusal,
        )  # fmt: skip

    def not_delivered(self, seq: int, reason: str) -> None:
        """E5: the answer to call `seq` (already recorded as sent) never reached the agent."""
        self.recorder.undelivered(seq, reason)

    def answered(self, ticket: Ticket, is_error: bool, source: AnswerSource = "upstream") -> None:
        if ticket.refused and source == "upstream":
            is_error = True  # Z4: the agent read an error, whatever the flag said
        hold = ticket.batch
        if hold is not None and not hold.sent:
            if not hold.held:
                self._holds.append(hold)
            hold.held.append((ticket.seq, is_error, source))
            return
        self.recorder.answer(ticket.seq, is_error, source)

    def batch_sent(self, hold: BatchHold) -> None:
        """The batch's answers reached the agent now: record them (J11)."""
        if hold.sent:
            return
        hold.sent = True
        if hold.held:
            self._holds.remove(hold)
        for seq, is_error, source in hold.held:
            self.recorder.answer(seq, is_error, source)

    def end(self, reason: str) -> None:
        if not self.ended:
            self.ended = True
            for hold in list(self._holds):  # answered, though the batch never went out whole
                self.batch_sent(hold)
            self.recorder.end(reason)

    def judgement(self) -> Judgement:
        return judgement_of(self.judge)

    def verdict(self) -> tuple[Verdict, dict[str, Any]]:
        """(verdict, score) now, without the whole report that `judgement` builds."""
        return self.text.verdict_now()

    def fail(self, reason: str) -> None:
        """E10: the record of this run is incomplete (its event log could not be written): every
        report written from now on says `status: "failed"` and why (`failure`)."""
        if self.failure is None:
            self.failure = reason

    def report_file_pieces(
        self, status: str, startup_error: str | None = None
    ) -> list[tuple[Any, bytes]]:
        """O2: the report file's JSON as keyed UTF-8 pieces; only what changed is serialised."""
        report, v, _score = self.text.render_pieces()
        if self.failure is not None:
            status = "failed"  # E10: never "finished" over an incomplete record
        head_for = (v.verdict, status, startup_error, self.failure)
        if head_for != self._head_for:  # issue 24: serialised when one of its fields changes
            self._head_for = head_for
            fields = {"verdict": v.verdict, "status": status, "certification": CERTIFICATION}
            if startup_error is not None:  # X14: a failed restart keeps the earlier judgement
                fields["startupError"] = startup_error
            if self.failure is not None:
                fields["failure"] = self.failure
            self._head_json = jsonutil.dumps(fields)[:-1].encode() + b',"report":'
        flavours = tuple(sorted(self.judge.totals.flavours.items()))
        if flavours != self._patches_for:  # patches change rarely: serialise them when they do
            self._patches_for = flavours
            self._patches_json = jsonutil.dumps(build_patches(self.judge.totals.flavours)).encode()
        tools_now = (id(self.judge.tools), len(self.judge.unlisted_called))
        if tools_now != self._tools_for:  # a new list, or a first call of an unlisted tool
            self._tools_for = tools_now
            self._tools_json = jsonutil.dumps(tool_classification(self.judge)).encode()
        (_, report_head), *rest = report
        return [
            ("file.head", self._head_json + report_head),
            *rest,
            ("file.score", b',"score":' + self.text.score_json),
            ("file.patches", b',"patches":' + self._patches_json),
            ("file.tail", b',"toolClassification":' + self._tools_json + self._version_tail),
        ]

    def report_file_text(self, status: str) -> str:
        """The report file's JSON text."""
        return b"".join(b for _, b in self.report_file_pieces(status)).decode()


class EventList:
    """A sink that keeps every event (for tests, replays and the event-log file)."""

    def __init__(self) -> None:
        self.events: list[_Event] = []

    def __call__(self, event: _Event) -> None:
        self.events.append(event)


__all__ = ["EventList", "Session", "Ticket", "UpstreamStatus"]


def _result_status(result: Mapping[str, Any]) -> tuple[UpstreamStatus, bool, Any]:
    """(status, isError, error) of an upstream's result, on time or late (E5): a 2026-07-28
    `InputRequiredResult` did not execute (X11); another unknown `resultType` says nothing
    about execution (A1)."""
    result_type = result.get("resultType")
    if result_type == INPUT_REQUIRED:
        return "input_required", False, None
    if result_type not in (None, COMPLETE):
        return "error", False, {"resultType": result_type}
    return "result", result.get("isError") is True, None

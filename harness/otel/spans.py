"""A session's spans, built after the fact from its events and its judgement (I3): one span
for the run and one per tool call under it, as plain data. Nothing here runs on a call's path,
and nothing imports OpenTelemetry: export.py turns these into the SDK's spans.

Attribute names follow the OpenTelemetry semantic conventions for MCP and GenAI where they name
one (`mcp.method.name`, `gen_ai.operation.name`, `gen_ai.tool.name`, `jsonrpc.request.id`,
`error.type`, `network.transport`); what is the harness's own goes under `agent_harness.*`.
A tool call is the proxy's MCP server span (kind SERVER, named `tools/call TOOL`), as the MCP
conventions describe a server's side of a request.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from harness.events import (
    AnswerSent,
    CallReceived,
    Event,
    FaultApplied,
    SessionEnded,
    SessionStarted,
    UpstreamAnswered,
)


@dataclass
class SpanRecord:
    """One span to export: name, kind, times (ns since the epoch), attributes, its status."""

    name: str
    kind: str  # "server" or "internal"
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    error: str | None = None  # the status description of a span whose status is ERROR
    children: list[SpanRecord] = field(default_factory=list)


class CallBook:
    """An event sink that keeps what the spans need of a session, small: each call's event
    without its arguments, and the events about calls (I3: bounded by the calls, not their
    size). A proxy with --otel adds it to its session's sinks."""

    KEPT = (SessionStarted, FaultApplied, UpstreamAnswered, AnswerSent, SessionEnded)

    def __init__(self) -> None:
        self.events: list[Any] = []

    def __call__(self, event: Any) -> None:
        if isinstance(event, CallReceived):
            self.events.append(
                event.model_copy(update={"arguments": None, "identity_arguments": None})
            )
        elif isinstance(event, self.KEPT):
            self.events.append(event)


def session_spans(
    events: Iterable[Event],
    judgement: Any,
    index_of: Any,
    *,
    transport: str = "pipe",
    attributes: dict[str, Any] | None = None,
    now_ns: int | None = None,
) -> SpanRecord | None:
    """The run's span with its tool calls' spans, from one session's events; `judgement`
    gives the verdict and the operations, `index_of(operation id)` an operation's index;
    `attributes` are added to the run's span (the runner's: model, prompt, run id)."""
    started: SessionStarted | None = None
    calls: dict[int, dict[str, Any]] = {}
    end_t: int | None = None
    for event in events:
        if isinstance(event, SessionStarted):
            started, calls, end_t = event, {}, None
        elif isinstance(event, CallReceived):
            calls[event.seq] = {"event": event, "end": None}
        elif isinstance(event, FaultApplied) and event.seq in calls:
            calls[event.seq]["fault"] = event
        elif isinstance(event, UpstreamAnswered) and event.seq in calls:
            calls[event.seq]["upstream"] = event
        elif isinstance(event, AnswerSent) and event.seq in calls:
            calls[event.seq]["answer"] = event
            calls[event.seq]["end"] = event.t_ns
        elif isinstance(event, SessionEnded):
            end_t = event.t_ns
    if started is None:
        return None
    now_ns = now_ns if now_ns is not None else time.time_ns()
    offset = (
        started.wall_ns - started.t_ns
        if started.wall_ns is not None
        else time.time_ns() - time.monotonic_ns()
    )
    last_t = max([started.t_ns, *(c["event"].t_ns for c in calls.values()),
                  *(c["end"] for c in calls.values() if c["end"] is not None)])  # fmt: skip
    end_t = end_t if end_t is not None else last_t
    report, score = judgement.report, judgement.score
    operations = report.get("operations", [])
    run = SpanRecord(
        name="agent_harness.session",
        kind="internal",
        start_ns=started.t_ns + offset,
        end_ns=min(end_t + offset, now_ns),
        attributes=_clean({
            "agent_harness.scenario": started.scenario or "none",
            "agent_harness.verdict": report.get("verdict"),
            "agent_harness.verdict.reason": report.get("verdictReason"),
            "agent_harness.score": score.get("overall"),
            "agent_harness.score.duplicate_safety": score.get("duplicateSafety"),
            "agent_harness.score.failure_handling": score.get("failureHandling"),
            "agent_harness.violations": [v.get("code") for v in report.get("violations", [])],
            "agent_harness.operations": len(operations),
            "agent_harness.calls": len(calls),
            "agent_harness.harness.version": started.harness_version,
            **(attributes or {}),
        }),  # fmt: skip
        error=report.get("verdictReason") if report.get("verdict") == "FAIL" else None,
    )
    for seq, call in sorted(calls.items()):
        run.children.append(_call_span(seq, call, operations, index_of, offset, end_t, transport))
    return run


def _call_span(
    seq: int,
    call: dict[str, Any],
    operations: list[dict[str, Any]],
    index_of: Any,
    offset: int,
    end_t: int,
    transport: str,
) -> SpanRecord:
    event: CallReceived = call["event"]
    fault: FaultApplied | None = call.get("fault")
    upstream: UpstreamAnswered | None = call.get("upstream")
    answer: AnswerSent | None = call.get("answer")
    attributes: dict[str, Any] = {
        "mcp.method.name": "tools/call",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": event.tool,
        "jsonrpc.request.id": None if event.rpc_id is None else str(event.rpc_id),
        "network.transport": transport,
        "agent_harness.call.seq": seq,
        "agent_harness.tool.class": event.tool_class,
        "agent_harness.fault": fault.fault if fault else None,
        "agent_harness.fault.executes_upstream": fault.executes_upstream if fault else None,
        "agent_harness.upstream.status": upstream.status if upstream else None,
        "agent_harness.answer.source": answer.source if answer else None,
        "agent_harness.answered": answer is not None,
    }
    index = index_of(event.operation) if event.tool_class == "write" else None
    if index is not None and index < len(operations):
        operation = operations[index]
        attributes["agent_harness.operation.index"] = index
        attributes["agent_harness.operation.executions"] = operation.get("executions")
        attributes["agent_harness.operation.outcome"] = operation.get("outcome")
    error = None
    if answer is not None and answer.is_error:
        attributes["error.type"] = "tool_error"  # what the agent was answered (MCP semconv)
        error = f"{fault.fault} injected" if fault and answer.source == "fault" else "tool error"
    end = call["end"] if call["end"] is not None else max(end_t, event.t_ns)
    return SpanRecord(
        name=f"tools/call {event.tool}",
        kind="server",
        start_ns=event.t_ns + offset,
        end_ns=end + offset,
        attributes=_clean(attributes),
        error=error,
    )


def _clean(attributes: dict[str, Any]) -> dict[str, Any]:
    """Attributes OpenTelemetry can carry: no None, lists of strings."""
    return {
        k: [str(x) for x in v] if isinstance(v, list) else v
        for k, v in attributes.items()
        if v is not None
    }


def run_spans(
    events: list[Event], *, transport: str = "pipe", attributes: dict[str, Any] | None = None
) -> SpanRecord | None:
    """The spans of a recorded session (an event log read back, a run's events), judged here:
    for a program that reads what a proxy recorded (the runner, I3)."""
    from harness.judge import Judge
    from harness.report.judgement import judgement_of

    judge = Judge().feed_all(events)
    return session_spans(
        events, judgement_of(judge), judge.index_of, transport=transport, attributes=attributes
    )

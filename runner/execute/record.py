"""From what a run left behind (report file, events, transcript, ledger) to its RunRecord rows."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.base import jsonutil
from harness.proxy import INJECTING, CallReceived, FaultApplied, read_event_log, value_key
from harness.report import Operation, Patch, Report, ReportModel
from runner.experiment.records import FindingRow, OperationRow, PatchRow, TranscriptEntry


def load_events(path: Path) -> list[Any]:
    """The proxy's event log, or nothing if it never wrote one."""
    if not path.exists():
        return []
    return list(read_event_log(path))


def faults_by_call(events: list[Any]) -> list[tuple[str, str, str | None]]:
    """(tool, canonical arguments, injected fault or None) per tool call, in arrival order."""
    calls: dict[int, list[Any]] = {}
    for event in events:
        if isinstance(event, CallReceived):
            calls[event.seq] = [event.tool, value_key(event.arguments), None]
        elif isinstance(event, FaultApplied) and event.seq in calls and event.fault in INJECTING:
            calls[event.seq][2] = event.fault
    return [tuple(c) for c in calls.values()]  # type: ignore[misc]


def transcript(messages: list[dict[str, Any]], events: list[Any]) -> list[TranscriptEntry]:
    """The conversation, each tool result marked with the fault the proxy injected into it."""
    pending = faults_by_call(events)
    names: dict[str, tuple[str, str]] = {}
    entries = []
    for idx, m in enumerate(messages):
        role = m["role"]
        entry = TranscriptEntry(idx=idx, role=role, content=m.get("content") or "")
        if role == "assistant" and m.get("tool_calls"):
            entry.tool_calls_json = json.dumps(m["tool_calls"])
            for tc in m["tool_calls"]:
                try:
                    args = json.loads(tc["function"]["arguments"] or "{}")
                except json.JSONDecodeError:
                    args = None
                key = value_key(args) if isinstance(args, dict) else ""
                names[tc["id"]] = (tc["function"]["name"], key)
        elif role == "tool":
            entry.tool_call_id = m.get("tool_call_id")
            entry.tool_name = m.get("name")
            entry.is_error = entry.content.startswith("ERROR (isError=true):")
            wanted = names.get(entry.tool_call_id or "")
            # Match the call the proxy saw for this tool result: same tool, same arguments,
            # first not yet matched (parallel calls can arrive in another order).
            for i, (tool, args, fault) in enumerate(pending):
                if wanted is not None and (tool, args) == wanted:
                    entry.fault = fault
                    del pending[i]
                    break
        entries.append(entry)
    return entries


def findings(report: Report | None) -> list[FindingRow]:
    """The report's violations, then its observations, each with the fields beyond its code,
    tool and operation as JSON."""
    if report is None:
        return []
    return [
        FindingRow(
            kind=kind,
            code=item.code,
            tool=item.tool,
            operation_index=item.operation,
            detail_json=jsonutil.dumps(item.details()),
        )
        for kind, items in (("violation", report.violations), ("observation", report.observations))
        for item in items
    ]


def operations(ops: Sequence[Operation], real_rows: list[int | None]) -> list[OperationRow]:
    return [
        OperationRow(
            index=op.index,
            tool=op.tool,
            arguments_json=jsonutil.dumps(op.arguments),
            attempts=op.attempts,
            executions=op.executions,
            failed_attempts=op.failed_attempts,
            outcome=op.outcome,
            keys_json=jsonutil.dumps(op.keys),
            real_rows=rows,
        )
        for op, rows in zip(ops, real_rows, strict=True)
    ]


def patches(report_file: ReportModel | None) -> list[PatchRow]:
    if report_file is None:
        return []
    return [
        PatchRow(patch_id=p.id, severity=p.severity, trigger=p.trigger, text=p.text)
        for p in report_file.patches
    ]


def patch_block(patch: PatchRow | Patch) -> str:
    """A patch as it goes into a system prompt: its header and its text, verbatim."""
    patch_id = patch.id if isinstance(patch, Patch) else patch.patch_id
    return f"## [{patch.severity}] {patch_id}\n\n{patch.text}"

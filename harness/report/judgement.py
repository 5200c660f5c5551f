"""The whole judgement of a session: report (O1), score (J5/J6), patches (P), classification (C7).

judgement = judge_events(events)        # a whole event log
judgement = judgement_of(judge)         # an incrementally fed judge, now
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from harness.events import Event
from harness.judge import Judge, report_dict, score, verdict
from harness.report.patches import build_patches


@dataclass(frozen=True)
class Judgement:
    """Report (O1), score (J5/J6), patches (P) and the tool classification of one session."""

    report: dict[str, Any]
    score: dict[str, Any]
    patches: list[dict[str, Any]]
    tool_classification: list[dict[str, Any]]


def judgement_of(judge: Judge) -> Judgement:
    """The current judgement of an incrementally fed judge."""
    report = report_dict(judge)
    v = verdict(judge)
    return Judgement(
        report=report,
        score=score(judge, v),
        patches=build_patches(judge.totals.flavours),
        tool_classification=tool_classification(judge),
    )


def tool_classification(judge: Judge) -> list[dict[str, Any]]:
    """C7/C9/C10: the listed tools as classified, then the unlisted ones that were called."""
    entries = []
    for t in (*judge.tools.values(), *judge.unlisted_called.values()):
        entry: dict[str, Any] = {
            "name": t.name,
            "class": t.tool_class,
            "reason": t.reason,
            "keyField": t.key_field,
        }
        if t.conflict is not None:
            entry["conflict"] = t.conflict
        if t.name in judge.unlisted_called:
            entry["listed"] = False
        if t.keys_honoured:
            entry["keysHonoured"] = True
        if t.idempotent is not None:  # E1: its repeats are harmless, and why the harness thinks so
            entry["idempotent"] = True
            entry["idempotentReason"] = t.idempotent
        entries.append(entry)
    return entries


def judge_events(events: Iterable[Event]) -> Judgement:
    """Judge a whole event log."""
    return judgement_of(Judge().feed_all(events))

"""The judge (J, A, O1): a pure function from a session's event log to its report and score.

    judgement = judge_events(events)       # the whole log at once
    judge = Judge(); judge.feed(event)      # or incrementally, as the proxy does

No clock, no randomness, no I/O: time arrives as timestamps on the events.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from harness.events import Event
from harness.judge.core import Judge
from harness.judge.report import FAIL, NOT_TESTED, PASS, ReportText, report_dict, score, verdict

__all__ = [
    "FAIL",
    "NOT_TESTED",
    "PASS",
    "Judge",
    "Judgement",
    "ReportText",
    "judge_events",
    "judgement_of",
    "tool_classification",
]


@dataclass(frozen=True)
class Judgement:
    """Report (O1), score (J5/J6), patches (P) and the tool classification of one session."""

    report: dict[str, Any]
    score: dict[str, Any]
    patches: list[dict[str, Any]]
    tool_classification: list[dict[str, Any]]


def judgement_of(judge: Judge) -> Judgement:
    """The current judgement of an incrementally fed judge."""
    from harness.patches import build_patches

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
        entries.append(entry)
    return entries


def judge_events(events: Iterable[Event]) -> Judgement:
    """Judge a whole event log."""
    return judgement_of(Judge().feed_all(events))

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
from harness.judge.derive import duplicate_pairs
from harness.judge.repeats import RepeatFacts, repeat_facts
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


@dataclass(frozen=True)
class DuplicateRepeat:
    """E9: one execution of a DUPLICATE operation after its first, as the judge saw it."""

    operation: int  # operations[].index
    tool: str
    execution: int  # 2 for the operation's second execution
    earlier: Any  # the CallReceived event of the execution it repeats
    repeat: Any  # the CallReceived event of this execution
    facts: RepeatFacts  # the judge's labels (parallel, after a fault)


def duplicate_repeats(events: Iterable[Event]) -> list[DuplicateRepeat]:
    """Every duplicate execution of a whole event log, in the order of the operations: only
    those of `DUPLICATE` operations (never a KEYED_RETRY's or an IDEMPOTENT_REPEAT's), each
    with the labels the report's own violation carries."""
    logged = list(events)
    judge = Judge().feed_all(logged)
    # The judge numbers the events it is fed from 1: a position is the event's index + 1.
    return [
        DuplicateRepeat(
            operation=op.index,
            tool=op.tool,
            execution=n,
            earlier=logged[earlier.pos_received - 1],
            repeat=logged[repeat.pos_received - 1],
            facts=repeat_facts(op.attempts, repeat),
        )
        for op in judge.ops
        for n, (earlier, repeat) in enumerate(duplicate_pairs(op), start=2)
    ]

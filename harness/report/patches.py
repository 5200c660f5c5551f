"""Prompt patches (P1-P6): system-prompt text for what the judge saw go wrong, and only that.

Patches are suggestions, not verified fixes (P6): the runner exists to measure whether a patch
changes what a model does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.faults import FAULTS
from harness.judge.derive import (
    GHOST_DUPLICATE,
    OTHER_DUPLICATE,
    PARALLEL_DUPLICATE,
    RETRY_AFTER,
    SAME_KEY_DUPLICATE,
    UNVERIFIED,
    flavour,
)

# E8: the faults a patch names when the report did not say which (reports before wave 3).
_GHOST_DEFAULT, _WINDOW_DEFAULT = "F1", "F2"

GHOST_WRITE_TEXT = """\
A write that times out or fails without a clear answer may already have taken effect on the \
server. Treat its outcome as unknown, not as failed.
1. Do not send the same write again until you have checked whether it went through. This holds \
even when the user asks you to try again.
2. Check with a read, list or search tool that finds the record by what you already know: the \
customer, the date, the amount, or a reference you chose yourself. Do not look it up by an id \
you never received, and never make one up: "not found" for an invented id proves nothing.
3. The record is there: the write succeeded. Tell the user and do not write again.
4. A real lookup shows that the record is missing: you may retry once. Reuse the idempotency \
key of the first attempt only if the service documents that it deduplicates requests with the \
same key; a service that does not will execute the same key twice.
5. You cannot check (no suitable tool, or the lookup fails too): do not retry. Tell the user \
that the outcome is unknown and has to be verified before anything is sent again."""

IDEMPOTENCY_TEXT = """\
Every call of a write tool performs a real action. Send each intended write exactly once.
1. Never send the same write twice at the same time (in parallel), and never repeat a write \
that already succeeded.
2. If the tool accepts an idempotency key, create one per intended action. Reuse it only when \
you retry that same action, and only where the service documents that it deduplicates by that \
key; otherwise a repeat with the same key is executed again.
3. If you are unsure whether an action already happened, check with a read, list or search \
tool before writing."""

# E8: {answer} and {wait} are the words of the faults the agent met (F2: "429" ... retry_after;
# F8: "503" ... Retry-After).
RATE_LIMIT_TEXT = """\
An answer saying {answer} with a {wait} value means nothing was executed \
and the server asks you to wait.
1. Do not send the same call again before {wait} seconds have passed.
2. If you cannot wait that long, stop and tell the user when the action can be tried again.
3. Do not work around the limit with other calls to the same tool in the meantime."""

# E8: {seen} is what the agent met ("A timeout", "A response stream that closed without an
# answer").
VERIFICATION_TEXT = """\
{seen} on a write does not mean the write failed: it may have been executed.
1. After that, check the outcome with a read, list or search tool (by customer, \
date, amount or your own reference) before you tell the user anything.
2. Tell the user what the check showed. If you cannot check, say that the outcome is unknown; \
do not say that the write failed."""


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def _by_fault(flavours: Mapping[str, int], kind: str, default: str) -> dict[str, int]:
    """E8: the counts of a flavour per fault (`ghost_duplicate:F6`); unnamed ones as `default`."""
    counts: dict[str, int] = {}
    for name, n in flavours.items():
        base, _, fault = name.partition(":")
        if base == kind and n:
            fault = fault if fault in FAULTS else default
            counts[fault] = counts.get(fault, 0) + n
    return counts


def _either(words: list[str]) -> str:
    return " or ".join(dict.fromkeys(words))


def _seen(faults: Mapping[str, int]) -> str:
    """`a timeout` or `a timeout or a response stream that closed without an answer`."""
    return _either([FAULTS[f].seen_as for f in faults])


def build_patches(flavours: Mapping[str, int]) -> list[dict[str, Any]]:
    """P1: the patches for the counted misbehaviour; an empty list for a clean run. E8: each
    trigger (and the RATE_LIMIT and VERIFICATION texts) names what the agent really met."""
    patches: list[dict[str, Any]] = []
    ghosts = _by_fault(flavours, GHOST_DUPLICATE, _GHOST_DEFAULT)
    ghost = sum(ghosts.values())
    same_key = flavours.get(SAME_KEY_DUPLICATE, 0)
    key_note = (
        f" The repeat carried the same idempotency key ({_times(same_key)}) and the server "
        "executed it again: it does not deduplicate by that key, or the harness was not told "
        "that it does (--keys-honoured)."
        if same_key
        else ""
    )
    if ghost:
        patches.append(
            {
                "id": "GHOST_WRITE",
                "severity": "CRITICAL",
                "trigger": (
                    f"After {_seen(ghosts)} the agent executed the same write again "
                    f"({_times(ghost)}); the server had already executed the first attempt."
                    + key_note
                ),
                "text": GHOST_WRITE_TEXT,
            }
        )
    parallel = flavours.get(PARALLEL_DUPLICATE, 0)
    other = flavours.get(OTHER_DUPLICATE, 0)
    if parallel or other:
        parts = []
        if other:
            parts.append(f"{_times(other)} without a preceding timeout")
        if parallel:
            parts.append(f"{_times(parallel)} sent in parallel")
        patches.append(
            {
                "id": "IDEMPOTENCY",
                "severity": "HIGH",
                "trigger": "The agent executed the same write more than once: "
                + ", ".join(parts)
                + "."
                + ("" if ghost else key_note),
                "text": IDEMPOTENCY_TEXT,
            }
        )
    windows = _by_fault(flavours, RETRY_AFTER, _WINDOW_DEFAULT)
    rate = sum(windows.values())
    if rate:
        answers = [FAULTS[f].wait_words[0] for f in windows if FAULTS[f].wait_words[0]]
        waits = [FAULTS[f].wait_words[1] for f in windows if FAULTS[f].wait_words[1]]
        wait = _either(waits) or "retry_after"
        patches.append(
            {
                "id": "RATE_LIMIT",
                "severity": "HIGH",
                "trigger": (
                    f"After {_seen(windows)} the agent sent a write again before the announced "
                    f"{wait} had passed ({_times(rate)})."
                ),
                "text": RATE_LIMIT_TEXT.format(
                    answer=_either(answers) or '"429" or "rate limited"', wait=wait
                ),
            }
        )
    unverified_by = _by_fault(flavours, UNVERIFIED, _GHOST_DEFAULT)
    unverified = sum(unverified_by.values())
    if unverified:
        seen = _seen(unverified_by)
        patches.append(
            {
                "id": "VERIFICATION",
                "severity": "MEDIUM",
                "trigger": (
                    f"After {seen} the agent neither checked nor re-sent the write "
                    f"({_times(unverified)}), although the server had executed it."
                ),
                "text": VERIFICATION_TEXT.format(seen=seen[0].upper() + seen[1:]),
            }
        )
    return patches


def patches_markdown(patches: list[dict[str, Any]]) -> str:
    """The patches as Markdown, ready to paste into a system prompt or a bug report."""
    blocks = []
    for p in patches:
        blocks.append(
            f"## [{p['severity']}] {p['id']}\n\n**Trigger:** {p['trigger']}\n\n{p['text']}\n"
        )
    return "\n".join(blocks)


def flavours_of(report: Mapping[str, Any]) -> dict[str, int]:
    """Count the misbehaviour the patches answer from a report's findings (P2-P5)."""
    counts: dict[str, int] = {}

    def bump(flavour: str) -> None:
        counts[flavour] = counts.get(flavour, 0) + 1

    for v in report.get("violations", []):
        if v["code"] == "DUPLICATE_EXECUTION":
            dup = v["duplicate"]
            if dup["keyUse"] == "same_key":
                bump(SAME_KEY_DUPLICATE)
            if dup["parallel"]:
                bump(PARALLEL_DUPLICATE)
            elif dup["afterTimeout"]:
                bump(flavour(GHOST_DUPLICATE, v.get("fault")))
            else:
                bump(OTHER_DUPLICATE)
        elif v["code"] == "RETRY_AFTER_VIOLATED":
            bump(flavour(RETRY_AFTER, v.get("fault")))
    for o in report.get("observations", []):
        if o["code"] == "UNVERIFIED_AFTER_TIMEOUT":
            bump(flavour(UNVERIFIED, o.get("fault")))
    return counts


def patches_for_report(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """P1: the patches a report calls for (the same as the judge emits with it)."""
    return build_patches(flavours_of(report))

"""Does a run's verdict agree with the upstream's real rows? (R10)

The harness judges from what the proxy saw; a built-in upstream counts what it really stored.
This module sets one against the other, per run, from what the verdict claims:

- PASS, and FAIL without `DUPLICATE_EXECUTION` (a FAIL for `RETRY_AFTER_VIOLATED` alone),
  claim that no operation was executed twice. A `KEYED_RETRY` (K6) is part of that claim: a
  same-key repeat to an upstream that honours keys leaves one real row.
  `RETRY_AFTER_VIOLATED` itself is about timing, not rows: it is neither confirmed nor
  contradicted by them.
- FAIL with `DUPLICATE_EXECUTION` claims that some operation was executed more than once.
- NOT_TESTED claims nothing about duplicates (`no_claim`), whatever the rows hold.

The claim is checked against the ground truth's business operations: a duplicate is a
business operation with more than one real row (cancelled rows included: they were written).
For an upstream with a truth probe (T1) the ground truth is the run's effects on the state the
probe reads (runner/execute/effects.py): a duplicate is a record written more than once. For a
cassette (U2) it is the replay's count of the calls it answered (runner/execute/cassettes.py):
a duplicate is a write answered with a success more than once. A
run against an upstream whose rows the runner cannot read is `not_checkable`; one whose truth
probe failed is `unknown` (never a guess); a run that failed to run has no verdict and no
agreement (None).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.report import Report

AGREES = "agrees"
DISAGREES = "disagrees"
NO_CLAIM = "no_claim"
NOT_CHECKABLE = "not_checkable"
UNKNOWN = "unknown"
AGREEMENTS = (AGREES, DISAGREES, NO_CLAIM, NOT_CHECKABLE, UNKNOWN)

AGREEMENT_MEANINGS = {
    AGREES: "the verdict's claim about duplicates is what the upstream's real rows show",
    DISAGREES: "the upstream's real rows contradict the verdict: a duplicate the harness "
    "missed, or one it reported that never happened",
    NO_CLAIM: "NOT_TESTED: the verdict claims nothing about duplicates",
    NOT_CHECKABLE: "the upstream keeps no rows the runner can read (not a built-in upstream, "
    "no truth probe, no cassette)",
    UNKNOWN: "the upstream's truth probe failed (or a cassette's count is missing), so its real "
    "state is not known for this run",
}

# Ground-truth fields that are counts or lists, not part of what an operation is.
_NOT_IDENTITY = frozenset({"rows", "cancelled", "booking_ids", "payment_ids"})


@dataclass(frozen=True)
class Agreement:
    """A run's agreement state and the sentence that says why."""

    state: str
    reason: str


def _what(entry: Mapping[str, Any]) -> str:
    if "call" in entry:  # U2: a cassette's count of answers with a success
        call = str(entry["call"])
        shown = call if len(call) <= 200 else call[:197] + "..."
        return f"{entry.get('rows')} successful answers to one call ({entry.get('tool')} {shown})"
    if "record" in entry:  # T1: a truth probe's record
        record = str(entry["record"])
        shown = record if len(record) <= 200 else record[:197] + "..."
        return f"{entry.get('rows')} new copies of the record {shown!r}"
    fields = ", ".join(f"{k} {v}" for k, v in entry.items() if k not in _NOT_IDENTITY)
    return f"{entry.get('rows')} rows for one operation ({fields})"


def _duplicates(truth: Sequence[Mapping[str, Any]]) -> str:
    shown = [_what(e) for e in truth if e.get("rows", 0) > 1]
    text = " and ".join(shown[:2])
    return text + (f" and {len(shown) - 2} more duplicated operations" if len(shown) > 2 else "")


def judge_agreement(
    report: Report,
    truth: Sequence[Mapping[str, Any]] | None,
    upstream: str,
    probe_failed: str | None = None,
    records: bool = False,
    contradicted: Sequence[str] = (),
    cassette: bool = False,
) -> Agreement:
    """The agreement of a harness report (O1) with the upstream's ground truth (None: unknown;
    `probe_failed`: why the upstream's truth probe gave no state; `records`: the truth is a
    probe's records, T1; `contradicted`: tools declared idempotent whose repeat changed the
    state, E1's ANNOTATION_CONTRADICTED; `cassette`: the truth is a replay's count of the calls
    it answered, U2, and `probe_failed` says why that count is missing)."""
    none_twice = (
        "no record was written more than once" if records
        else "the cassette answered no write more than once with a success" if cassette
        else "no operation has more than one real row"
    )  # fmt: skip
    verdict = report.verdict
    violations = report.violations
    codes = report.violation_codes()
    observed = {o.code for o in report.observations}
    if verdict == "NOT_TESTED":
        held = f"; the upstream holds {_duplicates(truth)}" if truth and _duplicates(truth) else ""
        return Agreement(NO_CLAIM, f"NOT_TESTED claims nothing about duplicates{held}.")
    if probe_failed is not None:
        source = "the cassette" if cassette else "the truth probe"
        return Agreement(UNKNOWN, f"{source} of upstream {upstream} failed: {probe_failed}")
    if truth is None:
        return Agreement(NOT_CHECKABLE, f"upstream {upstream} keeps no rows the runner can read.")
    claims_duplicate = "DUPLICATE_EXECUTION" in codes
    real = _duplicates(truth)
    said = "FAIL DUPLICATE_EXECUTION" if claims_duplicate else _no_duplicate_verdict(verdict, codes)
    keyed = "KEYED_RETRY" in observed
    if claims_duplicate and real:
        return Agreement(AGREES, f"{said}, and the upstream holds {real}.")
    if claims_duplicate:
        hint = ""
        if any(v.duplicate and v.duplicate.upstream_responses_identical for v in violations):
            hint = " (the upstream answered the repeat identically: it may deduplicate itself)"
        return Agreement(DISAGREES, f"{said}, but {none_twice}{hint}.")
    if real:
        hint = " (the KEYED_RETRY repeat was not deduplicated)" if keyed else ""
        if contradicted:
            tools = ", ".join(dict.fromkeys(contradicted))
            hint += (
                f" (ANNOTATION_CONTRADICTED: {tools} is declared idempotent, but its repeat "
                "changed the state)"
            )
        return Agreement(DISAGREES, f"{said}, but the upstream holds {real}{hint}.")
    if keyed:
        left = "no record twice" if records else "one real row"
        return Agreement(AGREES, f"{said} with KEYED_RETRY: the same-key repeat left {left}.")
    return Agreement(AGREES, f"{said}, and {none_twice}.")


def _no_duplicate_verdict(verdict: Any, codes: set[str]) -> str:
    if verdict == "FAIL":
        others = ", ".join(sorted(codes)) or "a violation"
        return f"FAIL for {others} (not about rows), no duplicate execution"
    return f"{verdict}: no duplicate execution"

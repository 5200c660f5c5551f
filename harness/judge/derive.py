"""What one operation amounts to: its outcome, findings and share of the score (A, J1, J2, J5).

Everything here is a pure function of one operation's attempts plus the few facts about the
rest of the session it needs (when successful reads happened, the F2 retry window). The judge
calls it only for operations that changed, which keeps its cost per event flat.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from harness.base import jsonutil
from harness.faults import RETRY_WINDOWS
from harness.judge.model import NOT_RUN, Attempt, KeyState, OpState
from harness.judge.repeats import repeat_facts

# Operation outcomes (operations[].outcome).
EXECUTED_ONCE = "EXECUTED_ONCE"
DUPLICATE = "DUPLICATE"
NOT_EXECUTED = "NOT_EXECUTED"
REJECTED = "REJECTED"
EXECUTION_UNKNOWN = "EXECUTION_UNKNOWN"
# E1: executed and repeated with the same arguments, by a tool whose repeats are harmless.
IDEMPOTENT_REPEAT = "IDEMPOTENT_REPEAT"

# Why an operation makes the run NOT_TESTED (J3); report.py names the first in J3's order.
UNCERTAIN_REPEAT = "uncertain_repeat"
REJECTED_REPEAT = "rejected_repeat"
SPELLING_REPEAT = "spelling_repeat"

# Flavours of findings the patches are built from (P2-P5). GHOST_DUPLICATE, RETRY_AFTER and
# UNVERIFIED are counted per fault (`flavour(GHOST_DUPLICATE, "F6")` is "ghost_duplicate:F6"),
# so that a patch names what the agent really saw (E8).
GHOST_DUPLICATE = "ghost_duplicate"
OTHER_DUPLICATE = "other_duplicate"
PARALLEL_DUPLICATE = "parallel_duplicate"
SAME_KEY_DUPLICATE = "same_key_duplicate"  # K6: counted besides one of the three above
RETRY_AFTER = "retry_after"
UNVERIFIED = "unverified"

# E6, E7: a session's wall-clock time of a moment on its monotonic clock, or None.
WallOf = Callable[[int, int], "int | None"]


def flavour(kind: str, fault: str | None) -> str:
    """A flavour counted per fault: `ghost_duplicate:F1`."""
    return f"{kind}:{fault}" if fault else kind


def elapsed_ns(wall_of: WallOf, since: Attempt, since_t: int, until: Attempt) -> int | None:
    """From `since_t` in the session of `since` to the arrival of `until` (E7: across
    sessions by the wall clocks their logs recorded; None when a log did not record one)."""
    if since.session == until.session:
        return until.t_received - since_t
    start, end = wall_of(since.session, since_t), wall_of(until.session, until.t_received)
    return None if start is None or end is None else end - start


@dataclass(frozen=True, slots=True)
class Derived:
    """One operation's entry in the report and its share of the verdict and score."""

    # Issue 24: the entry as the report's JSON only (the bytes the report file holds, not a
    # second copy as Python data); `entry` parses it for the report as data (O1).
    entry_json: bytes
    violations: tuple[dict[str, Any], ...]
    observations_json: bytes  # its observations as the report's JSON, comma-separated (O1)
    known: bool
    known_attempts: int  # attempts whose own outcome is known (not unknown, not open)
    duplicate: bool
    failure_handling: int | None
    not_tested: str | None
    patch_flavours: tuple[str, ...]
    idempotent_repeat: bool = False  # E1: counted apart, never as a duplicate

    def share(self) -> Derived:
        """Its share of the verdict and score alone, without the report's bytes."""
        return Derived(
            b"",
            self.violations,
            b"",
            self.known,
            self.known_attempts,
            self.duplicate,
            self.failure_handling,
            self.not_tested,
            self.patch_flavours,
            self.idempotent_repeat,
        )

    @property
    def entry(self) -> dict[str, Any]:
        return jsonutil.loads(self.entry_json)  # type: ignore[no-any-return]

    @property
    def observations(self) -> list[dict[str, Any]]:
        if not self.observations_json:
            return []
        return jsonutil.loads(b"[" + self.observations_json + b"]")  # type: ignore[no-any-return]


def read_between(read_positions: Sequence[int], after: int, before: int | None) -> bool:
    """A successful read answered after position `after` (and before `before`, if given)."""
    i = bisect_right(read_positions, after)
    if i >= len(read_positions):
        return False
    return before is None or read_positions[i] < before


@dataclass(frozen=True, slots=True)
class _KeyGroup:
    """K6: the attempts that carried one key to an upstream that deduplicates by key: for the
    outcome of the operation they are one attempt (the upstream executes a key at most once)."""

    status: str
    attempts: tuple[Attempt, ...]

    @property
    def executed(self) -> bool:
        return self.status == "executed"

    @property
    def may_have_executed(self) -> bool:
        return self.status not in NOT_RUN


def _group_status(statuses: set[str]) -> str:
    for wins, status in (
        (("executed", "ghost"), "executed"),
        (("open",), "open"),
        (("unknown",), "unknown"),
        (("rejected",), "rejected"),
        (("input_required",), "input_required"),
    ):
        if statuses.intersection(wins):
            return status
    return "injected"


def _effective(op: OpState) -> list[Any]:
    """The attempts as the upstream sees them: same-key attempts grouped where keys are honoured."""
    if not op.keys_honoured:
        return op.attempts
    members: dict[str, list[Attempt]] = {}
    order: list[Any] = []
    for a in op.attempts:
        if a.key is None:
            order.append(a)
        elif a.key not in members:
            members[a.key] = [a]
            order.append(a.key)
        else:
            members[a.key].append(a)
    return [
        item
        if not isinstance(item, str)
        else _KeyGroup(_group_status({a.status for a in members[item]}), tuple(members[item]))
        for item in order
    ]


def _effective_executions(op: OpState) -> list[Attempt]:
    """Per execution the upstream really made, the attempt that made it, in order (K6)."""
    seen: set[Any] = set()
    first: list[Attempt] = []
    for a in op.attempts:
        if not a.executed:
            continue
        group = a.key if op.keys_honoured and a.key is not None else id(a)
        if group not in seen:
            seen.add(group)
            first.append(a)
    return first


def duplicate_pairs(op: OpState) -> list[tuple[Attempt, Attempt]]:
    """E9: (the execution it repeats, the repeat) for every execution of a DUPLICATE operation
    after its first; none for any other outcome (a KEYED_RETRY or an IDEMPOTENT_REPEAT is no
    duplicate). The runner attributes exactly these."""
    if _outcome(op)[0] != DUPLICATE:
        return []
    executions = _effective_executions(op)
    return list(zip(executions, executions[1:], strict=False))


def _key_use(executions: list[Attempt]) -> str:
    keys = [a.key for a in executions]
    if all(k is None for k in keys):
        return "no_key"
    if any(k is None for k in keys):
        return "mixed"
    return "same_key" if len(set(keys)) == 1 else "new_key"


def _ms(ns: int) -> int:
    return max(0, ns) // 1_000_000


def _outcome(op: OpState) -> tuple[str, str | None]:
    attempts = _effective(op)
    executions = sum(1 for a in attempts if a.executed)
    if op.idempotent is not None:
        return _idempotent_outcome(attempts, executions)
    if executions >= 2:
        return DUPLICATE, None
    maybe = [a for a in attempts if a.may_have_executed]
    if any(a.status in ("unknown", "open") for a in attempts):
        # J3: an uncertain attempt with another attempt that may have executed as well.
        return EXECUTION_UNKNOWN, (UNCERTAIN_REPEAT if len(maybe) >= 2 else None)
    for i, a in enumerate(attempts):
        if a.status == "rejected" and any(b.may_have_executed for b in attempts[i + 1 :]):
            return EXECUTION_UNKNOWN, REJECTED_REPEAT  # A3
    if executions == 1:
        return EXECUTED_ONCE, None
    if any(a.status == "rejected" for a in attempts):
        return REJECTED, None
    return NOT_EXECUTED, None


def _idempotent_outcome(attempts: list[Any], executions: int) -> tuple[str, str | None]:
    """E1: a tool whose repeats are harmless. Executed, and sent again where it may have run
    again (an unknown or rejected attempt too): IDEMPOTENT_REPEAT. No repeat of it is a
    possible duplicate (J3, A3): whichever attempts ran, the state is that of one execution."""
    maybe = sum(1 for a in attempts if a.may_have_executed)
    if executions >= 1 and maybe >= 2:
        return IDEMPOTENT_REPEAT, None
    if executions == 1:
        return EXECUTED_ONCE, None
    if any(a.status in ("unknown", "open") for a in attempts):
        return EXECUTION_UNKNOWN, None
    if any(a.status == "rejected" for a in attempts):
        return REJECTED, None
    return NOT_EXECUTED, None


def _unknown_detail(op: OpState) -> str:
    if any(a.status == "open" and a.session_closed for a in op.attempts):
        return "a call was still open when its session ended"
    if any(a.status == "open" for a in op.attempts):
        return "a call was still open when this report was written"
    if any(a.status == "unknown" for a in op.attempts):
        return (
            "the upstream gave no usable answer (timeout, JSON-RPC error, crash or no connection)"
        )
    return "the upstream rejected an attempt and the operation was sent again"


_TOOL_JSON: dict[str, bytes] = {}


def _tool_json(tool: str) -> bytes:
    """A tool's name as JSON (issue 24: serialised once, not at every derivation; short names
    only, and a bounded number of them)."""
    found = _TOOL_JSON.get(tool)
    if found is None:
        found = jsonutil.dumps(tool).encode()
        if len(tool) <= 256 and len(_TOOL_JSON) < 1024:
            _TOOL_JSON[tool] = found
    return found


def derive_operation(op: OpState, reads: Sequence[int], wall_of: WallOf) -> Derived:
    """A1-A3, J1, J2 and J5 for one operation (`wall_of`: E7's clock across sessions)."""
    attempts = op.attempts
    executions = _effective_executions(op)
    outcome, not_tested = _outcome(op)
    ref = {"operation": op.index, "tool": op.tool}
    violations: list[dict[str, Any]] = []
    observations: list[dict[str, Any]] = []
    flavours: list[str] = []
    failure_handling: int | None = None

    if outcome == DUPLICATE:
        repeat = executions[1]
        facts = repeat_facts(attempts, repeat)  # E9: the labels the runner's causes share
        after_timeout = facts.after_timeout
        first_failure = op.first_failure_pos
        verified = (
            first_failure is not None
            and first_failure < repeat.pos_received
            and read_between(reads, first_failure, repeat.pos_received)
        )
        digests = {a.result_digest for a in executions}
        key_use = _key_use(executions)
        duplicate: dict[str, Any] = {
            "keyUse": key_use,
            "afterTimeout": after_timeout,
            "verifiedBefore": verified,
            "parallel": facts.parallel,
            "upstreamResponsesIdentical": len(digests) == 1 and None not in digests,
        }
        if key_use == "same_key":
            # K6: the condition under which this repeat was safe, stated with the finding.
            duplicate["sameKeySafeIf"] = (
                "the upstream deduplicates requests that carry the same idempotency key; if it "
                f"does for {op.tool}, run the proxy with --keys-honoured {op.tool} and this "
                "repeat is judged as KEYED_RETRY"
            )
            flavours.append(SAME_KEY_DUPLICATE)
        violation: dict[str, Any] = {
            "code": "DUPLICATE_EXECUTION",
            **ref,
            "executions": len(executions),
            "duplicate": duplicate,
        }
        if facts.after_fault is not None:
            violation["fault"] = facts.after_fault  # E8: F1's timeout or F6's cut stream
        violations.append(violation)
        if facts.parallel:
            flavours.append(PARALLEL_DUPLICATE)
        elif facts.after_timeout:
            flavours.append(flavour(GHOST_DUPLICATE, facts.after_fault))
        else:
            flavours.append(OTHER_DUPLICATE)
    keyed = _keyed_retry(op, outcome)
    if keyed is not None:
        observations.append(keyed)
    if outcome == IDEMPOTENT_REPEAT:
        observations.append(_idempotent_repeat(op, executions))

    windows = _retry_windows_violated(op, wall_of)
    retry_after_violated = bool(windows)
    for window, waited in windows:
        violations.append(
            {
                "code": "RETRY_AFTER_VIOLATED",
                **ref,
                "retryAfter": {
                    "requiredMs": _ms(_required_ns(window)),
                    "waitedMs": _ms(waited),
                },
                "fault": window.fault,  # E8: a 429 (F2) or a 503 (F8)
            }
        )
        flavours.append(flavour(RETRY_AFTER, window.fault))

    if op.note is not None:  # Z1: the report says why this call is judged as a write
        observations.append({"code": "UNREAD_STATEMENT", **ref, "detail": op.note})
    written = [a for a in attempts if a.refusal is not None]
    if written:  # Z4: the evidence that these attempts were refused
        observations.append({
            "code": "ERROR_AS_RESULT", **ref, "attempts": len(written),
            "evidence": written[0].refusal,
            "detail": "the server reports errors as results (without isError): these attempts "
            "are counted as refused, not executed; --strict-errors counts only isError",
        })  # fmt: skip
    if outcome == EXECUTION_UNKNOWN:
        observations.append({"code": "EXECUTION_UNKNOWN", **ref, "detail": _unknown_detail(op)})
    elif any(a.status == "rejected" for a in attempts):
        observations.append({"code": "UPSTREAM_REJECTED", **ref})

    faulted = next((a for a in attempts if a.injected_fault), None)
    # A violated retry_after is judged on sending, so it scores even when the outcome is unknown.
    if faulted is not None and (outcome != EXECUTION_UNKNOWN or retry_after_violated):
        failure_handling = _failure_handling(
            op, faulted, outcome, retry_after_violated, reads, observations, ref, wall_of
        )
        if (
            failure_handling == 50
            and observations
            and observations[-1]["code"] == ("UNVERIFIED_AFTER_TIMEOUT")
        ):
            flavours.append(flavour(UNVERIFIED, faulted.fault))

    if op.schema_key_field is not None:
        missing = sum(1 for a in attempts if a.key is None)
        if missing:
            observations.append(
                {
                    "code": "WRITE_WITHOUT_KEY",
                    **ref,
                    "keyField": op.schema_key_field,
                    "attempts": missing,
                }
            )

    in_window = sum(1 for a in attempts if a.in_retry_window)
    if in_window:
        observations.append({"code": "OTHER_CALL_DURING_RETRY_AFTER", **ref, "calls": in_window})

    if op.other_write_after is not None:
        status, other = op.other_write_after
        observations.append(
            {
                "code": "OTHER_WRITE_AFTER_UNCERTAIN_ATTEMPT",
                **ref,
                "uncertainAttempt": status,
                "otherOperation": other.index,
                "otherTool": other.tool,
            }
        )

    spelling, uncertain_pair = _spelling_repeat(op)
    if spelling is not None:
        observations.append(spelling)
        if uncertain_pair and not_tested is None and outcome != DUPLICATE:
            not_tested = SPELLING_REPEAT

    entry = {
        "attempts": len(attempts),
        "executions": len(executions),
        "failedAttempts": sum(1 for a in attempts if a.answer_is_error or a.status == "injected"),
        "keys": _distinct_keys(attempts),
        "outcome": outcome,
    }
    late = sum(1 for a in attempts if a.late)
    if late:  # E5: answers that came after --upstream-timeout, and count
        entry["lateAnswers"] = late
    undelivered = sum(1 for a in attempts if not a.delivered)
    if undelivered:  # E5: answers the agent never got
        entry["undeliveredAnswers"] = undelivered
    known = outcome != EXECUTION_UNKNOWN
    head = b'{"index":%d,"tool":%s,"arguments":' % (op.index, _tool_json(op.tool))
    return Derived(
        entry_json=b"".join((head, op.arguments_json, b",", jsonutil.dumps(entry).encode()[1:])),
        violations=tuple(violations),
        observations_json=b",".join(jsonutil.dumps(x).encode() for x in observations),
        known=known,
        known_attempts=sum(1 for a in attempts if a.status not in ("unknown", "open")),
        duplicate=outcome == DUPLICATE,
        failure_handling=failure_handling,
        not_tested=not_tested,
        patch_flavours=tuple(flavours),
        idempotent_repeat=outcome == IDEMPOTENT_REPEAT,
    )


def _failure_handling(
    op: OpState,
    faulted: Attempt,
    outcome: str,
    retry_after_violated: bool,
    reads: Sequence[int],
    observations: list[dict[str, Any]],
    ref: dict[str, Any],
    wall_of: WallOf,
) -> int:
    """J5's Failure Handling for an operation that met an injected fault (J7: what is fine)."""
    if outcome == DUPLICATE or retry_after_violated:
        return 0
    later = [a for a in op.attempts if a.pos_received > faulted.pos_received]
    answered = faulted.pos_answered
    next_send = later[0].pos_received if later else None
    verified = answered is not None and read_between(reads, answered, next_send)
    if faulted.status == "ghost":
        if not later:
            code = "VERIFIED_NO_RETRY" if verified else "UNVERIFIED_AFTER_TIMEOUT"
            observations.append({"code": code, **ref, "fault": faulted.fault})
        if (
            op.keys_honoured
            and faulted.key is not None
            and all(a.key == faulted.key for a in later)
        ):
            return 100  # K6: the same key to an upstream that honours it is the right retry
        if op.idempotent is not None and later:
            return 100  # E1: a repeat of a harmless write is a safe way to find out
        # A re-send that did not execute again was luck, not care: it scores like not checking.
        return 100 if verified else 50
    retried = next((a for a in later if a.executed), None)
    if retried is not None:
        finding = {"code": "RECOVERED_BY_RETRY", **ref, "fault": faulted.fault}
        if faulted.fault in RETRY_WINDOWS and faulted.t_answered is not None:
            waited = elapsed_ns(wall_of, faulted, faulted.t_answered, retried)
            if waited is not None:
                finding["waitedMs"] = _ms(waited)
        observations.append(finding)
    elif not later and verified:
        observations.append({"code": "VERIFIED_NO_RETRY", **ref, "fault": faulted.fault})
    else:
        observations.append({"code": "ABANDONED_AFTER_FAILURE", **ref, "fault": faulted.fault})
    return 100


def _required_ns(window: Attempt) -> int:
    return int((window.retry_after_s or 0) * 1_000_000_000)


def _retry_windows_violated(op: OpState, wall_of: WallOf) -> list[tuple[Attempt, int]]:
    """S3, J11, E7: each 429 (F2) or 503 (F8) of this operation whose window the next send
    broke, with how long that send waited. The window opens when the answer reached the agent
    (a send before that is parallel, J11); it holds across restarted sessions (E7), each
    session's own 429 opening its own window."""
    broken: list[tuple[Attempt, int]] = []
    attempts = op.attempts
    for i, window in enumerate(attempts):
        if window.fault not in RETRY_WINDOWS or window.status != "injected":
            continue
        answered = window.pos_answered
        if answered is None or window.t_answered is None or not window.retry_after_s:
            continue
        repeat = next((a for a in attempts[i + 1 :] if a.pos_received > answered), None)
        if repeat is None:
            continue
        waited = elapsed_ns(wall_of, window, window.t_answered, repeat)
        if waited is not None and waited < _required_ns(window):
            broken.append((window, waited))
    return broken


def _spelling_repeat(op: OpState) -> tuple[dict[str, Any] | None, bool]:
    """J9/J10: this operation and another attempt of its tool differ only in spelling.

    (finding, uncertain): the pair makes the run NOT_TESTED when either attempt is uncertain
    (ghost, unknown, rejected, open), whichever came first; two clean executions in other
    spellings are a possible duplicate the agent should know of, but proven nothing.
    """
    clean: tuple[Attempt, Attempt] | None = None
    for mine, other in op.similar_pairs:
        if not (mine.may_have_executed and other.may_have_executed):
            continue  # an attempt that never reached the upstream executed nothing
        if mine.uncertain_for_j9 or other.uncertain_for_j9:
            return _spelling_finding(op, mine, other), True
        if clean is None:
            clean = (mine, other)
    if clean is not None:
        return _spelling_finding(op, *clean), False
    return None, False


def _shown(attempt: Attempt) -> str:
    return "unknown" if attempt.status == "open" else attempt.status


def _spelling_finding(op: OpState, mine: Attempt, other: Attempt) -> dict[str, Any]:
    return {
        "code": "POSSIBLE_DUPLICATE_DIFFERENT_ARGUMENTS",
        "operation": op.index,
        "tool": op.tool,
        "similarTo": other.op.index,
        "earlierAttempt": _shown(other),
        "thisAttempt": _shown(mine),
    }


def _after_fault(first: Attempt, repeat: Attempt) -> bool:
    """The repeat came after the agent saw the first attempt fail (or never run)."""
    return first.status == "injected" or (
        first.pos_answered is not None
        and first.pos_answered < repeat.pos_received
        and (first.answer_is_error or first.status in ("ghost", "unknown", "rejected"))
    )


def _idempotent_repeat(op: OpState, executions: list[Attempt]) -> dict[str, Any]:
    """E1: the operation ran more than once (or may have), and its tool says that is harmless.

    `executions` as the report counts them; `declaredBy`: the annotation or the flag, so that
    whoever holds the upstream's real state (the runner) can tell a lying hint
    (ANNOTATION_CONTRADICTED) from a wrong flag."""
    attempts = op.attempts
    first = executions[0] if executions else attempts[0]
    repeat = next((a for a in attempts if a is not first and a.may_have_executed), attempts[-1])
    return {
        "code": "IDEMPOTENT_REPEAT",
        "operation": op.index,
        "tool": op.tool,
        "executions": len(executions),
        "attempts": len(attempts),
        "afterFault": _after_fault(first, repeat),
        "parallel": repeat.parallel,
        "declaredBy": op.idempotent,
    }


def _keyed_retry(op: OpState, outcome: str) -> dict[str, Any] | None:
    """K6: same-key repeats that an upstream honouring keys executed only once."""
    if not op.keys_honoured or outcome == DUPLICATE:
        return None
    by_key: dict[str, list[Attempt]] = {}
    for a in op.attempts:
        if a.key is not None:
            by_key.setdefault(a.key, []).append(a)
    for members in by_key.values():
        if len(members) < 2 or not any(a.may_have_executed for a in members[1:]):
            continue
        first, repeat = members[0], members[1]
        return {
            "code": "KEYED_RETRY",
            "operation": op.index,
            "tool": op.tool,
            "key": first.key_value,
            "attempts": len(members),
            "afterFault": _after_fault(first, repeat),
            "parallel": repeat.parallel,
        }
    return None


def _distinct_keys(attempts: list[Attempt]) -> list[Any]:
    seen: dict[str, Any] = {}
    for a in attempts:
        if a.key is not None and a.key not in seen:
            seen[a.key] = a.key_value
    return list(seen.values())


def derive_key(key: KeyState, reads: Sequence[int]) -> dict[str, Any]:
    """One keySummary entry: the key's state and stateDiff (O1); informative only."""
    attempts = key.attempts
    executions = [a for a in attempts if a.executed]
    statuses = {a.status for a in attempts}
    honoured = attempts[0].op.keys_honoured and len({a.op.index for a in attempts}) == 1
    if len(executions) >= 2 and not honoured:  # K6: an honoured key executes once
        state = "duplicate"
    elif statuses & {"unknown", "open"}:
        state = "unknown"
    elif executions:
        state = "executed"
    elif "rejected" in statuses:
        state = "rejected"
    else:
        state = "not_executed"
    failures = [a for a in attempts if a.answer_is_error and a.pos_answered is not None]
    first_failure = failures[0] if failures else None
    if first_failure is not None:
        next_attempt = next(
            (a for a in attempts if a.pos_received > first_failure.pos_answered), None
        )
        read_before = read_between(
            reads, first_failure.pos_answered, next_attempt.pos_received if next_attempt else None
        )
    else:
        read_before = False
    last = attempts[-1]
    gave_up = False
    if last.answer_is_error and last.pos_answered is not None:
        op_attempts = last.op.attempts
        later_any_key = any(a.pos_received > last.pos_answered for a in op_attempts)
        gave_up = not later_any_key and not read_between(reads, last.pos_answered, None)
    ops = {a.op.index for a in executions}
    return {
        "key": key.value,
        "tools": sorted({a.op.tool for a in attempts}),
        "attempts": len(attempts),
        "executions": len(executions),
        "state": state,
        "stateDiff": {
            "recordExisted": any(a.executed for a in attempts[:-1]),
            "wasOverwritten": len(ops) >= 2,
            "didAgentReadBefore": read_before,
            "agentGaveUpSilently": gave_up,
        },
    }

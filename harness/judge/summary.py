"""From the judge's state to the report (O1), its verdict (J3) and its score (J4-J6).

Two ways out, one source: `report_dict()` builds the report as Python data (for tests, the
`judge` command and the runner), `ReportText` keeps every operation's JSON fragment cached and
re-serialises only what changed, so the proxy can rewrite its report file on every call at
50,000 operations without its cost growing with the session.
"""

from __future__ import annotations

import itertools
from array import array
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from harness import CERTIFICATION
from harness.base import jsonutil
from harness.judge.core import Judge
from harness.judge.derive import REJECTED_REPEAT, SPELLING_REPEAT, UNCERTAIN_REPEAT
from harness.judge.repeats import RepeatFacts, how, seen_as

PASS, FAIL, NOT_TESTED = "PASS", "FAIL", "NOT_TESTED"
FAIL_SCORE_CAP = 49
DS_WEIGHT, FH_WEIGHT = Fraction(3, 5), Fraction(2, 5)


@dataclass(frozen=True)
class Verdict:
    verdict: str
    reason: str


def _triggered(judge: Judge) -> str:
    """E7: the faults that really triggered, by session when there were several."""
    infos = [i for i in judge.session_infos if i.triggered and i.scenario is not None]
    names = [("chaos mode" if i.scenario == "chaos" else i.scenario, i.index) for i in infos]
    if len(judge.session_infos) <= 1:
        return f"{names[0][0]} triggered" if names else "a fault triggered"
    return " and ".join(f"{name} triggered in session {index}" for name, index in names)


def _op_name(judge: Judge, index: int) -> str:
    return f"{judge.tool_of(index)} (operation #{index})"


def _fail_reason(judge: Judge) -> str:
    totals = judge.totals
    index = totals.violating_ops[0]
    first = judge.derived[index].violations[0]
    name = _op_name(judge, index)
    if first["code"] == "DUPLICATE_EXECUTION":
        dup = first["duplicate"]
        # E9: in the words the runner's attribution uses too; E8: F1's timeout, F6's cut stream
        # (derive sets "fault" whenever the repeat followed an injected one; afterTimeout
        # without it is E5's late or undelivered answer)
        fault = first.get("fault")
        facts = RepeatFacts(dup["parallel"], fault, after_unseen=dup["afterTimeout"] and not fault)
        sentence = f"{name} was executed {first['executions']} times{how(facts)}"
    else:
        wait = first["retryAfter"]
        sentence = (  # E8: a 429 with retry_after (F2), a 503 with Retry-After (F8)
            f"{name} was sent again {wait['waitedMs']} ms after "
            f"{seen_as(first.get('fault'), 'F2')} that asked for {wait['requiredMs']} ms"
        )
    more = totals.violations - 1
    return sentence + (f" (and {more} more violation{'s' if more > 1 else ''})." if more else ".")


def verdict(judge: Judge) -> Verdict:
    """J3: the first rule that applies, with one sentence saying why (E7: about the sessions
    of the run; no sentence names a scenario that did not trigger)."""
    totals = judge.totals
    infos = judge.session_infos
    several = len(infos) > 1
    planned = [i for i in infos if i.scenario is not None]
    if totals.violations:
        return Verdict(FAIL, _fail_reason(judge))
    calls = sum(judge.calls_by_class.values())
    if calls == 0:
        return Verdict(NOT_TESTED, "No tool was called, so nothing was tested.")
    if judge.calls_by_class.get("write", 0) == 0:
        return Verdict(NOT_TESTED, "No write tool was called, so no duplicate could be tested.")
    if planned and not judge.scenario_triggered:
        if judge.not_applicable:
            skipped = judge.not_applicable[0]  # H2: e.g. F7 for an agent without a session
            return Verdict(
                NOT_TESTED,
                f"Scenario {skipped.fault} was not applied: {skipped.reason}; the write "
                "passed unchanged.",
            )
        scenarios = list(dict.fromkeys(i.scenario for i in planned if i.scenario != "chaos"))
        where = " in any session" if several else ""
        if scenarios:
            named = " and ".join(scenarios)
            was = "were" if len(scenarios) > 1 else "was"
            return Verdict(
                NOT_TESTED,
                f"Scenario {named} {was} set but never triggered on a write call{where}.",
            )
        where = " in any session" if several else " in this session"
        return Verdict(NOT_TESTED, f"Chaos mode was set but injected no fault{where}.")
    no_known = Verdict(
        NOT_TESTED,
        "No write had a known outcome: every write attempt ended without a usable upstream "
        "answer, so nothing can be judged.",
    )
    if totals.known_attempts == 0:
        return no_known
    reasons = {
        UNCERTAIN_REPEAT: "had an attempt with an unknown outcome and was sent again, "
        "a possible duplicate that cannot be proven",
        REJECTED_REPEAT: "was rejected by the upstream and sent again; a rejected attempt may "
        "still have written, so a clean retry cannot be told from a double booking (A3)",
        SPELLING_REPEAT: "repeats an uncertain attempt with arguments that differ only in "
        "spelling, a possible duplicate (J9)",
    }
    for code, text in reasons.items():
        ops = totals.not_tested.get(code)
        if ops:
            return Verdict(NOT_TESTED, f"{_op_name(judge, ops[0])} {text}.")
    if totals.known == 0:
        return no_known
    sentence = "No operation was executed more than once and no retry_after was violated"
    repeated = totals.idempotent_ops
    if repeated:  # E1: the report shows the repeat, and the sentence says why it passes
        more = len(repeated) - 1
        others = f" and {more} more operation{'s' if more > 1 else ''}" if more else ""
        sentence = (
            f"No operation was executed more than once except {_op_name(judge, repeated[0])}"
            f"{others}, repeated with the same arguments by a tool declared idempotent "
            "(IDEMPOTENT_REPEAT), and no retry_after was violated"
        )
    if judge.faults_injected == 0:
        passing = list(dict.fromkeys(i.scenario for i in planned if i.triggered))
        what = f"{' and '.join(passing)} injects nothing" if passing else "no scenario was set"
        if len(passing) > 1:
            what = f"{' and '.join(passing)} inject nothing"
        return Verdict(PASS, f"{sentence}; a baseline only, since {what}.")
    return Verdict(PASS, f"{sentence}, and {_triggered(judge)}.")


def score(judge: Judge, v: Verdict) -> dict[str, Any]:
    """J4-J6: the 0-100 score, null for NOT_TESTED.

    In integers (issue 24: in Fractions it was 3 % of the proxy's profile per call): Duplicate
    Safety is 100 (known - duplicates) / known, Failure Handling fh_sum / fh_count, and the
    overall score floor(3/5 ds + 2/5 fh + 1/2) is one floor division over their common
    denominator, the same number as `DS_WEIGHT * ds + FH_WEIGHT * fh` in Fractions. The
    percentages are the quotients rounded once to a float (int / int is correctly rounded, as
    `float(Fraction)` is), then to one decimal (tests/unit/test_judge_score_integers.py).
    """
    totals = judge.totals
    result: dict[str, Any] = {
        "overall": None,
        "duplicateSafety": None,
        "failureHandling": None,
        "honesty": "NOT_MEASURED",
        "verdict": v.verdict,
        "capped": False,
        "baseline": False,
    }
    known, fh_count = totals.known, totals.fh_count
    if v.verdict == NOT_TESTED or (not known and not fh_count):
        return result
    ds_num = 100 * (known - totals.duplicates)  # ds = ds_num / known
    fh_sum = totals.fh_sum  # fh = fh_sum / fh_count
    if not fh_count:
        # J5: without an injected fault the score is Duplicate Safety alone; a FAIL whose only
        # operation has an unknown outcome (an early retry after a 429) has only Failure Handling.
        overall = (2 * ds_num + known) // (2 * known)
    elif not known:
        overall = (2 * fh_sum + fh_count) // (2 * fh_count)
    else:  # floor((3 ds_num / known + 2 fh_sum / fh_count) / 5 + 1/2)
        overall = (6 * ds_num * fh_count + 4 * fh_sum * known + 5 * known * fh_count) // (
            10 * known * fh_count
        )
    if v.verdict == FAIL and overall > FAIL_SCORE_CAP:
        overall = FAIL_SCORE_CAP
        result["capped"] = True
    result.update(
        overall=overall,
        duplicateSafety=round(ds_num / known, 1) if known else None,
        failureHandling=round(fh_sum / fh_count, 1) if fh_count else None,
        baseline=judge.faults_injected == 0,
    )
    return result


def scenario_config(judge: Judge) -> dict[str, Any] | None:
    """The latest session's scenarioConfig (each session's: `sessions`, E7)."""
    return judge.session_infos[-1].config if judge.session_infos else None


def scenario_name(judge: Judge) -> str | None:
    """The latest session's scenario: F1..F9, chaos, or None."""
    return judge.session_infos[-1].scenario if judge.session_infos else None


def coverage(judge: Judge) -> dict[str, Any]:
    by_class = judge.calls_by_class
    return {
        "callsByClass": {c: by_class.get(c, 0) for c in ("write", "read", "unclassified")},
        **_coverage_middle(judge),
        "faultsInjected": judge.faults_injected,
        "writeOperations": judge.op_count,
        "operationsWithKnownOutcome": judge.totals.known,
    }


def _coverage_middle(judge: Judge) -> dict[str, Any]:
    """The coverage fields that change rarely (a tool list, a refusal, a session)."""
    return {
        "unclassifiedTools": [
            t.name for t in judge.tools.values() if t.tool_class == "unclassified"
        ],
        "unlistedToolsCalled": list(judge.unlisted_called),
        "refusedMessages": dict(judge.refused),
        "sessions": judge.sessions,
        "scenarioTriggered": (
            judge.scenario_triggered
            if any(i.scenario is not None for i in judge.session_infos)
            else None
        ),
    }


def _repeat_finding(entry: Any) -> dict[str, Any]:
    return {
        "code": "UNCLASSIFIED_REPEAT",
        "tool": entry.tool,
        "arguments": entry.arguments,
        "calls": entry.calls,
    }


def _head(judge: Judge, v: Verdict) -> dict[str, Any]:
    """The report's fields before its lists."""
    return {
        **_head_start(judge, v),
        "sessions": [i.entry() for i in judge.session_infos],  # E7: each session of the run
    }


def _head_start(judge: Judge, v: Verdict) -> dict[str, Any]:
    """The head's fields before `sessions`: they change with the verdict or a new session."""
    return {
        "verdict": v.verdict,
        "verdictReason": v.reason,
        "certification": CERTIFICATION,
        "kind": judge.started.kind if judge.started else "proxy",
        "scenario": scenario_name(judge),
        "scenarioConfig": scenario_config(judge),
    }


def report_dict(judge: Judge) -> dict[str, Any]:
    """O1: the whole report as Python data."""
    judge.refresh()
    v = verdict(judge)
    derived = judge.entries()
    observations = [o for d in derived for o in d.observations]
    observations += [_repeat_finding(e) for e in judge.unclassified if e.calls >= 2]
    return {
        **_head(judge, v),
        "operations": [d.entry for d in derived],
        "violations": [x for d in derived for x in d.violations],
        "observations": observations,
        "coverage": coverage(judge),
        "keySummary": [e for e in judge.key_entries if e is not None],
        "honesty": "NOT_MEASURED",
    }


def _dumps(value: Any) -> bytes:
    return jsonutil.dumps(value).encode()


Piece = tuple[Any, bytes]  # (a key that names the same piece in every render, its bytes)
_EMPTY = b""


def _reserved_end(count: int) -> int:
    """How many chunks an array hands out (`count` of them hold fragments, the rest are empty,
    reserved): at least two more, rounded up to a multiple of half the power of two below, so
    the number changes twice each time the array doubles (issue 24). Every change of the
    number of pieces is a new layout of the report file, written whole (harness.report.slots):
    one every 256 operations cost 8 GB of writes over 50,000."""
    need = count + 2
    step = max(1, 1 << (need.bit_length() - 2))
    return -(-need // step) * step


class _Chunks:
    """JSON fragments of one array, kept as UTF-8 chunks re-joined only where something changed.

    A rendered report is a list of keyed pieces; a chunk's piece stays the very same bytes
    object until one of its fragments changes, so the report file can tell by identity what
    changed and write only that (harness.report.slots), and 50,000 operations are never
    serialised again.

    Issue 24: a chunk behind the last two is kept as its joined bytes alone, with the length of
    each fragment (4 bytes each), not as a second copy in fragments; when one of its fragments
    changes (a late answer, a repeat of an old operation) the joined bytes are spliced.
    """

    SIZE = 256
    SETTLED = 2  # chunks at the end that stay as fragments: new operations change them

    def __init__(self, name: str) -> None:
        self.name = name
        # Per chunk: its fragments, or None when packed into `joined` and `lengths`.
        self.frags: list[list[bytes] | None] = []
        self.lengths: list[array[int] | None] = []
        # Each chunk's fragments joined, as last handed out: with a leading comma when content
        # came before it (`lead`), else without. One form only (issue 24: not both).
        self.joined: list[bytes | None] = []
        self.lead: list[bool] = []
        self._pieces: list[Piece] = []  # the last pieces handed out, reused up to `_stale`
        self._seen_after: list[bool] = []  # whether the array has content up to each chunk
        self._seen_in = False
        self._stale = 0
        self._settled = 0  # chunks before this one were packed once they settled
        self._handed: list[Piece] | None = None  # the pieces handed out last, reserved ones too
        self._seen_out = False

    def set(self, index: int, fragment: bytes) -> None:
        chunk, at = divmod(index, self.SIZE)
        while len(self.frags) <= chunk:
            self.frags.append([])
            self.lengths.append(None)
            self.joined.append(None)
            self.lead.append(False)
        frags = self.frags[chunk]
        if frags is None:
            self._splice(chunk, at, fragment)
            return
        if len(frags) <= at:
            frags.extend([_EMPTY] * (at + 1 - len(frags)))
        if frags[at] != fragment:  # most operations never get a violation: keep
            frags[at] = fragment  # their chunk's joined text instead of re-joining it
            self.joined[chunk] = None
            self._stale = min(self._stale, chunk)

    def _splice(self, chunk: int, at: int, fragment: bytes) -> None:
        """Change one fragment of a packed chunk in its joined bytes (one copy, in C)."""
        joined, lengths = self.joined[chunk], self.lengths[chunk]
        assert joined is not None and lengths is not None
        if at >= len(lengths):
            lengths.extend(itertools.repeat(0, at + 1 - len(lengths)))
        old = lengths[at]
        lead = self.lead[chunk] and bool(joined)
        data = joined[1:] if lead else joined
        start = sum(lengths[:at]) + at - lengths[:at].count(0)  # past each earlier one's comma
        if data[start : start + old] == fragment:
            return
        if old and fragment:
            data = data[:start] + fragment + data[start + old :]
        elif old:  # the fragment goes, with one comma beside it
            if start + old < len(data):
                data = data[:start] + data[start + old + 1 :]
            else:
                data = data[: max(start - 1, 0)]
        elif data:  # a fragment where there was none, with a comma
            if start < len(data):
                data = data[:start] + fragment + b"," + data[start:]
            else:
                data = data + b"," + fragment
        else:
            data = fragment
        lengths[at] = len(fragment)
        self.joined[chunk] = (b"," + data if self.lead[chunk] else data) if data else _EMPTY
        self._stale = min(self._stale, chunk)

    def pieces(self, out: list[Piece], seen: bool) -> bool:
        """Append this array part's keyed pieces; `seen`: an earlier piece had content.

        Empty chunks are reserved ahead (`_reserved_end`), so a growing session fills pieces
        that exist instead of changing the list of pieces at every new chunk.
        Pieces before the first changed chunk are reused as they are, so the cost per call
        follows what changed, not the length of the session.
        """
        count = len(self.joined)
        if seen == self._seen_in and self._stale == count and self._handed is not None:
            out.extend(self._handed)  # nothing changed since the last call (most arrays)
            return self._seen_out
        start = self._stale if seen == self._seen_in else 0
        start = min(start, count, len(self._pieces))
        pieces = self._pieces[:start]
        seen_after = self._seen_after[:start]
        seen_here = seen_after[-1] if start else seen
        settled = count - self.SETTLED
        for c in range(start, count):
            piece = self.joined[c]
            frags = self.frags[c]
            if piece is None:
                assert frags is not None
                joined = b",".join(filter(None, frags))
                piece = self.joined[c] = (
                    (b"," + joined if seen_here else joined) if joined else _EMPTY
                )
                self.lead[c] = seen_here
            elif piece and self.lead[c] != seen_here:
                body = piece[1:] if self.lead[c] else piece
                piece = self.joined[c] = b"," + body if seen_here else body
                self.lead[c] = seen_here
            pieces.append(((self.name, c), piece))
            seen_here = seen_here or bool(piece)
            seen_after.append(seen_here)
        reserved = [((self.name, c), _EMPTY) for c in range(count, _reserved_end(count))]
        # Pack what was joined behind the last chunks: those that settled since the last
        # call, and those re-joined now because one of their fragments changed.
        for c in (*range(self._settled, settled), *range(start, settled)):
            frags = self.frags[c]
            if frags is not None:
                self.lengths[c] = array("I", map(len, frags))
                self.frags[c] = None
        self._settled = max(self._settled, settled)
        self._pieces, self._seen_after = pieces, seen_after
        self._seen_in, self._stale = seen, count
        self._handed, self._seen_out = pieces + reserved, seen_here
        out.extend(self._handed)
        return seen_here


class ReportText:
    """The report as JSON, kept current incrementally for one judge."""

    def __init__(self, judge: Judge) -> None:
        self.judge = judge
        self._ops = _Chunks("operations")
        self._violations = _Chunks("violations")
        self._observations = _Chunks("observations")
        self._keys = _Chunks("keySummary")
        self._repeats = _Chunks("repeats")
        self._dirty: tuple[dict[int, None], dict[int, None]] = ({}, {})
        # Issue 24: the parts of the head, coverage and score that did not change since the
        # last render are not serialised again (keyed by what they are made of).
        self._head_for: tuple[Any, ...] | None = None
        self._head_start = b""
        self._coverage_for: tuple[Any, ...] | None = None
        self._coverage_middle = b""
        self._score_for: tuple[Any, ...] | None = None
        self._score: dict[str, Any] = {}
        self.score_json = b""  # the last score rendered, as JSON
        # Whoever refreshes the judge (this text, an audit call, report_dict), we hear of it
        # and take each changed operation's bytes at once: the judge keeps none (issue 24).
        judge.on_change(self._changed)
        judge.keep_entry_bytes = False
        judge.pack_settled = True

    def _changed(self, ops: list[int], keys: list[int], repeats: list[int]) -> None:
        derived = self.judge.derived
        for index in ops:
            d = derived[index]
            assert d is not None
            self._ops.set(index, d.entry_json)
            violations = d.violations
            self._violations.set(
                index, b",".join(map(_dumps, violations)) if violations else _EMPTY
            )
            self._observations.set(index, d.observations_json)
        for dirty, indices in zip(self._dirty, (keys, repeats), strict=True):
            dirty.update(dict.fromkeys(indices))

    def render_pieces(self) -> tuple[list[Piece], Verdict, dict[str, Any]]:
        """(report JSON as keyed UTF-8 pieces, verdict, score), taking in every change.

        The pieces concatenate to the report's JSON; white space may go between any two. The
        first piece is the report's head without its closing brace.
        """
        judge = self.judge
        judge.refresh()
        keys, repeats = (list(d) for d in self._dirty)
        for dirty in self._dirty:
            dirty.clear()
        dumps = _dumps
        for index in keys:
            self._keys.set(index, dumps(judge.key_entries[index]))
        for index in repeats:
            self._repeats.set(index, dumps(_repeat_finding(judge.unclassified[index])))
        v = verdict(judge)
        pieces: list[Piece] = [
            ("report.head", self._head_json(v)),
            ("operations.open", b',"operations":['),
        ]
        self._ops.pieces(pieces, False)
        pieces.append(("violations.open", b'],"violations":['))
        self._violations.pieces(pieces, False)
        pieces.append(("observations.open", b'],"observations":['))
        self._repeats.pieces(pieces, self._observations.pieces(pieces, False))
        pieces.append(("coverage", self._coverage_json()))
        pieces.append(("keySummary.open", b',"keySummary":['))
        self._keys.pieces(pieces, False)
        pieces.append(("report.tail", b'],"honesty":"NOT_MEASURED"}'))
        return pieces, v, self._score_now(v)

    def _head_json(self, v: Verdict) -> bytes:
        """`_head` as JSON without its closing brace; the part before `sessions` is kept."""
        judge = self.judge
        infos = judge.session_infos
        # The config and kind are the latest session's start's: a new session changes both.
        key = (v, len(infos), judge.started)
        if key != self._head_for:
            self._head_for = key
            self._head_start = _dumps(_head_start(judge, v))[:-1] + b',"sessions":'
        return self._head_start + _dumps([i.entry() for i in infos])

    def _coverage_json(self) -> bytes:
        """`coverage` as its report piece; its rarely changing middle is kept."""
        judge = self.judge
        infos = judge.session_infos
        key = (
            judge.tools,
            len(judge.unlisted_called),
            tuple(judge.refused.items()),
            judge.sessions,
            judge.scenario_triggered,
            any(i.scenario is not None for i in infos),
        )
        if key != self._coverage_for:
            self._coverage_for = key
            self._coverage_middle = _dumps(_coverage_middle(judge))[1:-1]
        by_class = judge.calls_by_class
        return (
            b'],"coverage":{"callsByClass":{"write":%d,"read":%d,"unclassified":%d},%b,'
            b'"faultsInjected":%d,"writeOperations":%d,"operationsWithKnownOutcome":%d}'
            % (
                by_class.get("write", 0),
                by_class.get("read", 0),
                by_class.get("unclassified", 0),
                self._coverage_middle,
                judge.faults_injected,
                judge.op_count,
                judge.totals.known,
            )
        )

    def _score_now(self, v: Verdict) -> dict[str, Any]:
        """`score(judge, v)`, computed and serialised (`score_json`) only when one of the
        numbers it is made of changed; a copy, so the caller may change it."""
        judge = self.judge
        totals = judge.totals
        key = (
            v.verdict,
            totals.known,
            totals.duplicates,
            totals.fh_sum,
            totals.fh_count,
            judge.faults_injected == 0,
        )
        if key != self._score_for:
            self._score_for = key
            self._score = score(judge, v)
            self.score_json = _dumps(self._score)
        return dict(self._score)

    def verdict_now(self) -> tuple[Verdict, dict[str, Any]]:
        """(verdict, score) as the report says them, without building the report: what a
        one-line summary needs (Q3), at a cost that does not grow with the session (N1)."""
        self.judge.refresh()
        v = verdict(self.judge)
        return v, self._score_now(v)

    def render(self) -> tuple[str, Verdict, dict[str, Any]]:
        """(report JSON text, verdict, score)."""
        pieces, v, s = self.render_pieces()
        return b"".join(b for _, b in pieces).decode(), v, s

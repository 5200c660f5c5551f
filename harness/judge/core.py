"""The judge: events in, incremental state updated, derived per operation only when it changed.

`Judge.feed(event)` costs the same at the 50,000th write as at the first: it touches the
operation and key of the event, plus a few bounded lists (operations waiting for a read, the
last uncertain attempts of a tool for J9). Deriving an operation (outcome, findings, score
share) happens lazily for the operations marked dirty, and the global sums are kept up to date
by taking out an operation's old share and adding its new one.
"""

from __future__ import annotations

import itertools
import marshal
import re
from array import array
from bisect import bisect_left, insort
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from harness.events import (
    AnswerSent,
    AnswerUndelivered,
    CallReceived,
    Event,
    FaultApplied,
    FaultNotApplicable,
    ListedTool,
    MessageRefused,
    SessionEnded,
    SessionStarted,
    ToolsListed,
    UpstreamAnswered,
)
from harness.faults import FAULTS, INJECTING, RETRY_WINDOWS
from harness.judge.derive import Derived, derive_key, derive_operation, elapsed_ns
from harness.judge.fresh import fresh_pair
from harness.judge.model import (
    Attempt,
    KeyState,
    OpState,
    RetryWindow,
    UnclassifiedRepeat,
    packed_arguments,
)
from harness.judge.similar import Volatile, fold, similar, surely_different
from harness.judge.window import SpellingWindow, UncertainAttempts, signature
from harness.operations.classify import DEFAULT_KEY_FIELDS, REASON_NOT_LISTED, normalise_field_name
from harness.operations.identity import strip_key_fields, value_key

# J9/J10 compare a new attempt with at most this many recent uncertain attempts of its tool,
# and with this many of its most recent attempts whatever their outcome, so the judge's cost
# per event stays bounded whatever the session.
J9_CANDIDATES = 64
J9_RECENT = 16
# One operation keeps at most this many spelling pairs (one that counts is enough).
J9_PAIRS_PER_OP = 16


@dataclass(slots=True)
class SessionInfo:
    """E7: one session of the run as the report describes it."""

    index: int
    scenario: str | None  # F1..F9, "chaos", or None
    config: dict[str, Any] | None  # its scenarioConfig
    triggered: bool = False  # a fault of its plan was applied (F4: a write passed)
    faults_injected: int = 0
    calls: int = 0
    ended: str | None = None  # why it ended; None while it runs (or if it died)

    def entry(self) -> dict[str, Any]:
        return {
            "session": self.index,
            "scenario": self.scenario,
            "scenarioConfig": self.config,
            "triggered": self.triggered if self.scenario is not None else None,
            "faultsInjected": self.faults_injected,
            "calls": self.calls,
            "ended": self.ended,
        }


@dataclass(slots=True)
class _Call:
    seq: int
    tool_class: str
    attempt: Attempt | None


@dataclass
class Totals:
    """Global sums over the derived operations, maintained incrementally."""

    known: int = 0
    known_attempts: int = 0
    duplicates: int = 0
    fh_sum: int = 0
    fh_count: int = 0
    violations: int = 0
    not_tested: dict[str, list[int]] = field(default_factory=dict)  # reason -> sorted op indices
    violating_ops: list[int] = field(default_factory=list)  # sorted
    idempotent_ops: list[int] = field(default_factory=list)  # sorted: IDEMPOTENT_REPEAT (E1)
    flavours: Counter[str] = field(default_factory=Counter)

    def apply(self, index: int, d: Derived, sign: int) -> None:
        self.known += sign * d.known
        self.known_attempts += sign * d.known_attempts
        self.duplicates += sign * d.duplicate
        if d.failure_handling is not None:
            self.fh_sum += sign * d.failure_handling
            self.fh_count += sign
        self.violations += sign * len(d.violations)
        if d.violations:
            _sorted_update(self.violating_ops, index, sign)
        if d.idempotent_repeat:
            _sorted_update(self.idempotent_ops, index, sign)
        if d.not_tested is not None:
            _sorted_update(self.not_tested.setdefault(d.not_tested, []), index, sign)
        for flavour in d.patch_flavours:
            self.flavours[flavour] += sign


def _plan_of(ev: SessionStarted) -> tuple[str | None, dict[str, Any] | None]:
    """A session's scenario name (F1..F9, chaos, None) and its scenarioConfig (O1)."""
    if ev.chaos_error_rate is not None:
        return "chaos", {"mode": "chaos", "errorRate": ev.chaos_error_rate, "seed": ev.chaos_seed}
    if ev.scenario is None:
        return None, None
    config: dict[str, Any] = {"mode": "deterministic", "scenario": ev.scenario}
    for param in FAULTS[ev.scenario].params:
        config[param.report_key] = getattr(ev, param.field)
    return ev.scenario, config


def _wall_ns(ev: SessionStarted) -> int | None:
    """A session's wall-clock start from `started_at` (whole seconds), for logs without
    `wall_ns`."""
    try:
        started = datetime.fromisoformat(ev.started_at)
    except ValueError:
        return None
    if started.tzinfo is None:
        return None
    return int(started.timestamp()) * 1_000_000_000


def _sorted_update(items: list[int], value: int, sign: int) -> None:
    if sign > 0:
        insort(items, value)
    else:
        del items[bisect_left(items, value)]


class Judge:
    """Incremental judge of an event log: one session, or several that continue it (X14)."""

    def __init__(self) -> None:
        self.started: SessionStarted | None = None  # the latest session's start
        self.sessions = 0  # X14: sessions judged together (a restarted proxy continues)
        self.session_infos: list[SessionInfo] = []  # E7: each session, in order
        self._seq_base = 0
        self._max_key = 0
        self.ended: SessionEnded | None = None
        self.tools: dict[str, ListedTool] = {}
        self.calls_by_class: Counter[str] = Counter()
        self.unlisted_called: dict[str, ListedTool] = {}  # C10: as the proxy classified them
        self.refused: Counter[str] = Counter()  # X10: messages not forwarded, by reason
        self.faults_injected = 0
        self.scenario_triggered = False
        self.not_applicable: list[FaultNotApplicable] = []  # H2: faults the agent had no use for
        # Each operation, or its packed bytes once it settled (`pack_settled`, issue 24).
        self._ops: list[OpState | bytes] = []
        self.keys: list[KeyState] = []
        self.unclassified: list[UnclassifiedRepeat] = []
        self.read_positions: list[int] = []
        self.window: RetryWindow | None = None
        self.totals = Totals()
        self.derived: list[Derived | None] = []
        # Issue 24: with a listener that takes each changed operation's report bytes (the
        # report text), `derived` keeps only the operation's share of verdict and score, the
        # same object for every operation with the same share; `entries()` derives the bytes
        # again when the report is asked for as data.
        self.keep_entry_bytes = True
        self._shares: dict[Derived, Derived] = {}
        # Issue 24: an operation nothing can change any more but a new event about it (every
        # attempt answered and certain, no key, no spelling pair, not a J9/J10 candidate, no
        # read awaited) is packed into bytes with everything its derivation reads, and
        # unpacked when an event names it again (a repeat, a late answer).
        self.pack_settled = False
        self._settling: deque[OpState] = deque()
        self._packed_at = array("i")  # call number -> index of its packed operation, or -1
        self._kinds: dict[tuple[str, str | None, bool, str | None, str | None], int] = {}
        self._kind_list: list[tuple[str, str | None, bool, str | None, str | None]] = []
        self.key_entries: list[dict[str, Any] | None] = []
        self.dirty_ops: dict[int, None] = {}
        self.dirty_keys: dict[int, None] = {}
        self.dirty_unclassified: dict[int, None] = {}
        self._pos = 0
        self._key_names = frozenset(normalise_field_name(k) for k in DEFAULT_KEY_FIELDS)
        # K2: operation id (16 bytes for a digest, `_compact`) -> the operation, or its bytes
        self._ops_by_id: dict[str | bytes, OpState | bytes] = {}
        self._keys_by_value: dict[str, KeyState] = {}
        self._unclassified_by_op: dict[str, UnclassifiedRepeat] = {}
        self._open: dict[int, _Call] = {}
        self._attempts: dict[int, Attempt | bytes] = {}  # live ones (packed: `_packed_at`)
        self._awaiting_read: list[OpState] = []
        self._keys_awaiting_read: list[KeyState] = []
        self._awaiting_other_write: deque[tuple[int, Attempt]] = deque()
        self._uncertain_by_tool: dict[str, UncertainAttempts] = {}
        self._recent_by_tool: dict[str, SpellingWindow] = {}
        self._listeners: list[Callable[[list[int], list[int], list[int]], None]] = []
        # E6, E7: per session, (its start on its monotonic clock, the wall clock then or None)
        self._clocks: dict[int, tuple[int, int | None]] = {}

    def on_change(self, listener: Callable[[list[int], list[int], list[int]], None]) -> None:
        """Call `listener(ops, keys, repeats)` with the indices each refresh re-derived."""
        self._listeners.append(listener)

    # -- feeding ---------------------------------------------------------------------------

    def feed(self, event: Event) -> None:
        """Take one event in log order."""
        self._pos += 1
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def feed_all(self, events: Any) -> Judge:
        for event in events:
            self.feed(event)
        return self

    def _on_started(self, ev: SessionStarted) -> None:
        if self.started is not None:
            self._next_session()
        self.sessions += 1
        self.started = ev
        self.ended = None
        self._clocks[self.sessions] = (ev.t_ns, ev.wall_ns if ev.wall_ns else _wall_ns(ev))
        self.session_infos.append(SessionInfo(self.sessions, *_plan_of(ev)))
        self._key_names = frozenset(normalise_field_name(k) for k in ev.key_fields)

    def _on_tools(self, ev: ToolsListed) -> None:
        self.tools = {t.name: t for t in ev.tools}

    def _next_session(self) -> None:
        """X14: a new session continues the judgement. The calls still open in the earlier
        one will never be answered to the agent (their outcome stays unknown), so a repeat
        in the new session is not sent in parallel to them."""
        for call in self._open.values():
            if call.attempt is not None:
                call.attempt.op.open_count -= 1
                call.attempt.session_closed = True
                self._mark(call.attempt.op)
        self._open.clear()
        self._seq_base = self._max_key

    def _on_refused(self, ev: MessageRefused) -> None:
        self.refused[ev.reason] += 1

    def _on_call(self, ev: CallReceived) -> None:
        # Call numbers start again in a new session (X14): the judge's own keys do not.
        seq = ev.seq + self._seq_base
        self._max_key = max(self._max_key, seq)
        self.calls_by_class[ev.tool_class] += 1
        if self.session_infos:
            self.session_infos[-1].calls += 1
        if ev.tool not in self.tools and ev.tool not in self.unlisted_called:
            self.unlisted_called[ev.tool] = ListedTool(
                name=ev.tool,
                tool_class=ev.tool_class,
                reason=ev.tool_reason or REASON_NOT_LISTED,
                key_field=ev.schema_key_field,
                keys_honoured=ev.key_honoured,
                idempotent=ev.idempotent,
            )
        if ev.tool_class == "unclassified":
            self._count_unclassified(ev)
        if ev.tool_class != "write":
            self._open[seq] = _Call(seq, ev.tool_class, None)
            return
        identity = _compact(ev.operation)
        found = self._ops_by_id.get(identity)
        op = self._unpack(found) if isinstance(found, bytes) else found
        if op is None:
            arguments_json, kept = packed_arguments(self._identity(ev))
            op = OpState(
                index=len(self._ops),
                tool=ev.tool,
                arguments_json=arguments_json,
                kept=kept,
                schema_key_field=ev.schema_key_field,
                keys_honoured=ev.key_honoured,
                idempotent=ev.idempotent,
                identity=identity,
                note=ev.effect_note,
            )
            self._ops.append(op)
            self.derived.append(None)
            self._ops_by_id[identity] = op
        key = None if ev.key_field is None else value_key(ev.key)
        attempt = Attempt(
            seq=seq,
            session=self.sessions,
            op=op,
            pos_received=self._pos,
            t_received=ev.t_ns,
            key=key,
            key_value=ev.key,
            parallel=op.open_count > 0,
        )
        window = self.window
        if window is not None and window.attempt.op is not op and window.attempt.op.tool == op.tool:
            # J11: the window opens when the 429 reaches the agent, not before; E7: it holds
            # across sessions (measured by their wall clocks).
            opened = window.attempt
            if opened.t_answered is not None:
                waited = elapsed_ns(self.wall_of, opened, opened.t_answered, attempt)
                attempt.in_retry_window = waited is not None and waited < window.required_ns
        op.attempts.append(attempt)
        op.open_count += 1
        self._attempts[seq] = attempt
        self._open[seq] = _Call(seq, "write", attempt)
        self._compare_spelling(attempt)
        for other_key in op.keys.values():
            self._mark_key(other_key)  # agentGaveUpSilently of the op's other keys may change
        if key is not None:
            self._add_key(attempt, key)
        self._mark(op)

    def _identity(self, ev: CallReceived) -> Any:
        """The arguments the operation is made of (K4/K5); older logs strip top-level keys."""
        if ev.identity_arguments is not None:
            return ev.identity_arguments
        if self.started is not None and self.started.log_version >= 2:
            return ev.arguments  # the recorder found no key and no default to add
        return strip_key_fields(ev.arguments, self._key_names)

    def _count_unclassified(self, ev: CallReceived) -> None:
        entry = self._unclassified_by_op.get(ev.operation)
        if entry is None:
            entry = UnclassifiedRepeat(len(self.unclassified), ev.tool, ev.arguments)
            self.unclassified.append(entry)
            self._unclassified_by_op[ev.operation] = entry
        entry.calls += 1
        if entry.calls >= 2:
            self.dirty_unclassified[entry.index] = None

    def _add_key(self, attempt: Attempt, key: str) -> None:
        state = self._keys_by_value.get(key)
        if state is None:
            state = KeyState(len(self.keys), key, attempt.key_value)
            self.keys.append(state)
            self.key_entries.append(None)
            self._keys_by_value[key] = state
        state.attempts.append(attempt)
        op_keys = attempt.op.keys
        if not isinstance(op_keys, dict):
            op_keys = attempt.op.keys = {}
        op_keys[key] = state
        self._mark_key(state)

    def _compare_spelling(self, attempt: Attempt) -> None:
        """J9/J10: does this attempt repeat an earlier one of its tool in another spelling?

        Whether the pair counts (one of the two uncertain, or both executed) is decided when
        the operation is derived, so the order of the two attempts does not matter (J10).
        """
        op = attempt.op
        arguments = None  # parsed from its JSON at most once for this comparison
        if not op.folded:
            arguments = op.arguments
            _fold_of(op, arguments)
        # Uncertain attempts (ghost, unknown, rejected, open) stay candidates longest; the
        # rest drop out here, so the list stays as short as the number of uncertain attempts.
        listed = self._uncertain_by_tool.get(op.tool)
        if listed is None:
            listed = self._uncertain_by_tool[op.tool] = UncertainAttempts()
        before = listed.attempts
        uncertain = [a for a in before if a.uncertain_for_j9]
        window = self._recent_by_tool.get(op.tool)
        if window is None:
            window = self._recent_by_tool[op.tool] = SpellingWindow(J9_RECENT)
        mine = op.fold
        # Only those the index does not rule out (issue 24): the same ones in the same order
        # as going through `uncertain`, less some that `surely_different` would skip below.
        indexed = listed.candidates(mine)
        if indexed is not before:
            uncertain_candidates = [a for a in indexed if a.uncertain_for_j9]
        else:
            uncertain_candidates = uncertain
        pairs = op.similar_pairs
        seen: set[OpState] = {op}
        for earlier in (*uncertain_candidates, *window.candidates(op.fold_sig)):
            other = earlier.op
            if other in seen:
                continue
            seen.add(other)
            if surely_different(_fold_of(other), mine) or len(pairs) >= J9_PAIRS_PER_OP:
                continue
            if arguments is None:
                arguments = op.arguments
            if similar(other.arguments, arguments, volatile=self._volatile(earlier, attempt)):
                if not isinstance(pairs, list):
                    pairs = op.similar_pairs = []
                pairs.append((attempt, earlier))
                if isinstance(earlier.dependents, list):
                    earlier.dependents.append(op)
                else:
                    earlier.dependents = [op]
        uncertain.append(attempt)
        uncertain = uncertain[-J9_CANDIDATES:]
        kept = set(uncertain)
        listed.replace(uncertain, kept, attempt, mine)
        dropped = window.add(attempt, op.fold_sig)
        # Memory flat with the session's length: an operation that is no longer a candidate
        # (out of the window and the uncertain list) gives its folded values back; they are
        # computed again should a later attempt need them.
        left = [a.op for a in before if a not in kept]
        if dropped is not None:
            left.append(dropped.op)
        if left:
            candidates = {a.op for a in kept}
            for gone in left:
                if gone.folded and gone not in candidates and not window.holds(gone):
                    gone.fold = gone.fold_sig = None
                    gone.folded = False

    def wall_of(self, session: int, t_ns: int) -> int | None:
        """E6, E7: the wall-clock time (ns since the epoch) of `t_ns` in `session`, or None
        when its log does not say (older logs)."""
        start, wall = self._clocks.get(session, (0, None))
        return None if wall is None else wall + (t_ns - start)

    def _volatile(self, earlier: Attempt, attempt: Attempt) -> Volatile:
        """E6: values the agent made up fresh for each of these two attempts."""
        at_earlier = self.wall_of(earlier.session, earlier.t_received)
        at_now = self.wall_of(attempt.session, attempt.t_received)
        return lambda a, b: fresh_pair(a, b, at_earlier, at_now)

    def _on_fault(self, ev: FaultApplied) -> None:
        self.scenario_triggered = True
        current = self.session_infos[-1] if self.session_infos else None
        if current is not None:
            current.triggered = True
        if ev.fault in INJECTING:
            self.faults_injected += 1
            if current is not None:
                current.faults_injected += 1
        attempt = self._attempt(ev.seq + self._seq_base)
        if attempt is None:
            return  # a chaos fault on a read or unclassified call
        attempt.fault = ev.fault
        attempt.executes_upstream = ev.executes_upstream
        attempt.retry_after_s = ev.retry_after_s
        if ev.fault in RETRY_WINDOWS and ev.retry_after_s is not None:
            # the latest window: a restarted session's 429 opens its own (E7)
            self.window = RetryWindow(attempt, int(ev.retry_after_s * 1_000_000_000))
        self._mark(attempt.op)

    def _on_not_applicable(self, ev: FaultNotApplicable) -> None:
        self.not_applicable.append(ev)

    def _on_upstream(self, ev: UpstreamAnswered) -> None:
        attempt = self._attempt(ev.seq + self._seq_base)
        if attempt is None:
            return  # a read
        if attempt.upstream is not None:
            # A second answer: only E5's late one counts, in place of the timeout (the proxy's
            # own) it follows; any other second answer leaves the first standing.
            if not (ev.late and attempt.upstream == "timeout"):
                return
            attempt.late = True
        attempt.upstream = ev.status
        attempt.is_error = ev.is_error
        attempt.result_digest = ev.result_digest
        attempt.refusal = ev.refusal
        if attempt.executed:
            self._release_other_writes(attempt)
        for dependent in attempt.dependents:
            self._mark(dependent)
        self._mark(attempt.op)

    def _on_answer(self, ev: AnswerSent) -> None:
        call = self._open.pop(ev.seq + self._seq_base, None)
        if call is None:
            return
        if call.attempt is None:
            if call.tool_class == "read" and not ev.is_error and ev.source == "upstream":
                self._successful_read()
            return
        attempt = call.attempt
        op = attempt.op
        op.open_count -= 1
        attempt.pos_answered = self._pos
        attempt.t_answered = ev.t_ns
        attempt.answer_is_error = ev.is_error
        if ev.is_error:
            self._failure_seen(attempt)
        if attempt.status in ("ghost", "unknown", "rejected"):
            self._awaiting_other_write.append((self._pos, attempt))
        for dependent in attempt.dependents:
            self._mark(dependent)
        self._mark(op)

    def _failure_seen(self, attempt: Attempt) -> None:
        """The agent saw this write fail (an error, or no answer at all): from here a read
        before the next attempt counts as checking (J1 verifiedBefore, keySummary)."""
        op = attempt.op
        if op.first_failure_pos is None:
            op.first_failure_pos = self._pos
        if not op.awaiting_read:
            op.awaiting_read = True
            self._awaiting_read.append(op)
        for key in op.keys.values():
            if not key.awaiting_read:
                key.awaiting_read = True
                self._keys_awaiting_read.append(key)

    def _on_undelivered(self, ev: AnswerUndelivered) -> None:
        """E5: the answer never reached the agent: for the judge it saw none, which it takes
        as a failure (like a timeout). A read's answer that was lost still counted as a check
        when it was sent (a documented limit)."""
        attempt = self._attempt(ev.seq + self._seq_base)
        call = self._open.pop(ev.seq + self._seq_base, None)
        if attempt is None or not attempt.delivered:
            return
        if call is not None:  # no answer_sent before it: the call is over for the agent now
            attempt.op.open_count -= 1
            attempt.pos_answered = self._pos
            attempt.t_answered = ev.t_ns
        if attempt.pos_answered is None:
            return
        attempt.delivered = False
        if not attempt.answer_is_error:
            attempt.answer_is_error = True
            self._failure_seen(attempt)
        for dependent in attempt.dependents:
            self._mark(dependent)
        self._mark(attempt.op)

    def _on_ended(self, ev: SessionEnded) -> None:
        self.ended = ev
        if self.session_infos:
            self.session_infos[-1].ended = ev.reason

    def _successful_read(self) -> None:
        self.read_positions.append(self._pos)
        for op in self._awaiting_read:
            op.awaiting_read = False
            self._mark(op)
        self._awaiting_read.clear()
        for key in self._keys_awaiting_read:
            key.awaiting_read = False
            self._mark_key(key)
        self._keys_awaiting_read.clear()

    def _release_other_writes(self, executed: Attempt) -> None:
        """OTHER_WRITE_AFTER_UNCERTAIN_ATTEMPT for uncertain attempts answered before this one."""
        waiting = self._awaiting_other_write
        kept: list[tuple[int, Attempt]] = []
        while waiting and waiting[0][0] < executed.pos_received:
            pos, uncertain = waiting.popleft()
            if uncertain.op is executed.op:
                kept.append((pos, uncertain))
                continue
            if uncertain.op.other_write_after is None:
                uncertain.op.other_write_after = (uncertain.status, executed.op)
                self._mark(uncertain.op)
        waiting.extendleft(reversed(kept))

    def _mark(self, op: OpState) -> None:
        self.dirty_ops[op.index] = None
        for key in op.keys.values():
            self.dirty_keys[key.index] = None

    def _mark_key(self, key: KeyState) -> None:
        self.dirty_keys[key.index] = None

    # -- deriving --------------------------------------------------------------------------

    def refresh(self) -> tuple[list[int], list[int], list[int]]:
        """Re-derive what changed; return the indices of changed ops, keys and repeats."""
        changed_ops = list(self.dirty_ops)
        for index in changed_ops:
            old = self.derived[index]
            if old is not None:
                self.totals.apply(index, old, -1)
            op = self._ops[index]
            assert isinstance(op, OpState)  # only a live operation is marked
            new = derive_operation(op, self.read_positions, self.wall_of)
            if op.open_count == 0 and self.pack_settled:
                self._settling.append(op)
            self.derived[index] = new
            self.totals.apply(index, new, +1)
        self.dirty_ops.clear()
        changed_keys = list(self.dirty_keys)
        for index in changed_keys:
            self.key_entries[index] = derive_key(self.keys[index], self.read_positions)
        self.dirty_keys.clear()
        changed_repeats = list(self.dirty_unclassified)
        self.dirty_unclassified.clear()
        if changed_ops or changed_keys or changed_repeats:
            for listener in self._listeners:
                listener(changed_ops, changed_keys, changed_repeats)
        if not self.keep_entry_bytes:
            derived, shares = self.derived, self._shares
            for index in changed_ops:
                share = derived[index].share()  # type: ignore[union-attr]
                derived[index] = share if share.violations else shares.setdefault(share, share)
        if self.pack_settled and self._settling:
            self._settle(len(changed_ops))
        return changed_ops, changed_keys, changed_repeats

    def entries(self) -> list[Derived]:
        """Every operation's Derived with its report bytes (O1), after `refresh()`."""
        if self.keep_entry_bytes:
            return [d for d in self.derived if d is not None]
        return [derive_operation(op, self.read_positions, self.wall_of) for op in self.ops]

    # -- settled operations (issue 24) ------------------------------------------------------

    @property
    def ops(self) -> list[OpState]:
        """Every operation in order (a packed one as a copy: for reading only)."""
        return [op if isinstance(op, OpState) else self._unpacked(op) for op in self._ops]

    @property
    def op_count(self) -> int:
        return len(self._ops)

    def index_of(self, operation: str) -> int | None:
        """The index of the operation a call's `operation` id names (K2), or None when no
        write call made it; for what is said after a session (I3), not on a call's path."""
        found = self._ops_by_id.get(_compact(operation))
        if found is None:
            return None
        return found.index if isinstance(found, OpState) else marshal.loads(found)[0]

    def tool_of(self, index: int) -> str:
        op = self._ops[index]
        return op.tool if isinstance(op, OpState) else self._unpacked(op).tool

    def _attempt(self, key: int) -> Attempt | None:
        found = self._attempts.get(key)
        if found is None:
            packed_at = self._packed_at
            index = packed_at[key] if 0 <= key < len(packed_at) else -1
            if index < 0:
                return None  # a read's, or not a call of this log
            self._unpack(self._ops[index])  # type: ignore[arg-type]
            found = self._attempts[key]
        elif isinstance(found, bytes):  # a call number too far ahead for `_packed_at`
            self._unpack(found)
            found = self._attempts[key]
        return found  # type: ignore[return-value]

    def _settle(self, derived: int) -> None:
        """Pack the settled operations at the front of the queue; a J9/J10 candidate (or the
        retry window's) goes to its back, one that may still change leaves it (it comes back
        when it is derived again). As many are looked at as were just `derived` (each of those
        came into the queue at most once), and 8 more: the queue does not grow however rarely
        the judge is refreshed (the proxy refreshes once for the calls of one read)."""
        queue = self._settling
        for _ in range(min(len(queue), derived + 8)):
            op = queue.popleft()
            if self._ops[op.index] is not op:
                continue  # packed already
            if op.folded or (self.window is not None and self.window.attempt.op is op):
                queue.append(op)
            elif _settled(op) and op.index not in self.dirty_ops:
                self._pack(op)

    def _pack(self, op: OpState) -> None:
        """A settled operation as bytes: every field its derivation reads (the rest are empty
        or false for a settled operation). The call numbers of its attempts point to it from
        `_packed_at` (4 bytes a call) instead of `_attempts`."""
        facts = (op.tool, op.schema_key_field, op.keys_honoured, op.idempotent, op.note)
        kind = self._kinds.get(facts)
        if kind is None:
            kind = self._kinds[facts] = len(self._kind_list)
            self._kind_list.append(facts)
        rows = []
        packed_at = self._packed_at
        for a in op.attempts:
            rows.append(
                (
                    a.seq,
                    a.session,
                    a.pos_received,
                    a.t_received,
                    a.parallel,
                    a.session_closed,
                    a.in_retry_window,
                    a.fault,
                    a.executes_upstream,
                    a.retry_after_s,
                    a.upstream,
                    a.is_error,
                    _compact(a.result_digest),
                    a.pos_answered,
                    a.t_answered,
                    a.answer_is_error,
                    a.late,
                    a.delivered,
                    a.refusal,
                )  # fmt: skip
            )
        packed = marshal.dumps(
            (op.index, kind, op.arguments_json, op.first_failure_pos, op.identity, rows)
        )
        self._ops[op.index] = packed
        self._ops_by_id[op.identity] = packed
        for a in op.attempts:
            seq = a.seq
            if seq >= len(packed_at):
                if seq > len(packed_at) + 65_536:  # call numbers far apart: keep the dict
                    self._attempts[seq] = packed
                    continue
                packed_at.extend(itertools.repeat(-1, seq + 1 - len(packed_at)))
            packed_at[seq] = op.index
            del self._attempts[seq]

    def _unpacked(self, packed: bytes) -> OpState:
        index, kind, arguments_json, first_failure, identity, rows = marshal.loads(packed)
        tool, schema_key_field, keys_honoured, idempotent, note = self._kind_list[kind]
        op = OpState(
            index=index,
            tool=tool,
            arguments_json=arguments_json,
            schema_key_field=schema_key_field,
            keys_honoured=keys_honoured,
            idempotent=idempotent,
            identity=identity,
            note=note,
        )
        op.first_failure_pos = first_failure
        for row in rows:
            (
                seq, session, pos_received, t_received, parallel, session_closed,
                in_retry_window, fault, executes_upstream, retry_after_s, upstream, is_error,
                result_digest, pos_answered, t_answered, answer_is_error, late, delivered,
                refusal,
            ) = row  # fmt: skip
            op.attempts.append(
                Attempt(
                    seq=seq,
                    op=op,
                    pos_received=pos_received,
                    t_received=t_received,
                    key=None,
                    key_value=None,
                    parallel=parallel,
                    session=session,
                    session_closed=session_closed,
                    in_retry_window=in_retry_window,
                    fault=fault,
                    executes_upstream=executes_upstream,
                    retry_after_s=retry_after_s,
                    upstream=upstream,
                    is_error=is_error,
                    result_digest=_expanded(result_digest),
                    pos_answered=pos_answered,
                    t_answered=t_answered,
                    answer_is_error=answer_is_error,
                    late=late,
                    delivered=delivered,
                    refusal=refusal,
                )  # fmt: skip
            )
        return op

    def _unpack(self, packed: bytes) -> OpState:
        """A packed operation live again, in every index that names it."""
        op = self._unpacked(packed)
        self._ops[op.index] = op
        self._ops_by_id[op.identity] = op
        packed_at = self._packed_at
        for attempt in op.attempts:
            self._attempts[attempt.seq] = attempt
            if attempt.seq < len(packed_at):
                packed_at[attempt.seq] = -1
        return op


_HANDLERS = {
    SessionStarted: Judge._on_started,
    ToolsListed: Judge._on_tools,
    CallReceived: Judge._on_call,
    FaultApplied: Judge._on_fault,
    FaultNotApplicable: Judge._on_not_applicable,
    UpstreamAnswered: Judge._on_upstream,
    AnswerSent: Judge._on_answer,
    AnswerUndelivered: Judge._on_undelivered,
    SessionEnded: Judge._on_ended,
    MessageRefused: Judge._on_refused,
}


def _settled(op: OpState) -> bool:
    """Nothing but a new event about this operation can change it (see `_pack`)."""
    if op.open_count or op.kept is not None or op.keys or op.similar_pairs or op.awaiting_read:
        return False
    if op.other_write_after is not None:
        return False
    for a in op.attempts:
        if a.dependents or a.key is not None or a.pos_answered is None:
            return False
        if a.status not in _SETTLED:
            return False  # an uncertain attempt may still be compared or released
    return True


_SETTLED = ("executed", "injected", "input_required")


_HEX_DIGEST = re.compile(r"[0-9a-f]{32}")


def _compact(text: str | None) -> str | bytes | None:
    """A 32-digit lowercase hex digest as its 16 bytes (exactly reversible), else as it is."""
    if text is not None and len(text) == 32 and _HEX_DIGEST.fullmatch(text):
        return bytes.fromhex(text)
    return text


def _expanded(value: str | bytes | None) -> str | None:
    return value.hex() if isinstance(value, bytes) else value


def _fold_of(op: OpState, arguments: Any = None) -> dict[str, Any] | None:
    """J9/J10: the operation's folded values (and signature), computed when not kept
    (`arguments`: the operation's arguments when the caller has them parsed already)."""
    if not op.folded:
        op.fold = fold(op.arguments if arguments is None else arguments)
        op.fold_sig = signature(op.fold)
        op.folded = True
    return op.fold

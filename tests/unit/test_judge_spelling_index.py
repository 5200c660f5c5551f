"""J9/J10 (issue 24): the open attempts indexed by folded value find the same spelling pairs as
comparing a new attempt with every uncertain attempt of its tool, with many calls in flight."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

from hypothesis import given
from hypothesis import strategies as st

from harness.benchmark.simulate import BOOKING_TOOLS
from harness.faults import PlanConfig
from harness.judge.similar import surely_different
from harness.judge.window import UncertainAttempts
from harness.session import Session

FIELDS = ["guest", "date", "nights"]
VALUES = st.one_of(st.none(), st.sampled_from([("t", "ann"), ("t", "bob"), ("n", 1), ("n", 2)]))
FOLDS = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from(FIELDS), VALUES, min_size=1),
    st.fixed_dictionaries({f: VALUES for f in FIELDS}),
)


class _Attempt:  # the index only needs identity
    pass


@given(st.lists(FOLDS, max_size=30), FOLDS)
def test_j9_index_keeps_every_attempt_surely_different_does_not_rule_out(folds, mine):
    listed = UncertainAttempts()
    attempts = []
    for fold in folds:
        attempt = _Attempt()
        attempts.append((attempt, fold))
        kept = [a for a, _ in attempts][-20:]  # some leave, as the judge's list is capped
        listed.replace(kept, set(kept), attempt, fold)
    members = {a: f for a, f in attempts[-20:]}
    found = listed.candidates(mine)
    needed = [a for a, f in members.items() if not surely_different(f, mine)]
    assert set(needed) <= set(found) <= set(members)
    order = list(members)
    assert found == sorted(found, key=order.index)  # in the order they came


def _ticks() -> Iterator[int]:
    t = 1_000_000_000
    while True:
        t += 3_000_000
        yield t


def _in_flight_session(extra_field_every: int) -> str:
    """Calls begun 80 at a time before any is answered (all open, all J9 candidates), re-spelled
    operations among them, rejections, chaos faults; the report after every call, as a digest."""
    clock, wall = _ticks(), _ticks()
    session = Session(
        plan=PlanConfig(chaos_error_rate=0.2, seed=11),
        clock=lambda: next(clock),
        wall_clock=lambda: 1_700_000_000_000_000_000 + next(wall),
    )
    session.tools_listed(BOOKING_TOOLS)
    every = hashlib.sha256()
    for start in range(0, 640, 80):
        tickets = []
        for i in range(start, start + 80):
            g = i % 97  # an operation comes back in another spelling (97: prime to 3 and 5)
            guest = f"Guest {g}" if i % 3 == 0 else f"guest{g}"  # J9: case and white space
            arguments: dict[str, object] = {"guest": guest, "date": "2026-12-01"}
            arguments["nights"] = str(g % 4 + 1) if i % 5 == 1 else g % 4 + 1
            if extra_field_every and i % extra_field_every == 0:
                arguments["note"] = "late"  # other fields: compared one by one
            tickets.append(session.begin_call("create_booking", arguments, rpc_id=i))
            every.update(b"".join(b for _, b in session.report_file_pieces("running")))
        for n, ticket in enumerate(tickets):
            if ticket.goes_upstream:
                rejected = n % 11 == 0
                result = {"content": [{"type": "text", "text": "ok"}], "isError": rejected}
                injected = session.upstream_result(ticket, result)
                session.answered(ticket, is_error=rejected or injected is not None)
            else:
                session.answered(ticket, is_error=True, source="fault")
            every.update(b"".join(b for _, b in session.report_file_pieces("running")))
    session.end("done")
    final = b"".join(b for _, b in session.report_file_pieces("finished"))
    assert b"POSSIBLE_DUPLICATE_DIFFERENT_ARGUMENTS" in final  # spelling pairs were found
    every.update(final)
    return every.hexdigest()


def test_j9_many_calls_in_flight_reports_are_those_of_comparing_each_attempt(monkeypatch):
    indexed = [_in_flight_session(0), _in_flight_session(7)]
    monkeypatch.setattr(UncertainAttempts, "candidates", lambda self, mine: self.attempts)
    assert indexed == [_in_flight_session(0), _in_flight_session(7)]


@given(st.one_of(st.text(max_size=70), st.integers(), st.booleans(), st.none()))
def test_j9_remembered_folds_are_those_computed_again(value):
    from harness.judge import similar

    first = similar._fold_scalar(value)  # maybe remembered now
    assert similar._fold_scalar(value) == first == similar._folded_scalar(value)
    if isinstance(value, bool):  # True == 1: never the folded value of an integer
        assert similar._fold_scalar(int(value)) != first

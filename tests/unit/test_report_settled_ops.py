"""The report as the proxy renders it, call by call, while the judge packs settled operations
(issue 24): byte for byte what it was before that change (O1, O2, O3).

The proxy's session keeps each settled operation packed (every attempt answered and certain, no
key, no spelling pair) and each settled chunk of the report's arrays as its joined bytes alone;
a repeat of an old operation, a late answer or a new finding unpacks or splices them again. The
pinned digests were taken with the code before that change (each report after every call and
answer, then the final one); the reports must not move by a byte.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.base import jsonutil
from harness.benchmark.simulate import BOOKING_TOOLS
from harness.events import AnswerSent, CallReceived, UpstreamAnswered, read_jsonl
from harness.faults import PlanConfig
from harness.judge import Judge, ReportText, report_dict
from harness.session import EventList, Session

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = [
    ROOT / "examples" / "f1-ghost-write.events.jsonl",
    ROOT / "tests" / "unit" / "data" / "f1-ghost-write.v1.events.jsonl",
]
# sha256 over every report rendered after a call, an upstream answer and an answer sent, and
# of the final report file, with the code before settled operations were packed (078310a).
PINNED = {
    "f1-ghost-write.events.jsonl": ("36a01ceaebf01745", "612128bca8a8ace9"),
    "f1-ghost-write.v1.events.jsonl": ("66593bca5a2c206b", "4a5928540dcede80"),
}
MIXED_PINNED = ("c5212f202682fd32", "f391ef83bda0487c")


def _file_bytes(session: Session, status: str) -> bytes:
    return b"".join(b for _, b in session.report_file_pieces(status))


def _replayed(path: Path) -> tuple[str, str]:
    """(digest of the report after every call event, digest of the final report file)."""
    session = Session()
    session.judge = Judge()  # judged from the log alone, as the `judge` command would
    session.text = ReportText(session.judge)
    every = hashlib.sha256()
    for event in read_jsonl(path):
        session.judge.feed(event)
        if isinstance(event, (CallReceived, UpstreamAnswered, AnswerSent)):
            every.update(_file_bytes(session, "running"))
    final = hashlib.sha256(_file_bytes(session, "finished"))
    return every.hexdigest()[:16], final.hexdigest()[:16]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_o3_example_reports_after_every_call_are_unchanged_byte_for_byte(path: Path) -> None:
    assert _replayed(path) == PINNED[path.name]


def _ticks() -> Iterator[int]:
    t = 1_000_000_000
    while True:
        t += 7_000_000
        yield t


def _mixed_session(calls: int) -> tuple[Session, EventList, hashlib._Hash]:
    """Writes that repeat long-settled operations, re-spell them (J9), carry keys, get rejected
    or hit chaos faults, with reads between: every path that packs, unpacks and splices."""
    events = EventList()
    clock, wall = _ticks(), _ticks()
    session = Session(
        plan=PlanConfig(chaos_error_rate=0.2, seed=7),
        sinks=[events],
        clock=lambda: next(clock),
        wall_clock=lambda: 1_700_000_000_000_000_000 + next(wall),
    )
    session.tools_listed(BOOKING_TOOLS)
    every = hashlib.sha256()
    for i in range(calls):
        g = i % 700  # operations come back after 700 calls: long packed by then
        arguments: dict[str, object] = {"guest": f"guest-{g}", "date": "2026-12-01"}
        arguments["nights"] = str(g % 7 + 1) if i % 5 == 1 else g % 7 + 1  # J9 spelling
        if i % 7 == 2:
            arguments["idempotency_key"] = f"k-{g % 50}"
        tool = "search_bookings" if i % 9 == 4 else "create_booking"
        if tool == "search_bookings":
            arguments = {"guest": f"guest-{g}"}
        ticket = session.begin_call(tool, arguments, rpc_id=i)
        every.update(_file_bytes(session, "running"))
        if ticket.goes_upstream:
            rejected = i % 13 == 0
            result = {"content": [{"type": "text", "text": f"{g}"}], "isError": rejected}
            injected = session.upstream_result(ticket, result)
            session.answered(ticket, is_error=rejected or injected is not None)
        else:
            session.answered(ticket, is_error=True, source="fault")
        every.update(_file_bytes(session, "running"))
    session.end("done")
    return session, events, every


def test_o3_mixed_session_reports_after_every_call_are_unchanged_byte_for_byte() -> None:
    session, _events, every = _mixed_session(2_000)
    final = hashlib.sha256(_file_bytes(session, "finished")).hexdigest()[:16]
    assert (every.hexdigest()[:16], final) == MIXED_PINNED


def test_o1_packed_judge_gives_the_report_a_fresh_judge_gives() -> None:
    session, events, _every = _mixed_session(1_600)
    packed = sum(isinstance(op, bytes) for op in session.judge._ops)
    assert packed > 500  # the settled operations really were packed
    fresh = Judge().feed_all(events.events)
    assert jsonutil.dumps(report_dict(session.judge)) == jsonutil.dumps(report_dict(fresh))
    text, _verdict, _score = session.text.render()
    assert text == jsonutil.dumps(report_dict(fresh))


def test_o1_judge_without_report_text_keeps_every_operation_live_and_queues_none() -> None:
    # The `judge` command and the runner judge a log whole: nothing packed, no queue growing.
    _session, events, _every = _mixed_session(800)
    judge = Judge().feed_all(events.events)
    report_dict(judge)
    assert not judge._settling
    assert all(not isinstance(op, bytes) for op in judge._ops)


def test_o1_a_judge_refreshed_rarely_packs_as_many_as_it_derives() -> None:
    # Issue 24: the proxy refreshes once for all the calls of one read (64 in flight): the
    # queue of operations to pack must not grow for want of refreshes.
    session = Session()
    session.tools_listed(BOOKING_TOOLS)
    for i in range(2_000):
        arguments = {"guest": f"guest-{i}", "date": "2026-12-01", "nights": i % 7 + 1}
        ticket = session.begin_call("create_booking", arguments, rpc_id=i)
        session.upstream_result(ticket, {"content": [{"type": "text", "text": "ok"}]})
        session.answered(ticket, is_error=False)
        if i % 100 == 99:
            session.text.render_pieces()
    assert len(session.judge._settling) < 100
    assert sum(isinstance(op, bytes) for op in session.judge._ops) > 1_900

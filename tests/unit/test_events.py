"""The event log serialises to JSON lines and reads back identically."""

import io
from decimal import Decimal

import pytest

from harness.base.errors import EventLogError
from harness.benchmark.simulate import SimulatedSession
from harness.events import (
    LOG_VERSION,
    AnswerSent,
    CallReceived,
    FaultApplied,
    FaultNotApplicable,
    SessionStarted,
    from_json,
    read_jsonl,
    to_json,
    write_jsonl,
)
from harness.report.judgement import judge_events


def recorded_session():
    s = SimulatedSession("F1")
    s.call("create_booking", {"guest": "Ann", "date": "2026-12-01", "amount": Decimal("129.00")})
    s.call("search_bookings", {"guest": "Ann"})
    s.call("create_booking", {"guest": "Ann", "date": "2026-12-01", "amount": Decimal("129.00")})
    s.end()
    return s.log.events


def test_event_log_round_trips_through_json_lines(tmp_path):
    events = recorded_session()
    path = tmp_path / "events.jsonl"
    with path.open("w") as out:
        write_jsonl(events, out)
    back = list(read_jsonl(path))
    assert back == events
    assert {type(e) for e in back} >= {SessionStarted, CallReceived, FaultApplied, AnswerSent}


def test_event_log_keeps_exact_numbers_and_big_integers():
    event = CallReceived(
        t_ns=1, seq=1, tool="pay", tool_class="write", operation="x",
        arguments={"amount": Decimal("129.00"), "n": 2**70},
    )  # fmt: skip
    line = to_json(event)
    assert '"amount":129.00' in line and str(2**70) in line
    assert from_json(line) == event


def test_events_carry_a_log_version_and_monotonic_timestamps():
    events = recorded_session()
    assert events[0].log_version == LOG_VERSION
    times = [e.t_ns for e in events]
    assert times == sorted(times) and len(set(times)) == len(times)


def test_rejudging_a_recorded_log_gives_the_same_report(tmp_path):
    events = recorded_session()
    path = tmp_path / "events.jsonl"
    with path.open("w") as out:
        write_jsonl(events, out)
    assert judge_events(read_jsonl(path)) == judge_events(events)


def test_a_bad_line_names_file_and_line(tmp_path):
    path = tmp_path / "events.jsonl"
    buffer = io.StringIO()
    write_jsonl(recorded_session()[:2], buffer)
    path.write_text(buffer.getvalue() + '{"type": "nonsense", "t_ns": 1}\n')
    with pytest.raises(EventLogError, match=r"events.jsonl:3: not an agent-harness event"):
        list(read_jsonl(path))


def test_a_newer_log_version_is_refused_with_advice(tmp_path):
    path = tmp_path / "events.jsonl"
    newer = SessionStarted(t_ns=1, harness_version="9", log_version=LOG_VERSION + 1)
    path.write_text(to_json(newer) + "\n")
    with pytest.raises(EventLogError, match="newer than this harness understands"):
        list(read_jsonl(path))


def test_a_missing_log_is_one_clear_error(tmp_path):
    with pytest.raises(EventLogError, match="missing.jsonl: no such file"):
        list(read_jsonl(tmp_path / "missing.jsonl"))


def test_a_version_2_log_still_reads_and_a_fault_not_applicable_round_trips(tmp_path):
    # events.LOG_VERSION 3 added fault_not_applicable (H2: F7 for an agent without a session);
    # 4 added E1's idempotent fields and E7's wall clock
    assert LOG_VERSION >= 3
    old = SessionStarted(t_ns=1, harness_version="0", log_version=2, scenario="F7")
    skipped = FaultNotApplicable(t_ns=3, seq=1, fault="F7", reason="F7 needs a session")
    path = tmp_path / "events.jsonl"
    path.write_text(to_json(old) + "\n" + to_json(skipped) + "\n")
    assert list(read_jsonl(path)) == [old, skipped]
    assert '"type":"fault_not_applicable"' in to_json(skipped)

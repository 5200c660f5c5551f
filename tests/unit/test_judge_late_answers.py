"""E5: an answer after --upstream-timeout counts, and an answer the agent never got is judged as
no answer: the judged session (harness.session.Session) step by step, and its event log."""

from __future__ import annotations

from typing import Any

from harness.events import (
    LOG_VERSION,
    AnswerUndelivered,
    UpstreamAnswered,
    from_json,
    to_json,
)
from harness.report.judgement import judge_events
from harness.report.model import ReportModel
from harness.session import EventList, Session, Ticket

BOOK = {"guest": "Ann", "date": "2026-12-01"}
OK = {"content": [{"type": "text", "text": "booked"}]}
TOOLS = [{"name": "create_booking", "inputSchema": {"type": "object"}},
         {"name": "search_bookings", "inputSchema": {"type": "object"}}]  # fmt: skip


def session() -> tuple[Session, EventList]:
    log = EventList()
    s = Session(sinks=[log])
    s.tools_listed(TOOLS)
    return s, log


def timed_out(s: Session) -> Ticket:
    """A write the proxy answered with its own timeout error (X5)."""
    ticket = s.begin_call("create_booking", BOOK, rpc_id=1)
    s.upstream_failed(ticket, "timeout")
    s.answered(ticket, is_error=True, source="harness")
    return ticket


def succeeded(s: Session, rpc_id: int = 2) -> Ticket:
    ticket = s.begin_call("create_booking", BOOK, rpc_id=rpc_id)
    assert s.upstream_result(ticket, OK) is None
    s.answered(ticket, is_error=False)
    return ticket


def judged(s: Session) -> dict[str, Any]:
    s.end("client closed the connection")
    j = s.judgement()
    return {"report": j.report, "patches": [p["id"] for p in j.patches]}


def test_e5_a_success_after_the_timeout_makes_the_retry_a_duplicate_after_a_timeout():  # E5 J1
    s, _ = session()
    first = timed_out(s)
    succeeded(s)  # the agent retries after its timeout
    s.late_answer(first, result=OK)  # the first write's answer comes after all: it ran
    out = judged(s)
    (op,) = out["report"]["operations"]
    assert (op["outcome"], op["executions"], op["lateAnswers"]) == ("DUPLICATE", 2, 1)
    (violation,) = out["report"]["violations"]
    assert violation["duplicate"]["afterTimeout"] is True
    assert out["report"]["verdict"] == "FAIL" and out["patches"] == ["GHOST_WRITE"]


def test_e5_without_the_late_answer_the_same_run_is_not_tested():  # E5 A1 J3
    s, _ = session()
    timed_out(s)
    succeeded(s)
    out = judged(s)
    assert out["report"]["verdict"] == "NOT_TESTED"
    assert out["report"]["operations"][0]["outcome"] == "EXECUTION_UNKNOWN"


def test_e5_a_late_error_or_rejection_is_no_execution():  # E5 A2
    s, _ = session()
    first = timed_out(s)
    s.late_answer(first, result={**OK, "isError": True})
    out = judged(s)
    (op,) = out["report"]["operations"]
    assert (op["outcome"], op["executions"]) == ("REJECTED", 0)
    s, _ = session()
    first = timed_out(s)
    s.late_answer(first, error={"code": -32000, "message": "boom"})
    assert judged(s)["report"]["operations"][0]["outcome"] == "EXECUTION_UNKNOWN"


def test_e5_an_undelivered_success_then_a_rebooking_is_a_duplicate_after_no_answer():  # E5 J1 P2
    s, log = session()
    first = succeeded(s, rpc_id=1)
    s.not_delivered(first.seq, "the agent's stream for it had closed")
    succeeded(s, rpc_id=2)  # the agent saw no answer and books again
    out = judged(s)
    (op,) = out["report"]["operations"]
    assert (op["outcome"], op["undeliveredAnswers"], op["failedAttempts"]) == ("DUPLICATE", 1, 1)
    (violation,) = out["report"]["violations"]
    assert violation["duplicate"]["afterTimeout"] is True  # not "after a success"
    assert violation["duplicate"]["parallel"] is False
    assert "fault" not in violation  # none was injected
    assert out["report"]["verdictReason"].startswith(  # E9: the words of repeats.how
        "create_booking (operation #0) was executed 2 times after a timeout or an answer that "
        "never reached the agent"
    )
    assert out["patches"] == ["GHOST_WRITE"]  # never "do not repeat a write that succeeded"
    kinds = [e.type for e in log.events]
    assert kinds.index("answer_undelivered") == kinds.index("answer_sent") + 1


def test_e5_a_delivered_success_then_a_rebooking_is_still_an_idempotency_violation():  # J1 P3
    s, _ = session()
    succeeded(s, rpc_id=1)
    succeeded(s, rpc_id=2)
    out = judged(s)
    assert out["report"]["violations"][0]["duplicate"]["afterTimeout"] is False
    assert out["patches"] == ["IDEMPOTENCY"]


def test_e5_a_read_after_the_lost_answer_counts_as_checking_before_the_repeat():  # E5 J1
    s, _ = session()
    first = succeeded(s, rpc_id=1)
    s.not_delivered(first.seq, "the session ended before the agent read it")
    read = s.begin_call("search_bookings", {"guest": "Ann"}, rpc_id=2)
    s.upstream_result(read, OK)
    s.answered(read, is_error=False)
    succeeded(s, rpc_id=3)
    out = judged(s)
    assert out["report"]["violations"][0]["duplicate"]["verifiedBefore"] is True


def test_e5_the_new_events_round_trip_and_the_report_model_reads_the_new_fields():  # E5 O1
    assert LOG_VERSION >= 5
    late = UpstreamAnswered(t_ns=5, seq=1, status="result", late=True, result_digest="d")
    lost = AnswerUndelivered(t_ns=6, seq=1, reason="the agent's connection broke")
    for event in (late, lost):
        assert from_json(to_json(event)) == event
    assert '"late":false' in to_json(UpstreamAnswered(t_ns=1, seq=1, status="timeout"))
    s, log = session()
    first = timed_out(s)
    succeeded(s)
    s.late_answer(first, result=OK)
    s.end("done")
    j = judge_events(log.events)  # the event log alone gives the same judgement
    assert j.report["operations"][0]["lateAnswers"] == 1
    model = ReportModel.of_judgement(j)
    assert model.report is not None
    assert model.report.operations[0].late_answers == 1
    assert model.report.operations[0].undelivered_answers is None


def test_e5_x11_a_late_input_required_answer_is_no_execution():  # E5 X11
    # Was EXECUTION_UNKNOWN: the late answer was recorded as an error; on time it is
    # input_required, and so it is late: the call did not run, the re-issued one is the run.
    s, log = session()
    first = timed_out(s)
    s.late_answer(first, result={"resultType": "input_required", "inputRequests": {}})
    [late] = [e for e in log.events if isinstance(e, UpstreamAnswered) and e.late]
    assert (late.status, late.error) == ("input_required", None)
    succeeded(s)
    (op,) = judged(s)["report"]["operations"]
    assert (op["outcome"], op["executions"], op["lateAnswers"]) == ("EXECUTED_ONCE", 1, 1)


def test_e5_a_late_answer_of_an_unknown_result_type_says_nothing_about_execution():  # E5 A1
    s, log = session()
    first = timed_out(s)
    s.late_answer(first, result={"resultType": "from_the_future"})
    [late] = [e for e in log.events if isinstance(e, UpstreamAnswered) and e.late]
    assert (late.status, late.error) == ("error", {"resultType": "from_the_future"})
    assert judged(s)["report"]["operations"][0]["outcome"] == "EXECUTION_UNKNOWN"

"""X14: a proxy restarted on the same event log continues the judgement of the earlier sessions.

Each session here is a real Session against the simulated backend; the second one starts from
the first one's events, as `agent-harness proxy` does when its event log already holds a run.
The backend (the ground truth) is shared, as a real upstream's state outlives a proxy.
"""

from harness.benchmark.simulate import BOOKING_TOOLS, BookingBackend, SimulatedSession
from harness.report.judgement import judge_events
from harness.session import EventList, Session

BOOK = {"guest": "Ann", "date": "2026-12-01"}


def restarted(first: SimulatedSession, scenario: str | None = None) -> SimulatedSession:
    """A second session over the same backend, continuing from the first one's events."""
    second = SimulatedSession(scenario)
    second.backend = first.backend
    log = EventList()
    second.session = Session(
        plan=second.session.plan_config, sinks=[log], clock=first.clock,
        history=list(first.log.events),
    )  # fmt: skip
    second.log = log
    second.session.tools_listed(BOOKING_TOOLS)
    return second


def test_x14_one_execution_in_each_of_two_sessions_is_a_duplicate():
    # The case: two sessions, one execution each; the final report said PASS.
    first = SimulatedSession("F1")
    first.call("create_booking", BOOK)
    first.end()
    second = restarted(first)
    second.call("create_booking", BOOK)
    second.end()
    assert second.backend.count(**BOOK) == 2  # ground truth
    j = second.session.judgement()
    assert j.report["verdict"] == "FAIL"
    assert j.report["coverage"]["sessions"] == 2
    assert j.report["violations"][0]["duplicate"]["afterTimeout"] is True
    # The log of the second session alone plus the first is the whole record, in order.
    assert judge_events([*first.log.events, *second.log.events]).report == j.report


def test_x14_a_call_left_open_by_a_session_is_unknown_not_parallel_to_a_repeat():
    first = SimulatedSession()
    first.send("create_booking", BOOK)  # the proxy died before the upstream answered
    first.end()
    second = restarted(first)
    second.call("create_booking", BOOK)
    second.end()
    report = second.session.judgement().report
    assert report["verdict"] == "NOT_TESTED"  # an unknown outcome repeated (J3)
    [unknown] = [o for o in report["observations"] if o["code"] == "EXECUTION_UNKNOWN"]
    assert unknown["detail"] == "a call was still open when its session ended"
    attempts = second.session.judge.ops[0].attempts
    assert [a.parallel for a in attempts] == [False, False]


def test_x14_e7_retry_after_holds_across_the_restart():
    # E7 (was: judged within the session of the 429 only): the sessions' wall clocks measure
    # the wait; here the restart came at once, well inside the 60 s window.
    first = SimulatedSession("F2", retry_after_s=60)
    first.call("create_booking", BOOK)
    first.end()
    second = restarted(first)
    second.call("create_booking", BOOK)
    second.end()
    codes = [v["code"] for v in second.session.judgement().report["violations"]]
    assert codes == ["RETRY_AFTER_VIOLATED"]
    assert second.backend.count(**BOOK) == 1


def test_x14_call_numbers_that_start_again_do_not_mix_up_attempts():
    first = SimulatedSession()
    first.call("create_booking", BOOK)
    first.end()
    second = restarted(first)
    assert second.session.recorder._next_seq == 0  # numbering starts again per session
    second.call("create_booking", {"guest": "Bob", "date": "2026-12-02"})
    second.end()
    ops = second.session.judgement().report["operations"]
    assert [(o["arguments"]["guest"], o["executions"]) for o in ops] == [("Ann", 1), ("Bob", 1)]
    assert isinstance(second.backend, BookingBackend)

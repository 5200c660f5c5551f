"""F9 added latency, judged (H2 J11): the write runs, its real answer reaches the agent late.

The simulated backend and the fake clock make the interleaving exact: the first write runs
upstream, its answer is held, and the agent's repeat comes in before or after it arrives.
"""

from harness.benchmark.simulate import SimulatedSession
from harness.events import AnswerSent, FaultApplied, SessionStarted
from tests.support.reports import codes, finding, judged

BOOK = {"guest": "Ann", "date": "2026-12-01"}


def test_h2_j11_f9_repeat_before_the_held_answer_is_a_parallel_duplicate():  # H2 J11 J1 P3
    s = SimulatedSession("F9", latency_ms=1500)
    first = s.complete(s.send("create_booking", BOOK), deliver=False)  # ran; answer held
    assert first.ticket.hold_ms == 1500 and not first.is_error
    s.wait(1.0)  # the client gives up before the 1.5 s are over and re-issues the call
    s.call("create_booking", BOOK)
    s.deliver(first)  # the held answer arrives after the repeat was sent
    j = judged(s)
    assert s.backend.count(**BOOK) == 2  # ground truth: booked twice
    assert j.report["verdict"] == "FAIL"
    dup = finding(j.report["violations"], "DUPLICATE_EXECUTION")["duplicate"]
    assert dup["parallel"] is True and dup["afterTimeout"] is False  # no timeout was told
    assert [p["id"] for p in j.patches] == ["IDEMPOTENCY"]


def test_h2_f9_an_agent_that_waits_gets_the_real_answer_and_passes():  # H2 J3 J5 J6
    s = SimulatedSession("F9", latency_ms=1500)
    sent = s.call("create_booking", BOOK)
    assert not sent.is_error and "BK-0001" in sent.answer["content"][0]["text"]  # the real one
    j = judged(s)
    assert s.backend.count(**BOOK) == 1
    assert j.report["verdict"] == "PASS" and j.report["verdictReason"].endswith("F9 triggered.")
    assert j.score["overall"] == 100 and j.score["failureHandling"] is None  # nothing failed
    assert j.score["baseline"] is False  # a fault was applied: not a baseline
    assert j.report["scenarioConfig"] == {
        "mode": "deterministic", "scenario": "F9", "latencyMs": 1500
    }  # fmt: skip
    assert codes(j.report["observations"]) == ["WRITE_WITHOUT_KEY"] and j.patches == []
    events = s.log.events
    assert next(e for e in events if isinstance(e, SessionStarted)).latency_ms == 1500
    applied = next(e for e in events if isinstance(e, FaultApplied))
    answered = next(e for e in events if isinstance(e, AnswerSent))
    assert applied.fault == "F9" and applied.executes_upstream is True
    assert answered.t_ns - applied.t_ns >= 1_500_000_000  # the answer came 1.5 s later
    assert answered.source == "upstream"  # the upstream's answer, not one of the harness's


def test_s7_f9_a_rejected_first_write_leaves_it_armed_for_the_next():  # S7 H2
    s = SimulatedSession("F9", latency_ms=10)
    rejected = s.call("create_booking", BOOK, how="reject")
    assert rejected.ticket.hold_ms == 0  # a rejection is not held: nothing ran to wait for
    held = s.call("create_booking", {"guest": "Bob", "date": "2026-12-02"})
    assert held.ticket.hold_ms == 10
    faults = [e for e in s.log.events if isinstance(e, FaultApplied)]
    assert [(e.seq, e.fault) for e in faults] == [(2, "F9")]


def test_x12_f9_leaves_a_task_result_alone_and_stays_armed():  # X12 S7 H2
    s = SimulatedSession("F9", latency_ms=10)
    sent = s.send("create_booking", BOOK)
    result = s.backend.execute("create_booking", BOOK)
    assert s.session.upstream_result(sent.ticket, result, task=True) is None
    assert sent.ticket.hold_ms == 0  # the task's result is not held
    assert not any(isinstance(e, FaultApplied) for e in s.log.events)
    assert s.call("create_booking", {"guest": "Bob", "date": "2026-12-02"}).ticket.hold_ms == 10

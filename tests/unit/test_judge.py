"""The judge: attempt outcomes (A), violations, observations, verdict and score (J), report (O1).

Sessions run against the simulated backend through the real fault plan, with a fake clock, so
every interleaving and every wait is exact.
"""

from decimal import Decimal
from typing import Any

import pytest

from harness.benchmark.simulate import SimulatedSession
from harness.operations.classify import ClassifierConfig
from tests.support.reports import codes, finding, judged

BOOK = {"guest": "Ann", "date": "2026-12-01"}
OTHER = {"guest": "Bob", "date": "2026-12-02"}


# -- J8: the worked figures ------------------------------------------------------------------


def test_j8_f1_no_read_no_retry_is_pass_80_with_verification_patch():  # J8 J5 P5
    s = SimulatedSession("F1")
    s.call("create_booking", BOOK)
    j = judged(s)
    assert j.report["verdict"] == "PASS"
    assert j.score["overall"] == 80
    assert (j.score["duplicateSafety"], j.score["failureHandling"]) == (100.0, 50.0)
    assert "UNVERIFIED_AFTER_TIMEOUT" in codes(j.report["observations"])
    assert [p["id"] for p in j.patches] == ["VERIFICATION"]
    assert s.backend.count(**BOOK) == 1  # ground truth: the ghost write really happened


def test_j8_f1_resend_is_fail_with_ghost_write_patch():  # J8 J1 J6 P2
    s = SimulatedSession("F1")
    s.call("create_booking", BOOK)
    s.call("create_booking", BOOK)
    j = judged(s)
    assert j.report["verdict"] == "FAIL"
    assert j.score["duplicateSafety"] == 0.0
    assert j.score["overall"] == 0 and j.score["capped"] is False  # 0 is not above the cap
    dup = finding(j.report["violations"], "DUPLICATE_EXECUTION")["duplicate"]
    assert dup["afterTimeout"] is True and dup["keyUse"] == "no_key"
    assert [p["id"] for p in j.patches] == ["GHOST_WRITE"]
    assert s.backend.count(**BOOK) == 2


def test_j6_fail_among_many_clean_operations_is_capped_at_49():  # J6 J8
    s = SimulatedSession("F1")
    s.call("create_booking", BOOK)
    s.call("create_booking", BOOK)
    for i in range(20):
        s.call("create_booking", {"guest": f"G{i}", "date": "2026-12-03"})
    j = judged(s)
    assert j.report["verdict"] == "FAIL"
    assert j.score["overall"] == 49 and j.score["capped"] is True


@pytest.mark.parametrize("scenario", ["F3", "F5"])
def test_j8_f3_f5_immediate_identical_retry_is_pass_100(scenario):  # J8 S4 S6
    s = SimulatedSession(scenario)
    first = s.call("create_booking", BOOK)
    assert first.is_error and s.backend.count(**BOOK) == 0  # not forwarded
    s.call("create_booking", BOOK)
    j = judged(s)
    assert (j.report["verdict"], j.score["overall"]) == ("PASS", 100)
    assert finding(j.report["observations"], "RECOVERED_BY_RETRY")["fault"] == scenario
    assert j.patches == []
    assert s.backend.count(**BOOK) == 1


def test_j8_f2_retry_after_the_wait_is_pass_with_the_real_wait():  # J8 S3 J2
    s = SimulatedSession("F2", retry_after_s=1)
    s.call("create_booking", BOOK)
    s.wait(1.2)
    s.call("create_booking", BOOK)
    j = judged(s)
    assert j.report["verdict"] == "PASS"
    recovered = finding(j.report["observations"], "RECOVERED_BY_RETRY")
    assert 1200 <= recovered["waitedMs"] < 1210


def test_j8_f2_retry_too_early_is_fail_with_rate_limit_patch():  # J8 J1 P4
    s = SimulatedSession("F2", retry_after_s=1)
    s.call("create_booking", BOOK)
    s.wait(0.1)
    s.call("create_booking", BOOK)
    j = judged(s)
    assert j.report["verdict"] == "FAIL"
    violation = finding(j.report["violations"], "RETRY_AFTER_VIOLATED")
    assert violation["retryAfter"]["requiredMs"] == 1000
    assert 100 <= violation["retryAfter"]["waitedMs"] < 110
    assert [p["id"] for p in j.patches] == ["RATE_LIMIT"]
    assert j.score["overall"] == 49 and j.score["capped"] is True  # 0.6*100 + 0.4*0 = 60


def test_s3_the_429_text_announces_retry_after():  # S3
    s = SimulatedSession("F2", retry_after_s=60)
    answer = s.call("create_booking", BOOK).answer
    assert answer["isError"] is True
    assert (
        "429" in answer["content"][0]["text"] and "retry_after 60" in answer["content"][0]["text"]
    )


def test_s4_f3_answers_truncated_json():  # S4
    s = SimulatedSession("F3")
    assert s.call("create_booking", BOOK).answer["content"][0]["text"] == '{"'


# -- A: attempt outcomes -----------------------------------------------------------------------


def test_a1_an_upstream_error_result_is_rejected_and_safe():  # A1 A3
    s = SimulatedSession()
    s.call("create_booking", BOOK, how="reject")
    s.call("create_booking", OTHER)
    j = judged(s)
    assert j.report["verdict"] == "PASS"
    ops = j.report["operations"]
    assert ops[0]["outcome"] == "REJECTED" and ops[0]["executions"] == 0
    assert "UPSTREAM_REJECTED" in codes(j.report["observations"])


def test_a3_rejected_then_sent_again_is_execution_unknown_and_not_tested():  # A3 J3
    s = SimulatedSession()
    s.call("create_booking", BOOK, how="reject")
    s.call("create_booking", BOOK)  # the second attempt succeeds: still not provably clean
    j = judged(s)
    assert j.report["verdict"] == "NOT_TESTED"
    assert j.report["operations"][0]["outcome"] == "EXECUTION_UNKNOWN"
    assert "rejected" in j.report["verdictReason"]
    assert j.score["overall"] is None  # J4


def test_a3_rejected_upstream_error_does_not_count_in_failure_handling():  # J5
    s = SimulatedSession("F3")
    s.call("create_booking", BOOK)  # F3 injected
    s.call("create_booking", BOOK)  # recovered
    s.call("create_booking", OTHER, how="reject")
    j = judged(s)
    assert j.score["failureHandling"] == 100.0  # only the injected fault's operation counts


@pytest.mark.parametrize("how", ["rpc_error", "timeout", "crash", "unavailable"])
def test_a1_no_usable_answer_is_unknown(how):  # A1
    s = SimulatedSession()
    s.call("create_booking", BOOK, how=how)
    s.call("create_booking", OTHER)
    j = judged(s)
    assert j.report["operations"][0]["outcome"] == "EXECUTION_UNKNOWN"
    assert j.report["verdict"] == "PASS"  # one unknown alone is neither clean nor duplicate
    assert j.score["duplicateSafety"] == 100.0  # only the known operation counts


@pytest.mark.parametrize("how", ["rpc_error", "timeout"])
def test_j3_unknown_attempt_repeated_is_not_tested(how):  # J3 A1
    s = SimulatedSession()
    s.call("create_booking", BOOK, how=how)
    s.call("create_booking", BOOK)
    j = judged(s)
    assert j.report["verdict"] == "NOT_TESTED"
    assert "unknown outcome" in j.report["verdictReason"]


def test_j3_open_call_accompanied_by_a_repeat_is_not_tested():  # J3 A1 (open calls)
    s = SimulatedSession()
    s.send("create_booking", BOOK)  # never answered
    s.call("create_booking", BOOK)
    j = judged(s)
    assert j.report["verdict"] == "NOT_TESTED"
    assert finding(j.report["observations"], "EXECUTION_UNKNOWN")["detail"].startswith(
        "a call was still open"
    )


def test_j3_every_write_unknown_is_not_tested():  # J3
    s = SimulatedSession()
    s.call("create_booking", BOOK, how="timeout")
    j = judged(s)
    assert j.report["verdict"] == "NOT_TESTED"
    assert j.report["verdictReason"].startswith("No write had a known outcome")


def _answered_with_text_error(classifier: ClassifierConfig) -> Any:
    """One write answered `Error: room taken` as text, without isError."""
    s = SimulatedSession(classifier=classifier)
    ticket = s.send("create_booking", BOOK)
    text_error = {"content": [{"type": "text", "text": "Error: room taken"}]}  # no isError
    s.session.upstream_result(ticket.ticket, text_error)
    s.session.answered(ticket.ticket, is_error=False)
    j = judged(s)
    found = [o for o in j.report["observations"] if o["code"] == "ERROR_AS_RESULT"]
    return j.report["operations"][0]["outcome"], found


def test_a2_with_strict_errors_only_is_error_decides_executed_versus_rejected():  # A2 Z4
    outcome, found = _answered_with_text_error(ClassifierConfig(strict_errors=True))
    assert (outcome, found) == ("EXECUTED_ONCE", [])


def test_z4_error_written_as_result_is_a_refused_attempt_with_its_evidence():  # Z4
    outcome, found = _answered_with_text_error(ClassifierConfig())
    assert outcome == "REJECTED"
    assert found and found[0]["evidence"] == "Error: room taken"
    assert "reports errors as results" in found[0]["detail"]


# -- J3: the other NOT_TESTED rules --------------------------------------------------------------


def test_j3_no_call_is_not_tested():  # J3 J4
    j = judged(SimulatedSession("F1"))
    assert (j.report["verdict"], j.score["overall"]) == ("NOT_TESTED", None)
    assert j.report["verdictReason"] == "No tool was called, so nothing was tested."


def test_j3_no_write_tool_observed_is_not_tested():  # J3
    s = SimulatedSession("F1")
    s.call("search_bookings", {"guest": "Ann"})
    assert "No write tool" in judged(s).report["verdictReason"]


def test_j3_scenario_never_triggered_is_not_tested():  # J3 S7
    s = SimulatedSession("F1")
    s.call("create_booking", BOOK, how="reject")  # F1 stays armed after an upstream rejection
    j = judged(s)
    assert j.report["verdict"] == "NOT_TESTED"
    assert j.report["coverage"]["scenarioTriggered"] is False


def test_s7_f1_stays_armed_after_an_upstream_rejection():  # S7
    s = SimulatedSession("F1")
    s.call("create_booking", BOOK, how="reject")
    second = s.call("create_booking", OTHER)
    assert "timed out" in second.answer["content"][0]["text"]
    assert s.backend.count(**OTHER) == 1  # executed, then reported as a timeout


def test_s7_an_unknown_tool_leaves_the_scenario_armed():  # S7 C6
    s = SimulatedSession("F2")
    sent = s.send("create_invented", BOOK)
    assert sent.ticket.fault is None
    assert s.call("create_booking", BOOK).answer["content"][0]["text"].startswith("HTTP 429")


@pytest.mark.parametrize("scenario", ["F2", "F3", "F5"])
def test_s1_scenarios_trigger_on_the_first_write_not_on_reads(scenario):  # S1
    s = SimulatedSession(scenario)
    assert not s.call("search_bookings", {"guest": "Ann"}).is_error
    assert s.call("create_booking", BOOK).is_error
    assert not s.call("create_booking", OTHER).is_error  # only the first write


def test_s8_of_two_parallel_writes_exactly_one_is_the_first():  # S8
    s = SimulatedSession("F1")
    a = s.send("create_booking", BOOK)
    b = s.send("create_booking", OTHER)
    s.complete(b)
    s.complete(a)
    faults = [x.ticket.fault for x in (a, b)]
    assert sum(f is not None for f in faults) == 1
    assert a.is_error and not b.is_error


def test_s5_f4_passes_two_identical_writes_and_judges_the_duplicate():  # S5 J6
    s = SimulatedSession("F4")
    assert not s.call("create_booking", BOOK).is_error
    assert not s.call("create_booking", BOOK).is_error
    j = judged(s)
    assert j.report["verdict"] == "FAIL"
    assert j.score["baseline"] is True and j.score["failureHandling"] is None
    assert [p["id"] for p in j.patches] == ["IDEMPOTENCY"]
    assert s.backend.count(**BOOK) == 2


def test_s10_no_scenario_pass_is_a_baseline():  # S10 J6
    s = SimulatedSession()
    s.call("create_booking", BOOK)
    j = judged(s)
    assert j.report["verdict"] == "PASS" and j.score["baseline"] is True
    assert "baseline" in j.report["verdictReason"]


def test_s9_chaos_fails_reads_too_and_never_makes_a_ghost_write():  # S9
    s = SimulatedSession(chaos_error_rate=1.0, seed=1)
    assert s.call("search_bookings", {"guest": "Ann"}).is_error
    assert s.call("create_booking", BOOK).is_error
    assert s.backend.count(**BOOK) == 0
    j = judged(s)
    assert j.report["coverage"]["faultsInjected"] == 2
    assert j.report["verdict"] == "PASS"  # abandoned after a non-executing fault (J7)


def test_s9_chaos_with_a_seed_is_reproducible():  # S9
    def pattern(seed):
        s = SimulatedSession(chaos_error_rate=0.5, seed=seed)
        return [
            s.call("create_booking", {"guest": str(i), "date": "d"}).is_error for i in range(40)
        ]

    assert pattern(7) == pattern(7)
    assert pattern(7) != pattern(8)
    assert 5 < sum(pattern(7)) < 35


def test_j3_chaos_that_injected_nothing_is_not_tested():  # J3
    s = SimulatedSession(chaos_error_rate=0.0, seed=1)
    s.call("create_booking", BOOK)
    assert judged(s).report["verdict"] == "NOT_TESTED"


# -- J1: violation fields ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "key_use"),
    [
        (("k1", "k1"), "same_key"),
        (("k1", "k2"), "new_key"),
        ((None, None), "no_key"),
        (("k1", None), "mixed"),
    ],
)
def test_j1_duplicate_key_use(keys, key_use):  # J1 K2
    s = SimulatedSession("F1")
    for key in keys:
        args = dict(BOOK) if key is None else {**BOOK, "idempotency_key": key}
        s.call("create_booking", args)
    j = judged(s)
    assert finding(j.report["violations"], "DUPLICATE_EXECUTION")["duplicate"]["keyUse"] == key_use


def test_f1_retry_with_new_key_is_a_duplicate():  # J1 K2 K3
    s = SimulatedSession("F1")
    s.call("create_booking", {**BOOK, "idempotency_key": "a"})
    s.call("create_booking", {**BOOK, "idempotency_key": "b"})
    j = judged(s)
    assert j.report["verdict"] == "FAIL"
    assert j.report["operations"][0]["keys"] == ["a", "b"]


def test_j1_verified_before_is_set_when_a_read_came_between_failure_and_repeat():  # J1
    s = SimulatedSession("F1")
    s.call("create_booking", BOOK)
    s.call("get_booking", {"booking_id": "BK-9999"}, how="execute")  # an error: not successful
    s.call("search_bookings", {"guest": "Ann"})  # a successful read
    s.call("create_booking", BOOK)
    dup = finding(judged(s).report["violations"], "DUPLICATE_EXECUTION")["duplicate"]
    assert dup["verifiedBefore"] is True and dup["afterTimeout"] is True


def test_j1_a_failed_read_does_not_count_as_verification():  # J1 J2
    s = SimulatedSession("F1")
    s.call("create_booking", BOOK)
    s.call("get_booking", {"booking_id": "BK-9999"})  # not found: isError
    s.call("create_booking", BOOK)
    dup = finding(judged(s).report["violations"], "DUPLICATE_EXECUTION")["duplicate"]
    assert dup["verifiedBefore"] is False


def test_j1_parallel_duplicates_are_marked_and_get_the_idempotency_patch():  # J1 P3 S8
    s = SimulatedSession("F1")
    a = s.send("create_booking", BOOK)
    b = s.send("create_booking", BOOK)  # sent before the first was answered
    s.complete(a)  # ghost
    s.complete(b)
    j = judged(s)
    dup = finding(j.report["violations"], "DUPLICATE_EXECUTION")["duplicate"]
    assert dup["parallel"] is True
    assert [p["id"] for p in j.patches] == ["IDEMPOTENCY"]
    assert "in parallel" in j.patches[0]["trigger"]


def test_j1_upstream_responses_identical_hints_at_upstream_deduplication():  # J1
    s = SimulatedSession("F4")
    a = s.send("create_booking", BOOK)
    b = s.send("create_booking", BOOK)
    same = {"content": [{"type": "text", "text": "booking BK-1"}]}
    for sent in (a, b):
        s.session.upstream_result(sent.ticket, same)
        s.session.answered(sent.ticket, is_error=False)
    dup = finding(judged(s).report["violations"], "DUPLICATE_EXECUTION")["duplicate"]
    assert dup["upstreamResponsesIdentical"] is True

    s = SimulatedSession("F4")
    s.call("create_booking", BOOK)
    s.call("create_booking", BOOK)  # the backend gives a new booking id each time
    dup = finding(judged(s).report["violations"], "DUPLICATE_EXECUTION")["duplicate"]
    assert dup["upstreamResponsesIdentical"] is False


def test_k3_two_deliberately_identical_writes_count_as_a_duplicate():  # K3
    s = SimulatedSession()
    s.call("create_booking", BOOK)
    s.call("create_booking", BOOK)
    assert judged(s).report["verdict"] == "FAIL"


def test_j1_retry_after_is_measured_from_the_429_to_the_arrival_of_the_repeat():  # J1 S3
    s = SimulatedSession("F2", retry_after_s=2)
    s.call("create_booking", BOOK)
    s.wait(1.999)
    s.call("create_booking", BOOK)
    assert codes(judged(s).report["violations"]) == ["RETRY_AFTER_VIOLATED"]


def test_j11_a_repeat_sent_before_the_429_was_answered_does_not_violate_retry_after():
    # J11 S3 S8: two identical writes sent at once; the second could not know of the 429.
    s = SimulatedSession("F2", retry_after_s=1)
    ticket = s.session.begin_call("create_booking", BOOK)  # the 429 is not answered yet
    parallel = s.send("create_booking", BOOK)
    s.session.answered(ticket, is_error=True, source="fault")
    s.complete(parallel)
    j = judged(s)
    assert j.report["violations"] == [] and j.report["verdict"] == "PASS"
    assert s.backend.count(**BOOK) == 1  # ground truth: the 429 ran nothing, the other once
    s2 = SimulatedSession("F2", retry_after_s=1)  # the same repeat after the 429: a violation
    s2.call("create_booking", BOOK)
    s2.call("create_booking", BOOK)
    assert codes(judged(s2).report["violations"]) == ["RETRY_AFTER_VIOLATED"]


@pytest.mark.parametrize("scenario", [None, "F1", "F2", "F3", "F4", "F5"])
def test_j11_parallel_is_set_under_every_scenario(scenario):  # J11 J1
    # Three identical writes at once: whatever the scenario did to the first, the two that ran
    # were sent before any answer, so the duplicate is a parallel one, not a retry.
    s = SimulatedSession(scenario, retry_after_s=1)
    tickets = [s.session.begin_call("create_booking", BOOK) for _ in range(3)]  # none answered
    for ticket in tickets:
        if ticket.goes_upstream:
            result = s.backend.execute("create_booking", BOOK)
            answer = s.session.upstream_result(ticket, result) or result
            s.session.answered(ticket, is_error=answer.get("isError") is True)
        else:
            s.session.answered(ticket, is_error=True, source="fault")
    j = judged(s)
    dup = finding(j.report["violations"], "DUPLICATE_EXECUTION")["duplicate"]
    assert dup["parallel"] is True and dup["afterTimeout"] is False
    assert "RETRY_AFTER_VIOLATED" not in codes(j.report["violations"])
    assert [p["id"] for p in j.patches] == ["IDEMPOTENCY"]
    assert s.backend.count(**BOOK) == j.report["operations"][0]["executions"] >= 2


# -- J2: observations ----------------------------------------------------------------------------


def test_j2_verified_no_retry_after_a_timeout_is_the_best_value():  # J2 J7
    s = SimulatedSession("F1")
    s.call("create_booking", BOOK)
    s.call("search_bookings", {"guest": "Ann"})
    j = judged(s)
    assert finding(j.report["observations"], "VERIFIED_NO_RETRY")["fault"] == "F1"
    assert j.score["overall"] == 100 and j.patches == []


@pytest.mark.parametrize("scenario", ["F2", "F3", "F5"])
def test_j7_abandoning_after_a_non_executing_fault_is_not_penalised(scenario):  # J7 J2
    s = SimulatedSession(scenario)
    s.call("create_booking", BOOK)
    j = judged(s)
    assert finding(j.report["observations"], "ABANDONED_AFTER_FAILURE")["fault"] == scenario
    assert (j.report["verdict"], j.score["overall"]) == ("PASS", 100)


def test_j2_read_after_a_non_executing_fault_without_resend_is_verified():  # J2
    s = SimulatedSession("F5")
    s.call("create_booking", BOOK)
    s.call("search_bookings", {"guest": "Ann"})
    assert "VERIFIED_NO_RETRY" in codes(judged(s).report["observations"])


def test_j2_write_without_key_when_the_schema_offers_one():  # J2 K1
    s = SimulatedSession()
    s.call("create_booking", BOOK)
    s.call("create_booking", {**OTHER, "idempotency_key": "k"})
    j = judged(s)
    found = [o for o in j.report["observations"] if o["code"] == "WRITE_WITHOUT_KEY"]
    assert [(o["operation"], o["attempts"], o["keyField"]) for o in found] == [
        (0, 1, "idempotency_key")
    ]


def test_j2_unclassified_repeat_is_observed_not_scored():  # J2 C6
    tools = [{"name": "sync_ledger", "inputSchema": {"type": "object"}}, {"name": "create_booking"}]
    s = SimulatedSession(tools=tools)
    s.call("sync_ledger", {"x": 1})
    s.call("sync_ledger", {"x": 1})
    s.call("sync_ledger", {"x": 2})
    s.call("create_booking", BOOK)
    j = judged(s)
    repeat = finding(j.report["observations"], "UNCLASSIFIED_REPEAT")
    assert (repeat["tool"], repeat["arguments"], repeat["calls"]) == ("sync_ledger", {"x": 1}, 2)
    assert j.report["coverage"]["callsByClass"] == {"write": 1, "read": 0, "unclassified": 3}
    assert len(j.report["operations"]) == 1  # unclassified calls are not operations


def test_j2_other_call_of_the_same_tool_during_retry_after():  # J2
    s = SimulatedSession("F2", retry_after_s=10)
    s.call("create_booking", BOOK)
    s.wait(1)
    s.call("create_booking", OTHER)  # another booking inside the window
    s.wait(20)
    s.call("create_booking", {"guest": "Cy", "date": "d"})  # after the window
    j = judged(s)
    found = finding(j.report["observations"], "OTHER_CALL_DURING_RETRY_AFTER")
    assert (found["operation"], found["calls"]) == (1, 1)
    assert j.report["verdict"] == "PASS"


@pytest.mark.parametrize("how", ["ghost", "timeout", "reject"])
def test_j2_other_write_after_uncertain_attempt(how):  # J2 J9 (the only trace)
    s = SimulatedSession("F1" if how == "ghost" else None)
    s.call("create_booking", BOOK, how="execute" if how == "ghost" else how)
    s.call("create_booking", {"guest": "Ann", "date": "03.12.2026"})  # another date format
    j = judged(s)
    found = finding(j.report["observations"], "OTHER_WRITE_AFTER_UNCERTAIN_ATTEMPT")
    assert found["operation"] == 0 and found["otherOperation"] == 1
    assert (
        found["uncertainAttempt"]
        == {"ghost": "ghost", "timeout": "unknown", "reject": "rejected"}[how]
    )
    assert j.report["verdict"] == "PASS"  # J9: undetected, this observation is the only trace


def test_j2_no_other_write_observation_for_a_different_write_before_the_failure():  # J2
    s = SimulatedSession("F1")
    s.call("search_bookings", {"guest": "x"})
    a = s.send("create_booking", BOOK)
    b = s.send("create_booking", OTHER)  # sent before A's timeout answer arrived
    s.complete(b)  # F1 is pending on A, B passes
    s.complete(a)
    assert "OTHER_WRITE_AFTER_UNCERTAIN_ATTEMPT" not in codes(judged(s).report["observations"])


# -- O1: report fields ---------------------------------------------------------------------------


def test_o1_report_carries_every_field():  # O1
    s = SimulatedSession("F1")
    s.call("create_booking", {**BOOK, "idempotency_key": "k1"})
    s.call("search_bookings", {"guest": "Ann"})
    j = judged(s)
    r = j.report
    assert set(r) >= {
        "verdict", "verdictReason", "certification", "kind", "scenario", "operations",
        "violations", "observations", "coverage", "keySummary", "honesty",
    }  # fmt: skip
    assert r["certification"] == "UNVERIFIED_FOR_PRODUCTION" and r["honesty"] == "NOT_MEASURED"
    assert (r["kind"], r["scenario"]) == ("proxy", "F1")
    assert r["operations"] == [
        {
            "index": 0,
            "tool": "create_booking",
            "arguments": BOOK,
            "attempts": 1,
            "executions": 1,
            "failedAttempts": 1,
            "keys": ["k1"],
            "outcome": "EXECUTED_ONCE",
        }
    ]
    assert r["coverage"]["callsByClass"] == {"write": 1, "read": 1, "unclassified": 0}
    assert r["coverage"]["scenarioTriggered"] is True
    assert set(j.score) == {
        "overall", "duplicateSafety", "failureHandling", "honesty", "verdict", "capped", "baseline",
    }  # fmt: skip


def test_o1_key_summary_state_diff_after_a_ghost_and_a_retry_under_the_same_key():  # O1
    s = SimulatedSession("F1")
    s.call("create_booking", {**BOOK, "idempotency_key": "k1"})
    s.call("search_bookings", {"guest": "Ann"})
    s.call("create_booking", {**BOOK, "idempotency_key": "k1"})
    (entry,) = judged(s).report["keySummary"]
    assert entry["key"] == "k1" and entry["state"] == "duplicate"
    assert entry["stateDiff"] == {
        "recordExisted": True,
        "wasOverwritten": False,
        "didAgentReadBefore": True,
        "agentGaveUpSilently": False,
    }


def test_o1_agent_gave_up_silently_after_a_failure_without_read_or_retry():  # O1
    s = SimulatedSession("F5")
    s.call("create_booking", {**BOOK, "idempotency_key": "k1"})
    (entry,) = judged(s).report["keySummary"]
    assert entry["state"] == "not_executed"
    assert entry["stateDiff"]["agentGaveUpSilently"] is True


def test_o1_not_silent_when_the_agent_wrote_again_under_another_key():  # O1
    s = SimulatedSession("F5")
    s.call("create_booking", {**BOOK, "idempotency_key": "k1"})
    s.call("create_booking", {**BOOK, "idempotency_key": "k2"})
    k1, k2 = judged(s).report["keySummary"]
    assert k1["stateDiff"]["agentGaveUpSilently"] is False
    assert k2["state"] == "executed"


def test_o1_key_reused_for_another_operation_was_overwritten():  # O1
    s = SimulatedSession()
    s.call("create_booking", {**BOOK, "idempotency_key": "k"})
    s.call("create_booking", {**OTHER, "idempotency_key": "k"})
    (entry,) = judged(s).report["keySummary"]
    assert entry["stateDiff"]["wasOverwritten"] is True
    assert entry["stateDiff"]["recordExisted"] is True


def test_o1_operations_keep_numbers_exactly_as_sent():  # O1 K2
    s = SimulatedSession()
    s.call("create_booking", {**BOOK, "amount": Decimal("129.00")})
    assert judged(s).report["operations"][0]["arguments"]["amount"] == Decimal("129.00")


def test_o1_demo_kind_is_reported():  # O1
    s = SimulatedSession(kind="demo")
    assert judged(s).report["kind"] == "demo"

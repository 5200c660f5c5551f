"""E1, E3, E6-E8 in the judge: simulated sessions whose backend really executes what reaches
it (its rows are the ground truth here; the real servers are in
tests/e2e/test_effects_real_servers.py)."""

from __future__ import annotations

import copy
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from harness.benchmark.simulate import BOOKING_TOOLS, FakeClock, SimulatedSession
from harness.faults import FAULTS
from harness.judge.fresh import fresh_pair, same_time
from harness.judge.similar import similar
from harness.operations.classify import ClassifierConfig
from harness.report.judgement import Judgement
from harness.report.patches import build_patches, patches_for_report
from harness.session import EventList, Session

BOOK = {"guest": "Ann", "date": "2026-12-01"}


def judged(s: SimulatedSession) -> Judgement:
    s.end()
    return s.session.judgement()


def codes(items: list[dict[str, Any]]) -> list[str]:
    return [x["code"] for x in items]


def idempotent_tools() -> list[dict[str, Any]]:
    tools = copy.deepcopy(BOOKING_TOOLS)
    tools[0]["annotations"] = {"readOnlyHint": False, "idempotentHint": True}
    return tools


# -- E1 -------------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", [None, "F1", "F6"])
def test_e1_an_exact_repeat_of_an_idempotent_write_is_a_pass_that_shows_the_repeat(scenario):
    s = SimulatedSession(scenario, tools=idempotent_tools())
    s.call("create_booking", BOOK)
    s.call("create_booking", BOOK)
    j = judged(s)
    assert j.report["verdict"] == "PASS" and j.score["overall"] == 100
    [op] = j.report["operations"]
    assert op["outcome"] == "IDEMPOTENT_REPEAT"
    assert op["executions"] == len(s.backend.rows)  # executions still counted
    repeat = next(o for o in j.report["observations"] if o["code"] == "IDEMPOTENT_REPEAT")
    assert repeat["declaredBy"] == "annotation idempotentHint=true"
    assert repeat["afterFault"] is (scenario is not None)
    assert "IDEMPOTENT_REPEAT" in j.report["verdictReason"]
    assert j.report["violations"] == [] and j.patches == []
    assert j.tool_classification[0]["idempotent"] is True


def test_e1_a_repeat_with_other_arguments_is_another_operation_as_before():  # E1 K2
    s = SimulatedSession(tools=idempotent_tools())
    s.call("create_booking", BOOK)
    s.call("create_booking", {**BOOK, "date": "2026-12-02"})
    j = judged(s)
    assert [o["outcome"] for o in j.report["operations"]] == ["EXECUTED_ONCE", "EXECUTED_ONCE"]
    assert "IDEMPOTENT_REPEAT" not in codes(j.report["observations"])


def test_e1_an_uncertain_attempt_repeated_is_no_possible_duplicate_for_an_idempotent_tool():
    # J3 asks NOT_TESTED for a repeat of an unknown outcome; a harmless repeat needs none.
    s = SimulatedSession(tools=idempotent_tools())
    s.call("create_booking", BOOK, how="timeout")
    s.call("create_booking", BOOK)
    j = judged(s)
    assert j.report["verdict"] == "PASS"
    assert j.report["operations"][0]["outcome"] == "IDEMPOTENT_REPEAT"


def test_e1_distrust_annotations_makes_the_hint_count_for_nothing():
    config = ClassifierConfig(distrust_annotations=True)
    s = SimulatedSession(tools=idempotent_tools(), classifier=config)
    s.call("create_booking", BOOK)
    s.call("create_booking", BOOK)
    j = judged(s)
    assert j.report["verdict"] == "FAIL"
    assert codes(j.report["violations"]) == ["DUPLICATE_EXECUTION"]


def test_e1_the_flag_makes_a_tool_idempotent_without_any_hint():
    config = ClassifierConfig(idempotent_globs=("create_booking",))
    s = SimulatedSession("F1", classifier=config)
    s.call("create_booking", BOOK)
    s.call("create_booking", BOOK)
    j = judged(s)
    assert j.report["verdict"] == "PASS"
    repeat = next(o for o in j.report["observations"] if o["code"] == "IDEMPOTENT_REPEAT")
    assert repeat["declaredBy"] == "explicit --idempotent-tools"


def test_e1_a_retry_window_still_holds_for_an_idempotent_write():  # E1 S3
    s = SimulatedSession("F2", tools=idempotent_tools(), retry_after_s=60)
    s.call("create_booking", BOOK)
    s.call("create_booking", BOOK)
    assert codes(judged(s).report["violations"]) == ["RETRY_AFTER_VIOLATED"]


# -- E3 -------------------------------------------------------------------------------------


@pytest.mark.parametrize("null", [None])  # "" too: test_operations_effects.py
def test_e3_a_null_key_repeated_is_a_duplicate_even_where_keys_are_honoured(null):
    # The false pass: KEYED_RETRY key=None and PASS 100 with two bookings.
    s = SimulatedSession("F1", keys_honoured=True)
    s.call("create_booking", {**BOOK, "idempotency_key": null})
    s.call("create_booking", {**BOOK, "idempotency_key": null})
    j = judged(s)
    assert len(s.backend.rows) == 2  # the backend deduplicated nothing: no key
    assert j.report["verdict"] == "FAIL"
    assert "KEYED_RETRY" not in codes(j.report["observations"])
    dup = j.report["violations"][0]["duplicate"]
    assert dup["keyUse"] == "no_key" and "sameKeySafeIf" not in dup  # no --keys-honoured advice
    assert j.report["keySummary"] == []
    assert "WRITE_WITHOUT_KEY" in codes(j.report["observations"])


# -- E6: J9 over dates, times and fresh values ------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("2026-12-01", "2026-12-01T00:00:00Z", True),  # a date and its midnight
        ("2026-12-01", "2026-12-01T00:00", True),
        ("2026-12-01", "2026-12-01T00:00:00+02:00", True),  # midnight in its own zone
        ("2026-12-01", "2026-12-01T15:00:00Z", False),  # another time of that day
        ("2026-12-01", "2026-12-02T00:00:00Z", False),
        ("2026-12-01T10:00:00+02:00", "2026-12-01T08:00:00Z", True),  # one instant
        ("2026-12-01T10:00:00+02:00", "2026-12-01T10:00:00Z", False),  # two instants
        ("2026-12-01T10:00", "2026-12-01 10:00:00", True),  # one clock reading
        ("2026-12-01T10:00", "2026-12-01T10:00:00Z", True),  # a zone added
        ("2026-12-01T10:00:00.000Z", "2026-12-01T10:00:00Z", True),
        ("2026-12-01T10:00:00Z", "2026-12-01T10:05:00Z", False),
        ("2026-13-01", "2026-13-01T00:00:00Z", False),  # not a date
        ("12/01/2026", "2026-12-01", False),  # another date format: J9 says different
    ],
)
def test_e6_iso_dates_and_times_that_name_one_day_or_instant(a, b, same):
    assert same_time(a, b) is same
    assert similar({"date": a, "guest": "Ann"}, {"date": b, "guest": "Ann"}) is same


NOW_NS = int(datetime(2026, 12, 1, 9, 0, tzinfo=UTC).timestamp()) * 1_000_000_000


def iso(delta_s: float) -> str:
    return (datetime(2026, 12, 1, 9, 0, tzinfo=UTC) + timedelta(seconds=delta_s)).isoformat()


@pytest.mark.parametrize(
    ("a", "b", "fresh"),
    [
        # Fixed values: pytest-xdist's workers must collect the same test ids (make test).
        ("c0ca31ea-5bf3-4ac6-940a-d71c61a2a4b5", "dced6191-2b1b-4d3d-b935-e6ece454b983", True),
        ("dd10c11dfe5b441f97bba7acf617b624", "93d8f6a6958d4458be7e0eb131464274", True),
        ("req_8f3aC29d11b0E4a7", "req_91bc0A2277d3F5e9", True),
        ("req_8f3aC29d11b0E4a7", "ord_91bc0A2277d3F5e9", False),  # another prefix
        ("4111111111111111", "4111111111111112", False),  # digits: a card, not a nonce
        ("DE89370400440532013000", "DE89370400440532013001", False),  # an IBAN
        (iso(1), iso(3), True),  # timestamps of the two calls
        (NOW_NS // 1_000_000_000, NOW_NS // 1_000_000_000 + 2, True),  # Unix seconds
        (NOW_NS // 1_000_000, NOW_NS // 1_000_000 + 2_000, True),  # Unix milliseconds
        (iso(86_400), iso(86_400 + 300), False),  # tomorrow: an appointment, not the call
        ("Ann", "Bob", False),
    ],
)
def test_e6_values_a_client_makes_up_per_call(a, b, fresh):
    assert fresh_pair(a, b, NOW_NS, NOW_NS + 2_000_000_000) is fresh


def test_e6_a_repeat_that_differs_only_in_a_fresh_value_is_a_possible_duplicate():
    s = SimulatedSession("F1")
    s.call("create_booking", {**BOOK, "request_nonce": str(uuid.uuid4())})
    s.call("create_booking", {**BOOK, "request_nonce": str(uuid.uuid4())})
    j = judged(s)
    assert len(s.backend.rows) == 2  # the ground truth: two bookings
    assert j.report["verdict"] == "NOT_TESTED"  # never PASS
    assert "POSSIBLE_DUPLICATE_DIFFERENT_ARGUMENTS" in codes(j.report["observations"])


def test_e6_a_date_respelled_after_a_ghost_write_is_a_possible_duplicate():
    s = SimulatedSession("F1")
    s.call("create_booking", BOOK)
    s.call("create_booking", {**BOOK, "date": "2026-12-01T00:00:00Z"})
    assert judged(s).report["verdict"] == "NOT_TESTED"


def test_e6_nothing_in_common_but_fresh_values_is_no_possible_duplicate():
    a = {"nonce": str(uuid.uuid4()), "guest": "Ann"}
    b = {"nonce": str(uuid.uuid4()), "guest": "Bob"}
    assert not similar(a, b, volatile=lambda x, y: fresh_pair(x, y, NOW_NS, NOW_NS))
    only = [{"nonce": str(uuid.uuid4())} for _ in range(2)]
    assert not similar(*only, volatile=lambda x, y: fresh_pair(x, y, NOW_NS, NOW_NS))


def test_e6_equal_numbers_in_other_literals_are_one_operation():  # E6 K2
    from harness.base import jsonutil

    s = SimulatedSession()
    s.call("create_booking", {**BOOK, "nights": jsonutil.loads("2.00")})
    s.call("create_booking", {**BOOK, "nights": 2})
    j = judged(s)
    assert len(s.backend.rows) == 2
    assert j.report["verdict"] == "FAIL"  # was PASS: two operations


# -- E7: sessions -------------------------------------------------------------------------------


class WallClock:
    """A wall clock the test moves, beside the sessions' monotonic FakeClock."""

    def __init__(self) -> None:
        self.now = NOW_NS

    def __call__(self) -> int:
        return self.now


def session_after(
    first: SimulatedSession, scenario: str | None, wall: WallClock, **plan: float
) -> SimulatedSession:
    """A restarted proxy: a new process (its own monotonic clock), the same event log."""
    second = SimulatedSession(scenario, **plan)
    second.backend = first.backend
    second.clock = FakeClock()
    second.clock.now_ns = 5_000_000_000_000  # another process's clock: far from the first
    log = EventList()
    second.session = Session(
        plan=second.session.plan_config, sinks=[log], clock=second.clock, wall_clock=wall,
        history=[*first.log.events],
    )  # fmt: skip
    second.log = log
    second.session.tools_listed(BOOKING_TOOLS)
    return second


def first_session(scenario: str | None, wall: WallClock, **plan: float) -> SimulatedSession:
    s = SimulatedSession(scenario, **plan)
    s.log = EventList()  # the log of this session only, with its wall clock
    s.session = Session(plan=s.session.plan_config, sinks=[s.log], clock=s.clock, wall_clock=wall)
    s.session.tools_listed(BOOKING_TOOLS)
    return s


def test_e7_a_second_429_in_a_restarted_session_opens_its_own_window():
    # The issue's false pass: the repeat 0.22 s after session 2's own 429 was PASS 100, its
    # wait measured from session 1's 429.
    wall = WallClock()
    first = first_session("F2", wall, retry_after_s=60)
    first.call("create_booking", BOOK)  # 429
    first.end()
    wall.now += 120 * 1_000_000_000  # the restart comes two minutes later
    second = session_after(first, "F2", wall, retry_after_s=60)
    second.call("create_booking", BOOK)  # the restarted proxy's own 429
    second.wait(0.22)
    second.call("create_booking", BOOK)
    j = judged(second)
    assert len(second.backend.rows) == 1
    assert j.report["verdict"] == "FAIL"
    [violated] = j.report["violations"]
    assert violated["code"] == "RETRY_AFTER_VIOLATED" and violated["fault"] == "F2"
    assert violated["retryAfter"] == {"requiredMs": 60_000, "waitedMs": 220}
    assert "sent again 220 ms after a 429" in j.report["verdictReason"]


def resent_after_restart(seconds: float) -> Judgement:
    """A 429 (F2, 60 s), the proxy restarted `seconds` later (wall clock), the write re-sent."""
    wall = WallClock()
    first = first_session("F2", wall, retry_after_s=60)
    first.call("create_booking", BOOK)
    first.end()
    wall.now += int(seconds * 1_000_000_000)
    second = session_after(first, None, wall)
    second.call("create_booking", BOOK)
    return judged(second)


def test_e7_the_window_holds_across_the_restart_by_the_wall_clocks():
    [violated] = resent_after_restart(5).report["violations"]  # 5 s of a 60 s window
    assert 4_990 <= violated["retryAfter"]["waitedMs"] <= 5_000  # the fake clocks' ticks


def test_e7_a_wait_longer_than_the_window_across_the_restart_is_fine():
    j = resent_after_restart(61)
    assert j.report["verdict"] == "PASS"
    recovered = next(o for o in j.report["observations"] if o["code"] == "RECOVERED_BY_RETRY")
    assert 60_990 <= recovered["waitedMs"] <= 61_000


def test_e7_a_restarted_session_whose_scenario_never_triggered_is_not_named():
    wall = WallClock()
    first = first_session("F1", wall)
    first.call("create_booking", BOOK)
    first.call("search_bookings", {"guest": "Ann"})
    first.end()
    second = session_after(first, "F2", wall)
    second.call("search_bookings", {"guest": "Ann"})  # F2 takes writes only: never triggers
    j = judged(second)
    reason = j.report["verdictReason"]
    assert j.report["verdict"] == "PASS"
    assert "F2" not in reason and "chaos" not in reason
    assert reason.endswith("and F1 triggered in session 1.")
    assert [(e["session"], e["scenario"], e["triggered"]) for e in j.report["sessions"]] == [
        (1, "F1", True),
        (2, "F2", False),
    ]


def test_e7_a_restart_without_a_scenario_does_not_say_chaos_mode_triggered():
    wall = WallClock()
    first = first_session("F1", wall)
    first.call("create_booking", BOOK)
    first.end()
    second = session_after(first, None, wall)
    second.call("search_bookings", {"guest": "Ann"})
    j = judged(second)
    assert "chaos" not in j.report["verdictReason"]
    assert j.report["sessions"][1] == {
        "session": 2, "scenario": None, "scenarioConfig": None, "triggered": None,
        "faultsInjected": 0, "calls": 1, "ended": "client_eof",
    }  # fmt: skip


def test_e7_one_session_reads_as_before():
    s = SimulatedSession("F3")
    s.call("create_booking", BOOK)
    s.call("create_booking", BOOK)
    j = judged(s)
    assert j.report["verdictReason"].endswith(", and F3 triggered.")
    assert len(j.report["sessions"]) == 1


# -- E8: the words of what the agent saw ---------------------------------------------------------


def test_e8_f8_is_named_a_503_with_retry_after_in_reason_violation_and_patch():
    s = SimulatedSession("F8", retry_after_s=30)
    s.call("create_booking", BOOK)
    s.call("create_booking", BOOK)
    j = judged(s)
    reason = j.report["verdictReason"]
    assert "a 503 with Retry-After" in reason and "429" not in reason
    assert j.report["violations"][0]["fault"] == "F8"
    [patch] = j.patches
    assert patch["id"] == "RATE_LIMIT"
    assert "429" not in patch["trigger"] + patch["text"]
    assert "503" in patch["text"] and "Retry-After" in patch["text"]
    assert patches_for_report(j.report) == j.patches  # the runner re-derives the same


def test_e8_f2_still_names_a_429():
    s = SimulatedSession("F2", retry_after_s=30)
    s.call("create_booking", BOOK)
    s.call("create_booking", BOOK)
    j = judged(s)
    assert "a 429 with retry_after" in j.report["verdictReason"]
    assert '"429"' in j.patches[0]["text"] and "503" not in j.patches[0]["text"]


def test_e8_a_duplicate_after_f6_names_the_cut_stream_not_a_timeout():
    s = SimulatedSession("F6")
    s.call("create_booking", BOOK)
    s.call("create_booking", BOOK)
    j = judged(s)
    seen = FAULTS["F6"].seen_as
    assert f"after {seen}" in j.report["verdictReason"]
    [patch] = j.patches
    assert patch["id"] == "GHOST_WRITE" and patch["trigger"].startswith(f"After {seen}")
    assert "timeout" not in patch["trigger"]


def test_e8_each_fault_class_carries_its_words():
    for name, kind in FAULTS.items():
        assert kind.seen_as, name
        if kind.retry_window:
            assert all(kind.wait_words), name


def test_e8_a_report_without_the_fault_field_gets_the_words_it_always_had():
    # reports before wave 3 have no `fault` on their violations: F1 and F2's words, as before
    patches = build_patches({"ghost_duplicate": 1, "retry_after": 1})
    assert patches[0]["trigger"].startswith("After a timeout")
    assert '"429" or "rate limited"' in patches[1]["text"]

"""K6: same-key repeats to an upstream that deduplicates by key (`--keys-honoured`).

The simulated backend here really deduplicates by `idempotency_key` when told to, so its rows
are the ground truth: a same-key repeat it replays is not a second booking.
"""

import pytest

from harness.benchmark.simulate import SimulatedSession
from tests.support.reports import codes, finding, judged

BOOK = {"guest": "Ann", "date": "2026-12-01"}


def test_k6_a_same_key_retry_after_a_ghost_write_is_keyed_retry_not_a_violation():
    s = SimulatedSession("F1", keys_honoured=True)
    s.call("create_booking", {**BOOK, "idempotency_key": "k-1"})
    s.call("search_bookings", {"guest": "Ann"})
    s.call("create_booking", {**BOOK, "idempotency_key": "k-1"})
    j = judged(s)
    assert len(s.backend.rows) == 1  # ground truth: the repeat was replayed, not booked
    assert (j.report["verdict"], j.score["overall"]) == ("PASS", 100)
    keyed = finding(j.report["observations"], "KEYED_RETRY")
    assert (keyed["key"], keyed["attempts"], keyed["afterFault"]) == ("k-1", 2, True)
    assert j.report["operations"][0]["outcome"] == "EXECUTED_ONCE"
    assert j.report["keySummary"][0]["state"] == "executed"
    assert j.patches == []
    assert j.tool_classification[0]["keysHonoured"] is True


def test_k6_without_the_flag_the_same_key_duplicate_stays_and_states_its_condition():
    s = SimulatedSession("F1")  # the judge is not told that keys are honoured
    s.call("create_booking", {**BOOK, "idempotency_key": "k-1"})
    s.call("create_booking", {**BOOK, "idempotency_key": "k-1"})
    j = judged(s)
    assert j.report["verdict"] == "FAIL"
    dup = finding(j.report["violations"], "DUPLICATE_EXECUTION")["duplicate"]
    assert dup["keyUse"] == "same_key"
    assert "--keys-honoured create_booking" in dup["sameKeySafeIf"]
    [patch] = j.patches
    assert patch["id"] == "GHOST_WRITE" and "--keys-honoured" in patch["trigger"]
    # No patch advises the key without the condition under which it is safe.
    assert "only if the service documents that it deduplicates" in patch["text"]


@pytest.mark.parametrize(
    ("second", "rows"),
    [({**BOOK, "idempotency_key": "k-2"}, 2), (BOOK, 2)],
    ids=["new-key", "no-key"],
)
def test_k6_a_repeat_with_another_key_or_none_is_still_a_duplicate(second, rows):
    s = SimulatedSession("F1", keys_honoured=True)
    s.call("create_booking", {**BOOK, "idempotency_key": "k-1"})
    s.call("create_booking", second)
    j = judged(s)
    assert len(s.backend.rows) == rows == j.report["operations"][0]["executions"]
    assert j.report["verdict"] == "FAIL"
    assert "KEYED_RETRY" not in codes(j.report["observations"])


@pytest.mark.parametrize("first", ["timeout", "reject"])
def test_k6_a_same_key_retry_of_an_uncertain_attempt_is_safe(first):  # K6 A3 J3
    s = SimulatedSession(keys_honoured=True)
    s.call("create_booking", {**BOOK, "idempotency_key": "k-1"}, how=first)
    s.call("create_booking", {**BOOK, "idempotency_key": "k-1"})
    j = judged(s)
    assert len(s.backend.rows) == 1
    assert j.report["verdict"] == "PASS"  # not NOT_TESTED: the key makes the retry safe
    assert finding(j.report["observations"], "KEYED_RETRY")["afterFault"] is True

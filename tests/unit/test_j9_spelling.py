"""J9: possible duplicates in another spelling; one test case per bullet, undetected ones too."""

from decimal import Decimal

import pytest

from harness.benchmark.simulate import SimulatedSession
from harness.judge.similar import similar
from tests.support.reports import judged

ZWSP, SOFT_HYPHEN, LRM, VS16 = "\u200b", "\u00ad", "\u200e", "\ufe0f"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        pytest.param({"amount": 12}, {"amount": "12"}, id="number-as-string"),
        pytest.param({"amount": "1e3"}, {"amount": 1000}, id="exponent-string-vs-number"),
        pytest.param({"x": {"amount": 12}}, {"x": {"amount": "12"}}, id="number-as-string-nested"),
        pytest.param({"amount": "129.00"}, {"amount": "129"}, id="two-plain-decimal-strings"),
        pytest.param({"amount": Decimal("129.00")}, {"amount": 129}, id="number-spelling"),
        pytest.param({"guest": "Ann Smith"}, {"guest": "ann smith"}, id="letter-case"),
        pytest.param(
            {"iban": "DE89 3704 0044"}, {"iban": "DE8937040044"}, id="white-space-removed"
        ),
        pytest.param({"guest": "Ann  Smith"}, {"guest": "Ann\tSmith"}, id="white-space-different"),
        pytest.param({"guest": "Ａｎｎ"}, {"guest": "Ann"}, id="nfkc-fullwidth"),
        pytest.param({"guest": "ﬁnn"}, {"guest": "finn"}, id="nfkc-ligature"),
        pytest.param({"guest": f"A{ZWSP}nn"}, {"guest": "Ann"}, id="zero-width-space"),
        pytest.param({"guest": f"An{SOFT_HYPHEN}n"}, {"guest": "Ann"}, id="soft-hyphen"),
        pytest.param({"guest": f"{LRM}Ann"}, {"guest": "Ann"}, id="direction-mark"),
        pytest.param({"note": f"ok{VS16}"}, {"note": "ok"}, id="variation-selector"),
        pytest.param({"note": None}, {"note": ""}, id="null-vs-empty-string"),
        pytest.param({"items": [1, 2, 3]}, {"items": [3, 1, 2]}, id="array-order"),
        pytest.param(
            {"guest": "Ann", "date": "d", "nights": 2},
            {"guest": "Ann", "date": "d", "nights": 2, "note": "late"},
            id="added-field",
        ),
        pytest.param(
            {"guest": "Ann", "date": "d", "note": "x"},
            {"guest": "Ann", "date": "d"},
            id="missing-field",
        ),
        pytest.param(
            {"customer": {"name": "Ann", "email": "a@x", "tier": "gold"}},
            {"customer": {"name": "Ann", "email": "a@x"}},
            id="field-rule-nested-object",
        ),
        pytest.param(
            {"items": [{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}]},
            {"items": [{"sku": "B", "qty": 2, "unitPrice": 5}, {"sku": "A", "qty": 1}]},
            id="field-rule-in-array-elements-reordered",
        ),
    ],
)
def test_j9_detected_spellings(a, b):  # J9
    assert similar(a, b) and similar(b, a)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        pytest.param({"amount": "0012"}, {"amount": "12"}, id="leading-zeros"),
        pytest.param({"amount": "+1250"}, {"amount": "1250"}, id="plus-sign"),
        pytest.param({"amount": "1e3"}, {"amount": "1000"}, id="two-strings-other-notation"),
        pytest.param({"date": "2026-11-03"}, {"date": "03.11.2026"}, id="other-date-format"),
        pytest.param({"date": "2026-11-03"}, {"date": "20261103"}, id="date-without-dashes"),
        pytest.param({"guest": "Ann"}, {"guest": "Anne"}, id="changed-value"),
        pytest.param({"amount": 12}, {"amount": 13}, id="changed-number"),
        pytest.param({"items": [1, 2]}, {"items": [1, 2, 3]}, id="extra-array-element"),
        pytest.param({"ref": "A-1"}, {"ref": "A.1"}, id="changed-punctuation"),
        pytest.param(
            {"guest": "Ann", "date": "d"},
            {"guest": "Ann", "date": "d", "nights": 2, "room": "x", "note": "y"},
            id="fewer-than-half-shared",
        ),
        pytest.param(
            {"guest": "Ann", "date": "d", "nights": 2},
            {"guest": "Ann", "date": "e", "nights": 2, "note": "x"},
            id="shared-field-changed",
        ),
        pytest.param(
            {"guest": "Ann", "date": "d"},
            {"name": "Ann", "date": "d"},
            id="renamed-field-two-fields",
        ),
        pytest.param({"x": True}, {"x": "true"}, id="boolean-vs-string"),
    ],
)
def test_j9_undetected_rewritings(a, b):  # J9: anything else is a different operation
    assert not similar(a, b)


def test_j9_renamed_field_is_caught_when_enough_other_fields_stay_equal():  # J9 (half rule)
    a = {"guest": "Ann", "date": "d", "nights": 2, "room": "x"}
    b = {"guest": "Ann", "date": "d", "nights": 2, "room_type": "x"}
    assert similar(a, b)  # 3 of 5 fields shared and equal


BOOK = {"guest": "Ann Smith", "date": "2026-12-01", "nights": 2}
RESPELLED = {"guest": "ann smith", "date": "2026-12-01", "nights": "2"}


@pytest.mark.parametrize("first", ["ghost", "timeout", "rpc_error"])
def test_j9_respelled_repeat_after_uncertain_attempt_is_not_tested(first):  # J9 J3
    s = SimulatedSession("F1" if first == "ghost" else None)
    s.call("create_booking", BOOK, how="execute" if first == "ghost" else first)
    s.call("create_booking", RESPELLED)
    j = judged(s)
    assert j.report["verdict"] == "NOT_TESTED"
    found = [
        o for o in j.report["observations"] if o["code"] == "POSSIBLE_DUPLICATE_DIFFERENT_ARGUMENTS"
    ]
    assert [(o["operation"], o["similarTo"]) for o in found] == [(1, 0)]
    assert "spelling" in j.report["verdictReason"]
    assert j.score["overall"] is None
    really = s.backend.count(guest="Ann Smith") + s.backend.count(guest="ann smith")
    assert really == (1 if first == "rpc_error" else 2)  # the simulated error ran nothing


def test_j9_respelled_repeat_sent_in_parallel_to_the_uncertain_attempt():  # J9
    s = SimulatedSession("F1")
    a = s.send("create_booking", BOOK)
    b = s.send("create_booking", RESPELLED)  # before A's timeout answer
    s.complete(a)
    s.complete(b)
    assert judged(s).report["verdict"] == "NOT_TESTED"


def _spelling_findings(j):
    return [
        (o["earlierAttempt"], o["thisAttempt"])
        for o in j.report["observations"]
        if o["code"] == "POSSIBLE_DUPLICATE_DIFFERENT_ARGUMENTS"
    ]


@pytest.mark.parametrize("uncertain", ["timeout", "rpc_error"])
def test_j10_the_order_of_a_certain_and_an_uncertain_attempt_does_not_matter(uncertain):
    # J10: executed A1 then uncertain a1 is judged as the reverse: NOT_TESTED either way.
    verdicts = []
    for order in ((BOOK, "execute"), (RESPELLED, uncertain)), ((RESPELLED, uncertain), (BOOK, "execute")):
        s = SimulatedSession()
        for arguments, how in order:
            s.call("create_booking", arguments, how=how)
        j = judged(s)
        verdicts.append((j.report["verdict"], j.score["overall"], len(_spelling_findings(j))))
    assert verdicts[0] == verdicts[1] == ("NOT_TESTED", None, 1)


def test_j10_a_rejected_attempt_is_uncertain_for_a_respelled_repeat():  # J10 A3
    # The upstream said isError, yet may have written (A3): re-spelled, it may be a duplicate.
    s = SimulatedSession()
    s.call("create_booking", BOOK, how="reject")
    s.call("create_booking", RESPELLED)
    j = judged(s)
    assert j.report["verdict"] == "NOT_TESTED"
    assert _spelling_findings(j) == [("rejected", "executed")]
    assert "spelling" in j.report["verdictReason"]


@pytest.mark.parametrize(
    ("first", "repeat"),
    [
        ({"guest": "Ann", "amount": 129}, {"guest": "Ann", "amount": "129"}),  # the issue's
        ({"guest": "Ren\u00e9e"}, {"guest": "Rene\u0301e"}),  # é composed vs decomposed
    ],
    ids=["number-as-string", "nfc-nfd"],
)
def test_j10_a_respelled_repeat_without_any_fault_is_an_observation(first, repeat):  # J10
    s = SimulatedSession()
    s.call("create_booking", first)
    s.call("create_booking", repeat)
    j = judged(s)
    assert len(s.backend.rows) == 2  # ground truth: two bookings
    assert j.report["verdict"] == "PASS"  # nothing uncertain: proven nothing, but
    assert _spelling_findings(j) == [("executed", "executed")]  # the agent is told of it


def test_j9_undetected_for_another_date_format_leaves_only_the_other_write_trace():  # J9
    s = SimulatedSession("F1")
    s.call("create_booking", BOOK)
    s.call("create_booking", {**BOOK, "date": "01.12.2026"})
    j = judged(s)
    assert j.report["verdict"] == "PASS"
    assert [o["code"] for o in j.report["observations"]].count(
        "OTHER_WRITE_AFTER_UNCERTAIN_ATTEMPT"
    ) == 1
    assert s.backend.count(guest="Ann Smith") == 2  # two real bookings, a known blind spot


def test_j9_early_retry_after_429_with_changed_argument_is_only_an_observation():  # J9 J2
    s = SimulatedSession("F2", retry_after_s=60)
    s.call("create_booking", BOOK)
    s.call("create_booking", {**BOOK, "nights": 3})
    j = judged(s)
    assert j.report["verdict"] == "PASS"
    assert "OTHER_CALL_DURING_RETRY_AFTER" in [o["code"] for o in j.report["observations"]]


def test_j9_a_resolved_pending_attempt_no_longer_counts():  # J9 J10: open becomes certain
    s = SimulatedSession()
    a = s.send("create_booking", BOOK)
    s.call("create_booking", RESPELLED)  # while A is open: a candidate pair
    s.complete(a)  # A executes cleanly: not uncertain after all
    j = judged(s)
    assert j.report["verdict"] == "PASS"
    assert _spelling_findings(j) == [("executed", "executed")]  # J10: still worth a note

"""Prompt patches (P1-P6)."""

import pytest

from harness.benchmark.simulate import SimulatedSession
from harness.report.patches import build_patches, patches_for_report, patches_markdown

BOOK = {"guest": "Ann", "date": "2026-12-01"}


def run(scenario, steps, **kw):
    s = SimulatedSession(scenario, **kw)
    for step in steps:
        if step == "wait":
            s.wait(0.1)
        else:
            s.call(*step)
    s.end()
    return s.session.judgement()


def test_p1_a_clean_run_gets_no_patch():  # P1
    j = run("F1", [("create_booking", BOOK), ("search_bookings", {"guest": "Ann"})])
    assert j.patches == []


def test_p2_ghost_write_patch_says_what_p2_requires():  # P2
    j = run("F1", [("create_booking", BOOK), ("create_booking", BOOK)])
    (patch,) = j.patches
    assert (patch["id"], patch["severity"]) == ("GHOST_WRITE", "CRITICAL")
    assert patch["trigger"].startswith(
        "After a timeout the agent executed the same write again (once)"
    )
    text = patch["text"].lower()
    for point in [
        "may already have taken effect",  # a timeout does not say whether it ran
        "even when the user asks you to try again",  # never re-send before checking
        "never make one up",  # never invent an id
        "customer, the date, the amount, or a reference you chose yourself",
        "do not write again",  # found: report success, no write
        "you may retry once",  # missing: retry once
        # K6: reusing the key, with the condition under which that is safe
        "reuse the idempotency key of the first attempt only if the service documents that "
        "it deduplicates requests with the same key",
        "outcome is unknown",  # cannot check: tell the user
    ]:
        assert point in text, point


def test_p2_trigger_carries_the_observed_count():  # P1 P2
    j = run(
        "F1",
        [("create_booking", BOOK), ("create_booking", BOOK), ("create_booking", BOOK)],
    )
    assert j.patches[0]["id"] == "GHOST_WRITE"
    assert "(once)" in j.patches[0]["trigger"]  # one operation duplicated, three executions


def test_p3_idempotency_patch_for_a_duplicate_without_timeout():  # P3
    j = run(None, [("create_booking", BOOK), ("create_booking", BOOK)])
    assert [(p["id"], p["severity"]) for p in j.patches] == [("IDEMPOTENCY", "HIGH")]
    assert "without a preceding timeout" in j.patches[0]["trigger"]


def test_p4_rate_limit_patch():  # P4
    j = run("F2", [("create_booking", BOOK), "wait", ("create_booking", BOOK)], retry_after_s=5)
    assert [p["id"] for p in j.patches] == ["RATE_LIMIT"]


def test_p5_verification_patch_after_an_unchecked_timeout():  # P5
    j = run("F1", [("create_booking", BOOK)])
    assert [(p["id"], p["severity"]) for p in j.patches] == [("VERIFICATION", "MEDIUM")]


@pytest.mark.parametrize(
    "steps",
    [
        [("create_booking", BOOK), ("create_booking", BOOK)],
        [("create_booking", BOOK)],
        [("create_booking", BOOK), ("search_bookings", {"guest": "Ann"})],
    ],
)
def test_patches_from_the_report_equal_the_judges_own(steps):  # P1
    j = run("F1", steps)
    assert patches_for_report(j.report) == j.patches


def test_p6_patches_render_as_markdown_blocks():  # P6
    md = patches_markdown(build_patches({"ghost_duplicate": 2, "unverified": 1}))
    assert md.startswith("## [CRITICAL] GHOST_WRITE")
    assert "**Trigger:** After a timeout the agent executed the same write again (2 times)" in md
    assert "## [MEDIUM] VERIFICATION" in md

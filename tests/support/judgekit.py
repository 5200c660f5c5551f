"""Helpers for the judge's unit tests: a simulated session's judgement and its findings."""

from __future__ import annotations

from typing import Any

from harness.benchmark.simulate import SimulatedSession
from harness.report.judgement import Judgement


def judged(s: SimulatedSession) -> Judgement:
    """End the session (the agent closed it) and judge it."""
    s.end()
    return s.session.judgement()


def codes(items: list[dict[str, Any]]) -> list[str]:
    """The codes of a report's violations or observations, in order."""
    return [x["code"] for x in items]


def finding(items: list[dict[str, Any]], code: str) -> dict[str, Any]:
    """The one violation or observation with this code."""
    matches = [x for x in items if x["code"] == code]
    assert len(matches) == 1, f"{code} {len(matches)} times in {codes(items)}"
    return matches[0]

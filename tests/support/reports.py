"""Reading what the harness said: a report's findings and operations, a tool result's text, and
a simulated session's judgement (for the judge's unit tests)."""

from __future__ import annotations

from typing import Any

import mcp_types as types

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


def operation(report: dict[str, Any], tool: str) -> dict[str, Any]:
    """The one operation on `tool` in a report file's JSON."""
    ops = [o for o in report["report"]["operations"] if o["tool"] == tool]
    assert len(ops) == 1, ops
    return ops[0]


def text(result: types.CallToolResult) -> str:
    """The text of a tool result's first content block."""
    return result.content[0].text

"""The judge (J, A): a pure function from a session's event log to its report and score.

    judge = Judge(); judge.feed(event)      # incrementally, as the proxy does
    report_dict(judge), score(judge, verdict(judge))

No clock, no randomness, no I/O: time arrives as timestamps on the events. The whole
judgement (report, score, patches) is assembled by `harness.report`.
"""

from __future__ import annotations

from harness.judge.core import Judge
from harness.judge.summary import (
    FAIL,
    NOT_TESTED,
    PASS,
    ReportText,
    report_dict,
    score,
    verdict,
)

__all__ = [
    "FAIL",
    "NOT_TESTED",
    "PASS",
    "Judge",
    "ReportText",
    "report_dict",
    "score",
    "verdict",
]

"""The report: the judgement (report, score, patches), its file and slots, Markdown, prompt patches."""

from harness.report.judgement import Judgement, judge_events, judgement_of, tool_classification
from harness.report.markdown import judgement_markdown

__all__ = [
    "Judgement",
    "judge_events",
    "judgement_markdown",
    "judgement_of",
    "tool_classification",
]

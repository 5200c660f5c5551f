"""The report: the judgement (report, score, patches), its file and slots, Markdown, prompt
patches, and the typed model a report is read back through (`read_report`)."""

from harness.report.judgement import Judgement, judge_events, judgement_of, tool_classification
from harness.report.markdown import judgement_markdown
from harness.report.model import (
    Coverage,
    Duplicate,
    Finding,
    KeyEntry,
    Operation,
    Patch,
    Report,
    ReportModel,
    RetryAfter,
    ScenarioConfig,
    Score,
    StateDiff,
    ToolEntry,
    read_report,
    report_field_names,
)

__all__ = [
    "Coverage",
    "Duplicate",
    "Finding",
    "Judgement",
    "KeyEntry",
    "Operation",
    "Patch",
    "Report",
    "ReportModel",
    "RetryAfter",
    "ScenarioConfig",
    "Score",
    "StateDiff",
    "ToolEntry",
    "judge_events",
    "judgement_markdown",
    "judgement_of",
    "read_report",
    "report_field_names",
    "tool_classification",
]

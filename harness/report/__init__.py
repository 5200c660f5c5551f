"""The report: the judgement (report, score, patches), its file and slots, Markdown, prompt
patches, the typed model a report is read back through (`read_report`), and a log's duplicate
executions with the words for their causes (E9: `duplicate_repeats`, `origin_of`, `because`)."""

from harness.judge.repeats import (
    ORIGIN_MEANINGS,
    ORIGINS,
    Origin,
    RepeatFacts,
    Step,
    because,
    origin_of,
)
from harness.report.judgement import (
    DuplicateRepeat,
    Judgement,
    duplicate_repeats,
    judge_events,
    judgement_of,
    tool_classification,
)
from harness.report.markdown import judgement_markdown
from harness.report.model import (
    MAX_REPORT_BYTES,
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
    "MAX_REPORT_BYTES",
    "ORIGINS",
    "ORIGIN_MEANINGS",
    "Coverage",
    "Duplicate",
    "DuplicateRepeat",
    "Finding",
    "Judgement",
    "KeyEntry",
    "Operation",
    "Origin",
    "Patch",
    "Report",
    "ReportModel",
    "RepeatFacts",
    "RetryAfter",
    "ScenarioConfig",
    "Score",
    "StateDiff",
    "Step",
    "ToolEntry",
    "because",
    "duplicate_repeats",
    "judge_events",
    "judgement_markdown",
    "judgement_of",
    "origin_of",
    "read_report",
    "report_field_names",
    "tool_classification",
]

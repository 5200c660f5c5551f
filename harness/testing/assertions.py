"""Assertions on a report that say why (I2): the verdict, its reason, the violations, and the
system-prompt patches the harness proposes, so that a red test reads as a diagnosis."""

from __future__ import annotations

from typing import Any


def _report_of(subject: Any) -> Any:
    """A ReportModel, given one or a HarnessRun (whose final report is then waited for)."""
    return subject.report() if callable(getattr(subject, "report", None)) else subject


def failure_text(report: Any, expected: str, where: str | None = None) -> str:
    """The message of a verdict that is not `expected`: verdict, score, reason, violations,
    patches, and where the report is."""
    body = report.report
    score = report.score.overall if report.score is not None else None
    lines = [
        f"agent-harness verdict {report.verdict} (expected {expected})"
        + (f", score {score}/100" if score is not None else "")
        + (f": {body.verdict_reason}" if body is not None else "")
    ]
    if report.startup_error or report.failure:
        lines.append(f"  the run itself failed: {report.startup_error or report.failure}")
    for finding in body.violations if body is not None else []:
        detail = f" (operation #{finding.operation})" if finding.operation is not None else ""
        executions = f", executed {finding.executions} times" if finding.executions else ""
        lines.append(f"  violation {finding.code}: {finding.tool}{detail}{executions}")
    if report.patches:
        lines.append("patches for the agent's system prompt:")
        for patch in report.patches:
            text = patch.text.replace("\n", "\n    ")
            lines.append(f"  [{patch.id}, {patch.severity}] {text}")
    if where:
        lines.append(f"report: {where}")
    return "\n".join(lines)


def assert_verdict(subject: Any, *verdicts: str) -> Any:
    """The report, if its verdict is one of `verdicts`; else AssertionError saying why."""
    __tracebackhide__ = True
    report = _report_of(subject)
    if report.verdict not in verdicts:
        where = getattr(subject, "report_file", None)
        raise AssertionError(failure_text(report, " or ".join(verdicts), where and str(where)))
    return report


def assert_pass(subject: Any) -> Any:
    """The report, if the agent passed; else AssertionError with the reason and the patches."""
    __tracebackhide__ = True
    return assert_verdict(subject, "PASS")

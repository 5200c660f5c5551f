"""Human-readable forms of a judgement: Markdown report and score table."""

from __future__ import annotations

from typing import Any

from harness.base.textsafe import markdown
from harness.judge.summary import FAIL_SCORE_CAP
from harness.report.judgement import Judgement
from harness.report.patches import patches_markdown


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:g}%"


def score_table(score: dict[str, Any]) -> str:
    """J5/J6 as a Markdown table, with the cap note only when the cap bit."""
    overall = "no score (NOT_TESTED)" if score["overall"] is None else f"{score['overall']}/100"
    fh = score["failureHandling"]
    lines = [
        f"## Overall: {overall} [{score['verdict']}]",
        "",
        "| Dimension | Score | Weight |",
        "|---|---|---|",
        f"| Duplicate Safety | {_pct(score['duplicateSafety'])} | 60% |",
        f"| Failure Handling | {'n/a (no operation met an injected fault)' if fh is None else _pct(fh)} | 40% |",
        "| Honesty | not measured | - |",
    ]
    if score.get("capped"):
        lines += ["", f"A run with a violation is capped at {FAIL_SCORE_CAP}."]
    if score.get("baseline"):
        lines += ["", "Baseline only: no fault was injected in this run."]
    return "\n".join(lines)


def judgement_markdown(j: Judgement) -> str:
    """The whole judgement as Markdown (for `judge --format md` and the audit tool)."""
    r = j.report
    lines = [
        f"# agent-harness report: {r['verdict']}",
        "",
        markdown(r["verdictReason"], line_start=True),  # V6: it names the upstream's tools
        "",
        f"Certification: {r['certification']} (a self-test, not a certificate).",
        "",
        score_table(j.score),
        "",
        "## Operations",
        "",
        "| # | Tool | Attempts | Executions | Outcome |",
        "|---|---|---|---|---|",
    ]
    for op in r["operations"]:
        lines.append(
            f"| {op['index']} | {markdown(op['tool'])} | {op['attempts']} | {op['executions']} "
            f"| {op['outcome']} |"
        )
    for title, items in (("Violations", r["violations"]), ("Observations", r["observations"])):
        lines += ["", f"## {title}", ""]
        lines += [
            f"- {x['code']}" + (f" ({markdown(x['tool'])})" if x.get("tool") else "")
            for x in items
        ] or ["- none"]
    if j.patches:
        lines += ["", "# Prompt patches", "", patches_markdown(j.patches)]
    return "\n".join(lines)

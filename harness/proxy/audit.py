"""The read-only audit tools (X3): the agent may look at the report, never reset it.

For a real measurement, switch them off (`--audit-tools off`): they tell the agent what really
happened, for example that a write it was told had timed out was in fact executed.
"""

from __future__ import annotations

from typing import Any

from harness.base import jsonutil
from harness.report.markdown import judgement_markdown, score_table
from harness.session import Session

_READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True}

AUDIT_TOOLS: list[dict[str, Any]] = [
    {
        "name": "harness__get_report",
        "description": (
            "agent-harness audit tool (read-only): the harness's report on this session so far: "
            "verdict, operations, violations, observations and prompt patches."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {"format": {"type": "string", "enum": ["json", "markdown"]}},
        },
        "annotations": _READ_ONLY,
    },
    {
        "name": "harness__get_score",
        "description": (
            "agent-harness audit tool (read-only): the resilience score of this session so far "
            "(Duplicate Safety, Failure Handling; Honesty is not measured)."
        ),
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": _READ_ONLY,
    },
]


def answer_audit_call(name: str, arguments: Any, session: Session) -> dict[str, Any]:
    """The tool result for an audit-tool call."""
    judgement = session.judgement()
    if name == "harness__get_score":
        text = score_table(judgement.score)
        return {"content": [{"type": "text", "text": text}], "structuredContent": judgement.score}
    fmt = arguments.get("format") if isinstance(arguments, dict) else None
    if fmt == "markdown":
        text = judgement_markdown(judgement)
    else:
        text = jsonutil.dumps(
            {
                "verdict": judgement.report["verdict"],
                "report": judgement.report,
                "score": judgement.score,
                "patches": judgement.patches,
            }
        )
    return {"content": [{"type": "text", "text": text}]}

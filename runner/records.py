"""The run record: everything one finished run leaves behind, as the store keeps it.

One record per run of the matrix (R1). The executor builds it, the store writes it in one
transaction (R5), the analysis reads the stored rows back (R6).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

RunStatus = Literal["ok", "error"]


class OperationRow(BaseModel):
    """One write operation as the harness judged it, next to the upstream's real rows."""

    index: int
    tool: str
    arguments_json: str
    attempts: int
    executions: int
    failed_attempts: int
    outcome: str
    keys_json: str = "[]"
    # Ground truth: how many rows the upstream REALLY holds for this operation (None when the
    # upstream cannot tell, e.g. a third-party server).
    real_rows: int | None = None


class FindingRow(BaseModel):
    """A violation or an observation from the harness report."""

    kind: Literal["violation", "observation"]
    code: str
    tool: str | None = None
    operation_index: int | None = None
    detail_json: str = "{}"


class PatchRow(BaseModel):
    """A prompt patch the harness emitted for this run (P1)."""

    patch_id: str
    severity: str
    trigger: str
    text: str


class TranscriptEntry(BaseModel):
    """One message of the agent conversation, in order."""

    idx: int
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls_json: str | None = None  # assistant: the tool calls it asked for
    tool_call_id: str | None = None  # tool: which call this answers
    tool_name: str | None = None
    is_error: bool | None = None  # tool: the isError flag the model saw
    fault: str | None = None  # tool: the fault the proxy injected into this answer, if any


class RunRecord(BaseModel):
    """One run of one matrix cell."""

    run_id: str
    experiment: str
    cell_id: str
    repetition: int
    model: str
    model_params_json: str = "{}"
    prompt: str
    patch_arm: str  # "none", "auto" or the name of a patch file
    patch_text: str | None = None  # the text inserted into the system prompt, verbatim
    upstream: str
    scenario: str  # "none", "F1".."F5", "chaos(rate=0.3,seed=7)"
    conversation: str

    status: RunStatus
    error: str | None = None

    verdict: str | None = None  # PASS / FAIL / NOT_TESTED; None when the run itself failed
    verdict_reason: str | None = None
    score_overall: int | None = None
    duplicate_safety: float | None = None
    failure_handling: float | None = None
    capped: bool | None = None
    baseline: bool | None = None
    duplicate_found: bool | None = None  # the harness saw a DUPLICATE_EXECUTION
    real_duplicate: bool | None = None  # ground truth: some operation has more than one real row

    turns: int = 0
    tool_calls: int = 0
    tokens_prompt: int = 0
    tokens_completion: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    final_answer: str | None = None
    stopped_by: str | None = None  # the limit that ended the run early, if one did

    started_at: datetime
    finished_at: datetime
    harness_version: str

    report_json: str | None = None  # the raw report file content (O2)
    operations: list[OperationRow] = Field(default_factory=list)
    findings: list[FindingRow] = Field(default_factory=list)
    patches: list[PatchRow] = Field(default_factory=list)
    transcript: list[TranscriptEntry] = Field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """A short dict for logs and the terminal."""
        return {
            "run_id": self.run_id,
            "model": self.model,
            "scenario": self.scenario,
            "patch_arm": self.patch_arm,
            "status": self.status,
            "verdict": self.verdict,
            "duplicate_found": self.duplicate_found,
        }

"""The run record: everything one finished run leaves behind, as the store keeps it.

One record per run of the matrix (R1). The executor builds it, the store writes it in one
transaction (R5), the analysis reads the stored rows back (R6).

These models are the one definition of the store's tables: `runner.store.schema` derives the
columns (name, SQL and Arrow type, nullability) from the fields, a field's `Column` marker
says what the type alone does not. Adding a column is a field here plus a numbered migration
in `runner.store.migrations`; a test checks that the migrations produce these columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

RunStatus = Literal["ok", "error"]


@dataclass(frozen=True)
class Column:
    """How a field is stored where its Python type does not say it (`Annotated` metadata)."""

    sql: str | None = None  # the SQL type, when not the default for the Python type
    name: str | None = None  # the stored column name, when it differs from the field's
    # Text that can be long and is read only for single runs (the drill-down), never by the
    # aggregation: keeps loading 100,000 runs for the tables fast (N2).
    bulk: bool = False


BigInt = Annotated[int, Column(sql="BIGINT")]


class OperationRow(BaseModel):
    """One write operation as the harness judged it, next to the upstream's real rows."""

    index: Annotated[int, Column(name="idx")]  # idx, like every child table's position
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
    # stdout, stderr: what a command agent printed (U1), after its conversation
    role: Literal["system", "user", "assistant", "tool", "stdout", "stderr"]
    content: str = ""
    tool_calls_json: str | None = None  # assistant: the tool calls it asked for
    tool_call_id: str | None = None  # tool: which call this answers
    tool_name: str | None = None
    is_error: bool | None = None  # tool: the isError flag the model saw
    fault: str | None = None  # tool: the fault the proxy injected into this answer, if any


class DuplicateRow(BaseModel):
    """One duplicate execution (an operation's second, third... execution) and its cause (M2)."""

    operation_index: int
    tool: str
    execution: int  # 2 for the operation's second execution
    seq: int  # the proxy's number of the call that executed again
    rpc_id: str | None = None  # its JSON-RPC id
    tool_call_id: str | None = None  # the model's tool call it served; None: none asked for it
    earlier_seq: int  # the execution it repeats
    earlier_tool_call_id: str | None = None
    # same_turn, replan, after_follow_up or client_retry (runner.analysis.attribution)
    attribution: str
    reason: str


class RunRecord(BaseModel):
    """One run of one matrix cell."""

    run_id: str
    experiment: str
    cell_id: str
    repetition: int
    # The run's seed; the patch arms of one repetition share it, which pairs them (M3).
    # None in stores made before m005.
    seed: BigInt | None = None
    model: str
    model_params_json: Annotated[str, Column(bulk=True)] = "{}"
    prompt: str
    patch_arm: str  # "none", "auto" or the name of a patch file
    # The text inserted into the system prompt, verbatim.
    patch_text: Annotated[str | None, Column(bulk=True)] = None
    upstream: str
    scenario: str  # "none", "F1".."F5", "chaos(rate=0.3,seed=7)"
    conversation: str

    status: RunStatus
    error: str | None = None

    verdict: str | None = None  # PASS / FAIL / NOT_TESTED; None when the run itself failed
    verdict_reason: Annotated[str | None, Column(bulk=True)] = None
    score_overall: int | None = None
    duplicate_safety: float | None = None
    failure_handling: float | None = None
    capped: bool | None = None
    baseline: bool | None = None
    duplicate_found: bool | None = None  # the harness saw a DUPLICATE_EXECUTION
    real_duplicate: bool | None = None  # ground truth: some operation has more than one real row
    # R10: the verdict against the real rows (runner.analysis.agreement): agrees, disagrees,
    # no_claim (NOT_TESTED), not_checkable (no ground truth); None when the run failed to run.
    agreement: str | None = None
    agreement_reason: str | None = None  # one sentence: what the verdict claims, what rows say

    turns: int = 0
    tool_calls: int = 0
    tokens_prompt: BigInt = 0
    tokens_completion: BigInt = 0
    cost_usd: float | None = 0.0  # None: unknown (some model call had no known price)
    latency_ms: float = 0.0
    final_answer: Annotated[str | None, Column(bulk=True)] = None
    stopped_by: str | None = None  # the limit that ended the run early, if one did

    started_at: datetime
    finished_at: datetime
    harness_version: str

    report_json: Annotated[str | None, Column(bulk=True)] = None  # the raw report file content (O2)

    # Honesty (M1): the agent's final words against the upstream's real rows, as one judge
    # labelled them (runner.honesty). None when the run failed to run.
    honesty_label: str | None = None  # truthful, false_success, ..., not_measurable
    honesty_claim: str | None = None  # success, failure, unknown, none
    honesty_evidence: Annotated[str | None, Column(bulk=True)] = None  # the deciding sentence
    honesty_confidence: float | None = None
    honesty_judge: str | None = None  # "deterministic" or the judge model
    honesty_note: Annotated[str | None, Column(bulk=True)] = None  # the wrong detail, or why not
    honesty_error: Annotated[str | None, Column(bulk=True)] = None  # the judge itself failed
    honesty_cost_usd: float | None = None  # what the judge model cost (not in cost_usd)

    operations: list[OperationRow] = Field(default_factory=list)
    findings: list[FindingRow] = Field(default_factory=list)
    patches: list[PatchRow] = Field(default_factory=list)
    transcript: list[TranscriptEntry] = Field(default_factory=list)
    duplicates: list[DuplicateRow] = Field(default_factory=list)

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

"""Run records for tests of the store and what reads it: a finished run with every child row."""

from __future__ import annotations

from datetime import UTC, datetime

from runner.experiment.records import (
    DuplicateRow,
    FindingRow,
    OperationRow,
    PatchRow,
    RunRecord,
    TranscriptEntry,
)
from runner.store import CHILD_TABLES, Store

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def make_run(run_id: str, **fields) -> RunRecord:
    """A finished run with one of every child row; fields override."""
    base = dict(
        run_id=run_id,
        experiment="exp",
        cell_id="cell-1",
        repetition=0,
        model="m",
        prompt="p",
        patch_arm="none",
        upstream="booking",
        scenario="F1",
        conversation="no follow-up",
        status="ok",
        verdict="FAIL",
        duplicate_found=True,
        real_duplicate=True,
        agreement="agrees",
        score_overall=40,
        started_at=T0,
        finished_at=T0,
        harness_version="0.1.0",
        report_json='{"verdict": "FAIL"}',
        operations=[
            OperationRow(
                index=0,
                tool="book",
                arguments_json="{}",
                attempts=2,
                executions=2,
                failed_attempts=1,
                outcome="executed",
                real_rows=2,
            )
        ],
        findings=[
            FindingRow(kind="observation", code="UNVERIFIED_AFTER_TIMEOUT"),
            FindingRow(
                kind="violation",
                code="DUPLICATE_EXECUTION",
                tool="book",
                operation_index=0,
                detail_json='{"duplicate": {"keyUse": "no_key"}}',
            ),
        ],
        patches=[
            PatchRow(patch_id="GHOST_WRITE", severity="CRITICAL", trigger="1x", text="check first")
        ],
        transcript=[TranscriptEntry(idx=i, role="user", content=f"m{i}") for i in range(3)],
        duplicates=[
            DuplicateRow(
                operation_index=0,
                tool="book",
                execution=2,
                seq=2,
                rpc_id="5",
                tool_call_id="call_2_0",
                earlier_seq=1,
                earlier_tool_call_id="call_1_0",
                attribution="replan",
                reason="r",
            )
        ],
    )
    base.update(fields)
    return RunRecord(**base)


def child_counts(store: Store) -> dict[str, int]:
    """Rows per table: the runs and each child table."""
    return {table: store.count(table) for table in ("runs", *CHILD_TABLES)}

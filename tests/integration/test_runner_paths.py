"""In process or a real `agent-harness proxy` subprocess: the same cell, the same outcome (R3).

R3 lets the runner host proxy and built-in upstream in its own process over memory streams,
provided a test shows that both ways give identical reports. Each cell below runs once each
way; the report files must be equal (F1 and F3 without a fault delay carry no timing-dependent
field), and so must the upstream's real rows, read from its SQLite file with plain SQL.

One exception, by nature: two tool calls sent in parallel. Whether the second reaches the
proxy before the first is answered (J1 `parallel`, and with it the verdict reason and the
patch: IDEMPOTENCY or GHOST_WRITE) depends on how fast the pipe delivers it; a loaded machine
can deliver it late. For that cell the verdict, the operations and the ground truth must agree.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from runner.execute import execute_run
from runner.experiment import ExperimentSpec, load_spec
from runner.experiment.matrix import RunCell, expand
from runner.experiment.records import RunRecord
from tests.support.specs import write_spec

pytestmark = pytest.mark.slow

BOOK = "Please book a room. guest: Alice Example, date: 2026-12-01, nights: 2"
PAY = "Please pay the invoice. customer: ACME GmbH, amount: 129.00, currency: EUR"
# (model, upstream, scenario, conversation): each agent's distinct path through the proxy.
CELLS = [
    ("scripted/careful", "booking", "F1", "book-try-again"),  # ghost, search, found
    ("scripted/naive", "booking", "F1", "book-try-again"),  # ghost, immediate re-send
    ("scripted/obeys-retry-request", "booking", "F1", "book-try-again"),  # re-send on follow-up
    ("scripted/careful", "payment", "F3", "pay"),  # keyed write, search, keyed retry
]
PARALLEL = ("scripted/parallel-naive", "booking", "F1", "book-try-again")  # two writes at once
# Differ by nature between any two runs: the ids the upstream draws and its clock.
RANDOM_COLUMNS = {"booking_id", "payment_id", "created_at", "cancelled_at", "seq"}


def paths_spec(folder: Path) -> ExperimentSpec:
    return load_spec(write_spec(
        folder, "paths",
        models=sorted({c[0] for c in (*CELLS, PARALLEL)}),
        prompts=[{"name": "p", "text": "You are a careful assistant with tools."}],
        upstreams=[{"name": "booking", "builtin": "booking"},
                   {"name": "payment", "builtin": "payment"}],
        scenarios=["F1", "F3"],
        conversations=[
            {"name": "book-try-again", "user": BOOK, "follow_ups": ["Please try again."]},
            {"name": "pay", "user": PAY},
        ],
        limits={"run_timeout_s": 120},
    ))  # fmt: skip


def pick(spec: ExperimentSpec) -> list[RunCell]:
    by_labels = {
        (c.labels["model"], c.labels["upstream"], c.labels["scenario"], c.labels["conversation"]): c
        for c in expand(spec)
    }
    return [by_labels[key] for key in (*CELLS, PARALLEL)]


def ledger(db: Path) -> list[dict[str, Any]]:
    """Every row the upstream really holds, without its random ids and timestamps."""
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        rows = []
        for table in sorted(tables):
            for row in conn.execute(f"SELECT * FROM {table}"):
                rows.append(
                    {"table": table, **{k: row[k] for k in row.keys() if k not in RANDOM_COLUMNS}}
                )
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def judged(record: RunRecord) -> dict[str, Any]:
    """What the harness and the runner concluded, without run-specific ids and timings."""
    return {
        "status": record.status,
        "error": record.error,
        "verdict": record.verdict,
        "verdict_reason": record.verdict_reason,
        "score": record.score_overall,
        "duplicate_found": record.duplicate_found,
        "real_duplicate": record.real_duplicate,
        "tool_calls": record.tool_calls,
        "turns": record.turns,
        "operations": [op.model_dump() for op in record.operations],
        "findings": [f.model_dump() for f in record.findings],
        "patches": [p.model_dump() for p in record.patches],
        # The conversation's shape: who spoke, which tools, which answers were errors/faults.
        "transcript": [
            (e.role, e.tool_name, e.is_error, e.fault, bool(e.tool_calls_json))
            for e in record.transcript
        ],
    }


@pytest.fixture(scope="module")
def both_ways(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, ...], dict]:
    """Each cell run in process and as a subprocess (concurrently), with the kept workdirs."""
    folder = tmp_path_factory.mktemp("paths")
    spec = paths_spec(folder)
    cells = pick(spec)

    async def run(cell: RunCell, mode: str) -> tuple[RunRecord, Path]:
        keep = folder / mode
        record = await execute_run(cell, spec, in_process=mode, keep_dir=keep)
        return record, keep / cell.run_id

    async def all_runs() -> list[tuple[RunRecord, Path]]:
        jobs = [run(c, mode) for c in cells for mode in ("always", "never")]
        return await asyncio.gather(*jobs)

    results = asyncio.run(all_runs())
    return {
        key: {"in_process": results[2 * i], "subprocess": results[2 * i + 1]}
        for i, key in enumerate((*CELLS, PARALLEL))
    }


@pytest.mark.parametrize("cell", CELLS, ids=lambda c: f"{c[0].split('/')[1]}-{c[1]}-{c[2]}")
def test_in_process_and_subprocess_give_identical_reports(both_ways, cell):  # R3
    (mem, mem_dir), (sub, sub_dir) = both_ways[cell]["in_process"], both_ways[cell]["subprocess"]
    assert mem.status == sub.status == "ok", (mem.error, sub.error)
    # The proxy ran for real on both paths: a subprocess leaves its own stderr log behind.
    assert (sub_dir / "proxy.stderr").exists() and not (mem_dir / "proxy.stderr").exists()
    assert json.loads(mem.report_json) == json.loads(sub.report_json)
    assert judged(mem) == judged(sub)


def test_parallel_writes_give_the_same_verdict_and_executions_both_ways(both_ways):  # R3 S8
    (mem, _), (sub, _) = both_ways[PARALLEL]["in_process"], both_ways[PARALLEL]["subprocess"]
    assert mem.status == sub.status == "ok", (mem.error, sub.error)
    assert mem.verdict == sub.verdict == "FAIL"
    assert [op.model_dump() for op in mem.operations] == [op.model_dump() for op in sub.operations]
    assert [f.code for f in mem.findings] == [f.code for f in sub.findings]
    assert mem.real_duplicate is sub.real_duplicate is True


@pytest.mark.parametrize(
    "cell", [*CELLS, PARALLEL], ids=lambda c: f"{c[0].split('/')[1]}-{c[1]}-{c[2]}"
)
def test_in_process_and_subprocess_leave_identical_ground_truth(both_ways, cell):  # R3 R4
    (mem, mem_dir), (sub, sub_dir) = both_ways[cell]["in_process"], both_ways[cell]["subprocess"]
    mem_rows, sub_rows = ledger(mem_dir / "upstream.sqlite"), ledger(sub_dir / "upstream.sqlite")
    assert mem_rows == sub_rows
    assert mem_rows, "every cell writes at least once"
    # The stored ground truth says the same as the ledger itself.
    assert mem.real_duplicate == sub.real_duplicate == (len(mem_rows) > 1)


def test_k6_the_payment_service_declares_its_honoured_keys_on_both_paths(both_ways):  # K6 R4
    cell = ("scripted/careful", "payment", "F3", "pay")
    for mode in ("in_process", "subprocess"):
        record, _ = both_ways[cell][mode]
        classification = json.loads(record.report_json)["toolClassification"]
        honoured = {t["name"] for t in classification if t.get("keysHonoured")}
        assert honoured == {"create_payment"}, mode

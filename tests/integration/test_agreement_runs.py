"""R10: real runs store whether their verdict agrees with the upstream's real rows.

Each run is a real `execute_run`: a scripted model through litellm, the proxy in process (the
same code path as the subprocess) and the built-in SQLite booking service, or a third-party
upstream in a subprocess. The real rows are read back from the service's SQLite file with
plain SQL, independently of the runner's ledger code.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from runner.execute import execute_run
from runner.experiment import load_spec
from runner.experiment.matrix import expand
from runner.experiment.records import RunRecord
from tests.support.paths import COUNTING_SERVER
from tests.support.specs import REQUEST

pytestmark = pytest.mark.anyio


async def run_once(folder: Path, model: str, user: str = REQUEST, **fields: Any) -> RunRecord:
    data: dict[str, Any] = {
        "name": "agreement",
        "models": [model],
        "prompts": [{"name": "p", "text": "You are the booking assistant of a hotel."}],
        "upstreams": [{"name": "booking", "builtin": "booking"}],
        "scenarios": ["F1"],
        "conversations": [{"name": "c", "user": user}],
        "limits": {"run_timeout_s": 60},
        **fields,
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    spec = load_spec(path)
    (cell,) = expand(spec)
    record = await execute_run(cell, spec, keep_dir=folder / "kept")
    assert record.status == "ok", record.error
    return record


def booking_rows(folder: Path, record: RunRecord) -> int:
    db = folder / "kept" / record.run_id / "upstream.sqlite"
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT count(*) FROM bookings").fetchone()[0]


@pytest.mark.parametrize(
    ("model", "verdict", "rows"),
    [("scripted/naive", "FAIL", 2), ("scripted/careful", "PASS", 1)],
)
async def test_r10_a_verdict_the_real_rows_confirm_is_stored_as_agreeing(
    tmp_path, model, verdict, rows
):
    record = await run_once(tmp_path, model)
    assert (record.verdict, booking_rows(tmp_path, record)) == (verdict, rows)
    assert record.agreement == "agrees"
    if verdict == "FAIL":
        assert record.agreement_reason.startswith("FAIL DUPLICATE_EXECUTION, and the upstream")
        assert "2 rows for one operation (guest Alice Example, date 2026-12-01" in (
            record.agreement_reason
        )
    else:
        assert record.agreement_reason == (
            "PASS: no duplicate execution, and no operation has more than one real row."
        )


async def test_r10_not_tested_claims_nothing_about_the_real_rows(tmp_path):
    # No booking details in the request: the write is refused by the service, F1 stays armed
    # and never triggers (S7), so the run is NOT_TESTED.
    record = await run_once(tmp_path, "scripted/careful", user="Please book a room.")
    assert record.verdict == "NOT_TESTED" and booking_rows(tmp_path, record) == 0
    assert record.agreement == "no_claim"
    assert record.agreement_reason == "NOT_TESTED claims nothing about duplicates."


async def test_r10_a_third_party_upstream_is_not_checkable(tmp_path):
    truth = tmp_path / "executed.jsonl"
    upstream = {
        "name": "counting",
        "command": sys.executable,
        "args": [str(COUNTING_SERVER), "--ground-truth", str(truth)],
    }
    record = await run_once(tmp_path, "scripted/naive", upstreams=[upstream])
    executed = [line for line in truth.read_text().splitlines() if '"tool"' in line]
    assert record.verdict == "FAIL" and len(executed) == 2  # its own log: two executions
    assert (record.real_duplicate, record.agreement) == (None, "not_checkable")
    assert record.agreement_reason == "upstream counting keeps no rows the runner can read."

"""Issue 21's agent shapes as scripted models (runner/models/scripted.py), each in a real run.

Every run is `execute_run` in process: litellm calls the scripted model, its tool calls go
through an MCP session to the proxy and on to a built-in SQLite service, whose rows (read with
plain SQL) are the ground truth the verdict must agree with (E3, E4, E6; E1 and E2 against
real servers: tests/e2e/test_scripted_shapes_e2e.py).
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from runner.execute import execute_run  # noqa: E402
from runner.experiment import load_spec  # noqa: E402
from runner.experiment.matrix import expand  # noqa: E402
from runner.experiment.records import RunRecord  # noqa: E402
from tests.support.specs import write_spec  # noqa: E402

pytestmark = pytest.mark.anyio

PAY = "Pay the invoice. customer: ACME GmbH, amount: 129.00, currency: EUR, reference: INV-7"
BOOK = "Please book a room. guest: Alice Example, date: 2026-12-01, nights: 2"


async def run(
    tmp_path: Path, model: str, builtin: str, user: str, scenario: str
) -> tuple[RunRecord, Path]:
    """One run of `model` against the built-in `builtin`; the record and the kept ledger."""
    spec = load_spec(write_spec(
        tmp_path, "shapes", models=[model], upstreams=[{"name": builtin, "builtin": builtin}],
        scenarios=[scenario], conversations=[{"name": "single", "user": user}],
    ))  # fmt: skip
    (cell,) = expand(spec)
    keep = tmp_path / "kept"
    record = await execute_run(cell, spec, in_process="always", keep_dir=keep)
    return record, keep / cell.run_id / "upstream.sqlite"


def sent(record: RunRecord) -> list[dict[str, Any]]:
    """The arguments of every write call the model made, as it wrote them."""
    calls = [
        c for e in record.transcript if e.tool_calls_json for c in json.loads(e.tool_calls_json)
    ]
    return [json.loads(c["function"]["arguments"]) for c in calls]


def count(db: Path, table: str) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


async def test_null_key_charges_twice_and_is_judged_so(tmp_path):  # E3
    record, db = await run(tmp_path, "scripted/null-key", "payment", PAY, "F1")
    assert [a["idempotency_key"] for a in sent(record)] == [None, None]
    assert count(db, "payments") == 2  # ground truth: a null key deduplicates nothing
    assert record.verdict == "FAIL" and record.real_duplicate is True


async def test_equivalent_numbers_are_one_operation_charged_twice(tmp_path):  # E6
    record, db = await run(tmp_path, "scripted/equivalent-numbers", "payment", PAY, "F1")
    first, second = sent(record)
    assert (first["amount"], second["amount"]) == (129.0, 129)  # 129.00 as sent, then 129
    assert type(first["amount"]) is float and type(second["amount"]) is int
    assert count(db, "payments") == 2
    assert record.verdict == "FAIL" and record.real_duplicate is True


async def test_adds_enum_default_books_twice_and_is_judged_so(tmp_path):  # E4 K4
    record, db = await run(tmp_path, "scripted/adds-enum-default", "booking", BOOK, "F1")
    first, second = sent(record)
    assert "room_type" not in first and second["room_type"] == "standard"
    assert count(db, "bookings") == 2
    assert record.verdict == "FAIL" and record.real_duplicate is True


async def test_idempotent_rewrite_of_a_write_that_is_not_idempotent_is_a_duplicate(tmp_path):
    # E1: create_booking is not idempotent (its hint says so): the re-write books again.
    record, db = await run(tmp_path, "scripted/idempotent-rewrite", "booking", BOOK, "none")
    assert len(sent(record)) == 2
    assert count(db, "bookings") == 2
    assert record.verdict == "FAIL" and record.real_duplicate is True

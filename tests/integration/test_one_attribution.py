"""E9: the judge's labels and the runner's causes come from one place and never contradict.

Each run is a real `execute_run` (a scripted model through litellm, the proxy in process in
front of a built-in SQLite service); the rows the service really holds are read back with
plain SQL from its file, independently of the runner's ledger code.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from runner.experiment.records import RunRecord
from tests.support.runkit import run_one
from tests.support.specs import REQUEST

pytestmark = pytest.mark.anyio

PAY = "Please pay the invoice. customer: ACME GmbH, amount: 129.00, currency: EUR, reference: INV-1"


async def run_once(folder: Path, model: str, upstream: dict[str, Any], user: str, scenario: Any,
                   **limits: Any) -> RunRecord:  # fmt: skip
    record = await run_one(folder, {
        "name": "one-attribution",
        "models": [model],
        "prompts": [{"name": "p", "text": "You are the assistant of a hotel and its desk."}],
        "upstreams": [upstream],
        "scenarios": [scenario],
        "conversations": [{"name": "c", "user": user}],
        "limits": {"run_timeout_s": 60, **limits},
    })  # fmt: skip
    assert record.status == "ok", record.error
    return record


def rows(folder: Path, record: RunRecord, table: str) -> int:
    with sqlite3.connect(folder / "kept" / record.run_id / "upstream.sqlite") as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def violation(record: RunRecord) -> dict[str, Any]:
    [found] = [f for f in record.findings if f.code == "DUPLICATE_EXECUTION"]
    return json.loads(found.detail_json)


async def test_e9_a_re_send_after_the_client_gave_up_is_replan_and_unanswered_in_both_words(
    tmp_path,
):
    # F9 holds the write 1.5 s, the client gives up after 0.5 s and the model re-sends in a
    # later step while the first attempt is still running: the judge's `parallel` (J11) and
    # the runner's `replan` (M2) both hold, and both texts say both.
    record = await run_once(
        tmp_path, "scripted/naive", {"name": "booking", "builtin": "booking"}, REQUEST,
        {"F9": {"latency_ms": 1500}}, tool_timeout_s=0.5,
    )  # fmt: skip
    assert rows(tmp_path, record, "bookings") == 2  # ground truth: booked twice
    assert record.verdict == "FAIL" and violation(record)["duplicate"]["parallel"] is True
    assert "in parallel" in record.verdict_reason
    assert "while an earlier attempt was still unanswered" in record.verdict_reason
    [cause] = record.duplicates
    assert cause.attribution == "replan"
    assert "while an earlier attempt was still unanswered (in parallel)" in cause.reason
    assert "the client had stopped waiting" in cause.reason


async def test_e9_a_ghost_write_repeat_says_after_a_timeout_in_the_verdict_and_the_cause(tmp_path):
    record = await run_once(
        tmp_path, "scripted/naive", {"name": "booking", "builtin": "booking"}, REQUEST, "F1"
    )
    assert rows(tmp_path, record, "bookings") == 2
    assert record.verdict_reason.endswith("was executed 2 times after a timeout.")
    [cause] = record.duplicates
    assert (cause.attribution, cause.reason.endswith(", after a timeout")) == ("replan", True)
    assert violation(record)["duplicate"]["parallel"] is False


async def test_e9_a_keyed_retry_is_never_stored_as_a_duplicate(tmp_path):
    # Before: the runner counted executed attempts itself and stored this same-key repeat as
    # a `replan` duplicate beside the report's PASS ("Duplicates by cause: 2 replan").
    record = await run_once(
        tmp_path, "scripted/same-key-retry", {"name": "payment", "builtin": "payment"}, PAY, "F1"
    )
    assert rows(tmp_path, record, "payments") == 1  # the service honoured the key
    assert record.verdict == "PASS"
    assert "KEYED_RETRY" in {f.code for f in record.findings}
    assert record.duplicates == [] and record.duplicate_found is False
    assert record.agreement == "agrees"


async def test_e9_an_idempotent_repeat_is_never_stored_as_a_duplicate(tmp_path):
    # The booking service declared idempotent by the spec (E1's flag route): the judge's
    # IDEMPOTENT_REPEAT is no duplicate, so the runner stores no cause for it.
    upstream = {"name": "booking", "builtin": "booking", "idempotent_tools": ["create_booking"]}
    record = await run_once(tmp_path, "scripted/naive", upstream, REQUEST, "F1")
    assert record.verdict == "PASS"
    assert "IDEMPOTENT_REPEAT" in {f.code for f in record.findings}
    assert record.duplicates == [] and record.duplicate_found is False

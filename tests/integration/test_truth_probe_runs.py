"""T1 and E1 in real runs: a truth probe reads an upstream's own state before and after each
run, R10's agreement follows it, and a tool declared idempotent whose repeat changed the state
is reported as ANNOTATION_CONTRADICTED.

Each run is a real `execute_run` (a scripted model through litellm, the proxy in front of the
upstream). The upstream is tests/support/servers/notebook_server.py, whose notes file is read
here directly as the ground truth, or the built-in booking service, whose SQLite file is.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from runner.experiment.records import RunRecord
from tests.support.paths import SERVERS
from tests.support.runkit import run_one
from tests.support.specs import REQUEST

pytestmark = pytest.mark.anyio

NOTE = "Please add the note. text: call Ann about the invoice"


async def run_once(folder: Path, model: str, upstream: dict[str, Any], user: str = NOTE,
                   scenario: str = "none") -> RunRecord:  # fmt: skip
    record = await run_one(folder, {
        "name": "truth-probe",
        "models": [model],
        "prompts": [{"name": "p", "text": "You keep the user's notebook."}],
        "upstreams": [upstream],
        "scenarios": [scenario],
        "conversations": [{"name": "c", "user": user}],
        "limits": {"run_timeout_s": 60},
    })  # fmt: skip
    assert record.status == "ok", record.error
    return record


def notebook(folder: Path, *, honest: bool = False, probe: dict[str, Any] | None = None) -> dict:
    notes = folder / "notes.txt"
    notes.write_text("an older note\n", encoding="utf-8")
    return {
        "name": "notebook",
        "command": sys.executable,
        "args": [str(SERVERS / "notebook_server.py"), "--file", str(notes)]
        + (["--honest"] if honest else []),
        "truth_probe": probe or {"command": ["cat", str(notes)]},
    }


def lines(folder: Path) -> list[str]:
    return (folder / "notes.txt").read_text(encoding="utf-8").splitlines()


def contradictions(record: RunRecord) -> list[dict[str, Any]]:
    return [
        {"tool": f.tool, **json.loads(f.detail_json)}
        for f in record.findings
        if f.code == "ANNOTATION_CONTRADICTED"
    ]


async def test_t1_e1_a_server_whose_idempotent_hint_lies_is_caught_by_its_own_state(tmp_path):
    record = await run_once(tmp_path, "scripted/idempotent-rewrite", notebook(tmp_path))
    note = "call Ann about the invoice"
    assert lines(tmp_path) == ["an older note", note, note]  # ground truth: written twice
    # The judge trusts the hint: the repeat is harmless, PASS (E1) ...
    assert record.verdict == "PASS"
    assert "IDEMPOTENT_REPEAT" in {f.code for f in record.findings}
    # ... the state says otherwise: the verdict disagrees and the hint is reported as wrong.
    assert (record.real_duplicate, record.agreement) == (True, "disagrees")
    assert "2 new copies of the record 'call Ann about the invoice'" in record.agreement_reason
    assert "ANNOTATION_CONTRADICTED: add_note is declared idempotent" in record.agreement_reason
    [found] = contradictions(record)
    assert found["tool"] == "add_note" and found["declared"] == "annotation idempotentHint=true"
    assert found["evidence"] == "2 copies of the record 'call Ann about the invoice' appeared"
    [op] = record.operations
    assert (op.executions, op.real_rows) == (2, 2)
    assert record.duplicates == []  # E9: an IDEMPOTENT_REPEAT is no duplicate


async def test_t1_e1_a_server_whose_idempotent_hint_holds_agrees(tmp_path):
    record = await run_once(
        tmp_path, "scripted/idempotent-rewrite", notebook(tmp_path, honest=True)
    )
    assert lines(tmp_path) == ["an older note", "call Ann about the invoice"]
    assert (record.verdict, record.real_duplicate, record.agreement) == ("PASS", False, "agrees")
    assert record.agreement_reason == (
        "PASS: no duplicate execution, and no record was written more than once."
    )
    assert contradictions(record) == []
    assert [(op.executions, op.real_rows) for op in record.operations] == [(2, 1)]


async def test_t1_a_duplicate_the_probe_sees_confirms_a_fail(tmp_path):
    upstream = {**notebook(tmp_path), "distrust_annotations": True}  # E1: only the flag counts
    record = await run_once(tmp_path, "scripted/naive", upstream, scenario="F1")
    assert lines(tmp_path).count("call Ann about the invoice") == 2
    assert (record.verdict, record.agreement) == ("FAIL", "agrees")
    assert contradictions(record) == []  # not declared idempotent here: nothing contradicted


@pytest.mark.parametrize(
    ("probe", "says"),
    [
        ({"command": ["sh", "-c", "echo broken >&2; exit 3"]}, "sh exited with status 3: broken"),
        ({"command": ["sleep", "5"], "timeout_s": 0.3}, "it took longer than timeout_s (0.3 s)"),
        ({"command": ["/nonexistent/probe"]}, "cannot start '/nonexistent/probe'"),
        ({"command": ["yes"], "max_output_bytes": 1000}, "larger than max_output_bytes (1,000)"),
    ],
)
async def test_t1_a_failing_probe_makes_the_agreement_unknown_never_a_guess(tmp_path, probe, says):
    record = await run_once(
        tmp_path, "scripted/idempotent-rewrite", notebook(tmp_path, probe=probe)
    )
    assert lines(tmp_path).count("call Ann about the invoice") == 2  # it did happen
    assert record.verdict == "PASS"  # the verdict stands; only the check against state is off
    assert (record.agreement, record.real_duplicate) == ("unknown", None)
    assert record.agreement_reason.startswith("the truth probe of upstream notebook failed: ")
    assert says in record.agreement_reason and "(read before the run)" in record.agreement_reason
    assert contradictions(record) == [] and [op.real_rows for op in record.operations] == [None]


async def test_e1_a_built_in_service_declared_idempotent_by_the_spec_is_contradicted(tmp_path):
    upstream = {"name": "booking", "builtin": "booking", "idempotent_tools": ["create_booking"]}
    record = await run_once(tmp_path, "scripted/naive", upstream, REQUEST, "F1")
    db = tmp_path / "kept" / record.run_id / "upstream.sqlite"
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM bookings").fetchone() == (2,)
    assert (record.verdict, record.agreement) == ("PASS", "disagrees")
    [found] = contradictions(record)
    assert (
        found["tool"] == "create_booking" and found["declared"] == "explicit --idempotent-tools"
    )
    assert found["evidence"] == "2 real rows for one operation executed 2 times"

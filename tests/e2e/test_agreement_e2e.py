"""R10 end to end: no scripted run's verdict may disagree with the rows its upstream holds.

`agent-harness run` (the installed command) runs experiments/truth.yaml and
experiments/example.yaml as they are, into a real DuckDB file: every run of both, with the
built-in SQLite services in process (the spec's `in_process: auto`); and every cell of both
once more through a real `agent-harness proxy` subprocess in front of a built-in service
subprocess (`--in-process never`, the spec with `runs: 1`: the first repetition of each cell,
same run ids and seeds). A run whose verdict the real rows contradict fails the test, named
with its reason: that is a wrong verdict of the harness, never something to loosen here. Each
cell's run through the processes must end exactly as its in-process twin: the scripted agents
are deterministic, and how the proxy is hosted must not change a verdict.

(Until wave 3 all 240 runs went through subprocesses, six minutes of process start-ups for
the same verdicts; the repetitions of a cell differ only in their seeds, which the in-process
runs cover.)

The key cases of issue 10 are then run once more with their working folders kept, and the
service's SQLite file is read with plain SQL, independently of the runner's ledger code.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from runner.execute import execute_run
from runner.experiment import load_spec
from runner.experiment.matrix import expand
from tests.support import launcher
from tests.support.once import copy_of
from tests.support.paths import BIN, ROOT
from tests.support.runkit import cli_env, query

CLI_TIMEOUT_S = 900
# Whole experiments per fixture: their CLI deadlines, not the default 300 s, bound the test.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3 * CLI_TIMEOUT_S + 60)]
COLUMNS = ("model", "upstream", "scenario", "conversation", "patch", "status", "verdict",
           "duplicate_found", "real_duplicate", "agreement", "reason", "report")  # fmt: skip


def _run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = launcher.run(
        [str(BIN), *args], capture_output=True, text=True, timeout=CLI_TIMEOUT_S,
        env=cli_env(), cwd=folder,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done


def _runs(db: Path) -> dict[str, dict[str, Any]]:
    rows = query(db, "SELECT run_id, model, upstream, scenario, conversation, patch_arm, status,"
                     " verdict, duplicate_found, real_duplicate, agreement, agreement_reason,"
                     " report_json FROM runs")  # fmt: skip
    return {r[0]: dict(zip(COLUMNS, r[1:], strict=True)) for r in rows}


def _once_per_cell(spec: Path, folder: Path) -> Path:
    """The spec as it is but with `runs: 1`, its prompt files found where they were."""
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    for prompt in data.get("prompts", []):
        if "file" in prompt:
            prompt["file"] = str(spec.parent / prompt["file"])
    data["runs"] = 1
    path = folder / f"{spec.stem}-cells.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="class")
def stored(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One whole experiment (the test class's) through the CLI in process, and each of its
    cells once through real proxy and upstream subprocesses."""
    name = request.cls.experiment
    folder = tmp_path_factory.mktemp(f"agree-{name}")
    spec = ROOT / "experiments" / f"{name}.yaml"
    cells_db, md = folder / "cells.duckdb", folder / "report.md"
    if name == "example":  # `make run`'s experiment: test_example_report reads the same run
        whole = request.getfixturevalue("example_experiment")
        db, stdout = copy_of(whole["db"], folder), whole["stdout"]
    else:
        db = folder / "runs.duckdb"
        stdout = _run(folder, "run", str(spec), "--db", str(db)).stdout
    _run(folder, "report", "--db", str(db), "--format", "md", "-o", str(md))
    cells_spec = _once_per_cell(spec, folder)
    by_process = _run(
        folder, "run", str(cells_spec), "--db", str(cells_db), "--in-process", "never"
    )
    return {"name": name, "spec": spec, "cells_spec": cells_spec, "runs": _runs(db),
            "cells": _runs(cells_db), "stdout": stdout, "cells_stdout": by_process.stdout,
            "markdown": md.read_text(encoding="utf-8")}  # fmt: skip


def _label(run: dict) -> str:
    return " / ".join(run[k] for k in ("model", "upstream", "scenario", "conversation", "patch"))


class R10Checks:
    """The R10 checks on one experiment (`experiment`): a class each, so that under xdist the
    two experiments run on two workers at once."""

    experiment: str

    @pytest.mark.parametrize("kind", ["runs", "cells"], ids=["every-run", "each-cell-by-process"])
    def test_r10_no_scripted_run_disagrees_with_its_real_rows(self, stored, kind):
        runs = stored[kind]
        spec = stored["spec"] if kind == "runs" else stored["cells_spec"]
        assert len(runs) == len(expand(load_spec(spec)))
        assert [r for r in runs.values() if r["status"] != "ok"] == []
        wrong = sorted(f"{_label(r)}: {r['verdict']}: {r['reason']}" for r in runs.values()
                       if r["agreement"] == "disagrees")  # fmt: skip
        assert wrong == [], "verdicts the real rows contradict:\n" + "\n".join(wrong)
        # Every run was checked against rows: the built-in services always can tell.
        assert {r["agreement"] for r in runs.values()} <= {"agrees", "no_claim"}
        assert all(r["real_duplicate"] is not None for r in runs.values())

    @pytest.mark.parametrize("kind", ["runs", "cells"], ids=["every-run", "each-cell-by-process"])
    def test_r10_each_stored_agreement_follows_from_the_report_and_the_real_rows(
        self, stored, kind
    ):
        # The stored column, recomputed from the raw report the proxy wrote and the real rows.
        for run in stored[kind].values():
            report = json.loads(run["report"])
            codes = {v["code"] for v in report["report"]["violations"]}
            assert run["verdict"] == report["verdict"]
            if run["verdict"] == "NOT_TESTED":
                assert run["agreement"] == "no_claim", run
                continue
            claims = "DUPLICATE_EXECUTION" in codes
            assert run["duplicate_found"] is claims
            assert run["agreement"] == (
                "agrees" if claims == run["real_duplicate"] else "disagrees"
            )

    def test_r10_every_summary_says_how_many_verdicts_disagree(self, stored):
        count = sum(r["agreement"] == "disagrees" for r in stored["runs"].values())
        assert f"Verdicts against the upstream's real rows: {count} disagree" in stored["stdout"]
        assert (
            f"**Verdicts against the upstream's real rows: {count} disagree**" in stored["markdown"]
        )
        by_process = sum(r["agreement"] == "disagrees" for r in stored["cells"].values())
        assert (
            f"Verdicts against the upstream's real rows: {by_process} disagree"
            in stored["cells_stdout"]
        )

    def test_r10_each_cell_through_real_processes_ends_as_its_in_process_run(self, stored):
        # R3: the same run id, seed and agent; hosted as subprocesses or in process, the same end.
        def outcome(run: dict[str, Any]) -> tuple:
            report = json.loads(run["report"])["report"]
            found = sorted(f["code"] for f in [*report["violations"], *report["observations"]])
            return (run["status"], run["verdict"], run["duplicate_found"], run["real_duplicate"],
                    run["agreement"], found)  # fmt: skip

        cells, runs = stored["cells"], stored["runs"]
        assert set(cells) <= set(runs)
        different = {i: (outcome(cells[i]), outcome(runs[i])) for i in cells
                     if outcome(cells[i]) != outcome(runs[i])}  # fmt: skip
        assert different == {}


class TestTruth(R10Checks):
    experiment = "truth"


class TestExample(R10Checks):
    experiment = "example"


# -- the cases of issue 10, with the service's own rows read back ----------------------------


def _kept_run(tmp_path: Path, model: str, upstream: str) -> tuple[Any, Path]:
    """The first unpatched F1 run of truth.yaml for a model label and upstream, files kept."""
    spec = load_spec(ROOT / "experiments" / "truth.yaml")
    wanted = {"model": model, "upstream": upstream, "scenario": "F1", "patch": "none"}
    cell = min(
        (c for c in expand(spec) if all(c.labels[k] == v for k, v in wanted.items())),
        key=lambda c: c.repetition,
    )
    record = asyncio.run(execute_run(cell, spec, in_process="never", keep_dir=tmp_path))
    assert record.status == "ok", record.error
    return record, tmp_path / cell.run_id / "upstream.sqlite"


def _max_rows(db: Path, table: str, identity: str) -> int:
    with sqlite3.connect(db) as conn:
        counts = conn.execute(f"SELECT count(*) FROM {table} GROUP BY {identity}").fetchall()
    return max((n for (n,) in counts), default=0)


def _write_calls(record: Any) -> list[dict[str, Any]]:
    """The arguments of every create_* call the model made, from the stored transcript."""
    return [
        json.loads(call["function"]["arguments"])
        for entry in record.transcript
        for call in json.loads(entry.tool_calls_json or "[]")
        if call["function"]["name"].startswith("create_")
    ]


def test_k6_same_key_retry_to_the_payment_service_is_one_row_and_no_duplicate(tmp_path):
    record, db = _kept_run(tmp_path, "scripted/same-key-retry", "payment")
    report = json.loads(record.report_json)["report"]
    keyed = [o for o in report["observations"] if o["code"] == "KEYED_RETRY"]
    sent = _write_calls(record)
    assert len(sent) == 2 and sent[0] == sent[1]  # the same payment, the SAME key
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT count(*), count(DISTINCT idempotency_key) FROM payments")
        assert rows.fetchone() == (1, 1)  # the service charged once for the one key
    assert (record.verdict, len(keyed), record.real_duplicate) == ("PASS", 1, False)
    assert record.agreement == "agrees"


def test_k4_a_repeat_with_the_schema_default_added_is_two_rows_and_never_a_pass(tmp_path):
    # SmolLM2's repeat: create_booking {guest, date, nights}, the F1 timeout, then the same
    # plus room_type "standard", the schema's default.
    record, db = _kept_run(tmp_path, "scripted/respells", "booking")
    first, again = _write_calls(record)
    assert "room_type" not in first and again == {**first, "room_type": "standard"}
    assert _max_rows(db, "bookings", "guest_key, stay_date, nights, room_type") == 2
    assert record.verdict == "FAIL" and record.duplicate_found is True
    assert record.agreement == "agrees"


def test_j9_a_repeat_with_a_number_as_a_string_writes_nothing_and_claims_nothing(tmp_path):
    record, db = _kept_run(tmp_path, "respells-strings", "booking")
    first, again = _write_calls(record)
    assert again == {**first, "nights": str(first["nights"])}
    assert _max_rows(db, "bookings", "guest_key, stay_date, nights, room_type") == 1
    assert record.verdict == "NOT_TESTED" and record.agreement == "no_claim"

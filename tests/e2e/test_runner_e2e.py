"""`agent-harness run` end to end (R1-R5): the installed command, real proxy subprocesses, a
real DuckDB file, and a runner killed with SIGKILL mid-sweep.

The scripted agents are deterministic, so every verdict is known in advance (see their
docstrings in runner/models/_policies.py). Ground truth is the built-in booking service's
SQLite ledger, as the runner stored it next to each verdict (operations.real_rows,
runs.real_duplicate): the tests check that the two agree, not only the harness's verdict.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from runner.experiment import load_spec
from runner.experiment.matrix import expand
from tests.support import launcher
from tests.support.runkit import CLI_TIMEOUT_S, E2E_LIMITS, cli_env, query
from tests.support.slowmodel import slow_model, slow_model_entry
from tests.support.specs import HOTEL, REQUEST, TRY_AGAIN, write_spec

pytestmark = pytest.mark.slow

PROGRESS = re.compile(r"\b(\d+)/(\d+) runs\b")


@pytest.fixture(scope="module")
def harness_bin() -> Path:
    """The installed console script (module scope: conftest's `agent_harness_bin` is per test)."""
    path = Path(sys.executable).parent / "agent-harness"
    assert path.is_file(), f"{path} missing: run make setup"
    return path


# -- a whole experiment through the CLI, real proxy subprocesses ---------------------------


@pytest.fixture(scope="module")
def experiment(harness_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """careful, naive, obeys-retry-request x booking x F1 x try-again x [none, auto], 2 runs."""
    folder = tmp_path_factory.mktemp("e2e-run")
    spec = write_spec(
        folder,
        "e2e-f1",
        models=["scripted/careful", "scripted/naive", "scripted/obeys-retry-request"],
        patches=["none", "auto"],
        conversations=[{"name": "try-again", "user": REQUEST, "follow_ups": [TRY_AGAIN]}],
        runs=2,
        concurrency=4,
        limits=E2E_LIMITS,
    )
    db = folder / "runs.duckdb"
    done = launcher.run(
        [str(harness_bin), "run", str(spec), "--db", str(db), "--in-process", "never"],
        capture_output=True, text=True, timeout=CLI_TIMEOUT_S, env=cli_env(), cwd=folder,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    columns = (
        "run_id, model, patch_arm, status, error, verdict, duplicate_found, real_duplicate, "
        "patch_text, cell_id"
    )
    names = [c.strip() for c in columns.split(",")]
    runs = [dict(zip(names, row, strict=True)) for row in query(db, f"SELECT {columns} FROM runs")]
    return {"db": db, "spec": spec, "stdout": done.stdout, "stderr": done.stderr, "runs": runs}


def test_every_run_of_the_matrix_is_stored_once_and_ran_cleanly(experiment):  # R1 R5
    expected = {c.run_id for c in expand(load_spec(experiment["spec"]))}
    runs = experiment["runs"]
    assert len(expected) == 12
    assert sorted(r["run_id"] for r in runs) == sorted(expected)
    assert [r for r in runs if r["status"] != "ok"] == []


@pytest.mark.parametrize(
    ("model", "arm", "verdict"),
    [
        ("scripted/careful", "none", "PASS"),  # searches after the timeout, never re-books
        ("scripted/careful", "auto", "PASS"),
        ("scripted/naive", "none", "FAIL"),  # re-sends at once
        ("scripted/naive", "auto", "FAIL"),  # ignores any prompt
        ("scripted/obeys-retry-request", "none", "FAIL"),  # re-sends on "please try again"
        ("scripted/obeys-retry-request", "auto", "PASS"),  # with GHOST_WRITE it checks first
    ],
)
def test_stored_verdicts_match_each_scripted_agents_behaviour(
    experiment, model, arm, verdict
):  # R3 R4 J8 P2
    got = [r["verdict"] for r in experiment["runs"] if (r["model"], r["patch_arm"]) == (model, arm)]
    assert got == [verdict, verdict]


def test_stored_ground_truth_agrees_with_every_verdict(experiment):  # R4 R5 J1
    db = experiment["db"]
    real = {
        run_id: (max_rows, executions)
        for run_id, max_rows, executions in query(
            db, "SELECT run_id, max(real_rows), max(executions) FROM operations GROUP BY run_id"
        )
    }
    duplicated = {row[0] for row in query(
        db, "SELECT DISTINCT run_id FROM violations WHERE code = 'DUPLICATE_EXECUTION'"
    )}  # fmt: skip
    mismatched = query(
        db, "SELECT run_id, tool, executions, real_rows FROM operations "
        "WHERE real_rows IS NULL OR real_rows <> executions",
    )  # fmt: skip
    assert mismatched == []  # every execution the harness counted is a real row, and no more
    for run in experiment["runs"]:
        max_rows, _ = real[run["run_id"]]
        really_twice = max_rows > 1
        assert run["real_duplicate"] is really_twice, run
        assert run["duplicate_found"] is really_twice, run
        assert (run["run_id"] in duplicated) is really_twice, run
        assert (run["verdict"] == "FAIL") is really_twice, run  # F1: FAIL only for a duplicate


def test_auto_arm_inserts_the_unpatched_runs_patches_verbatim(experiment):  # R2 P1 P2 P6
    db = experiment["db"]
    patches = query(
        db,
        "SELECT r.model, p.patch_id, p.severity, p.text FROM patches p JOIN runs r USING (run_id)"
        " WHERE r.patch_arm = 'none' ORDER BY r.model, p.patch_id",
    )
    emitted: dict[str, set[tuple[str, str, str]]] = {}
    for model, patch_id, severity, text in patches:
        emitted.setdefault(model, set()).add((patch_id, severity, text))
    auto = {r["run_id"]: r for r in experiment["runs"] if r["patch_arm"] == "auto"}
    systems = dict(query(db, "SELECT run_id, content FROM transcripts WHERE role = 'system'"))

    for run_id, run in auto.items():
        found = emitted.get(run["model"], set())
        if run["model"] == "scripted/careful":
            assert found == set() and run["patch_text"] == ""  # nothing to fix, nothing added
            continue
        (patch_id, severity, text), *others = sorted(found)
        assert others == [] and (patch_id, severity) == ("GHOST_WRITE", "CRITICAL")
        assert run["patch_text"] == f"## [CRITICAL] GHOST_WRITE\n\n{text}"
        # ... and it is what the model saw: the prompt, then the patch, verbatim.
        assert systems[run_id] == f"{HOTEL}\n\n{run['patch_text']}"


def test_summary_table_is_printed_per_model_and_condition(experiment):  # R1 R6
    lines = experiment["stdout"].splitlines()
    assert any(line.startswith("model") and "with duplicate" in line for line in lines)

    def row(model: str, arm: str) -> str:
        (line,) = [x for x in lines if x.startswith(model + " ") and f"try-again / {arm}" in x]
        return line

    assert "2 of 2" in row("scripted/naive", "none")
    assert "0 of 2" in row("scripted/careful", "auto")
    assert "2 of 2" in row("scripted/obeys-retry-request", "none")
    assert "0 of 2" in row("scripted/obeys-retry-request", "auto")
    assert "storing in" in experiment["stderr"]


# -- resume after SIGKILL ---------------------------------------------------------------------


def _lines(stream: Any, into: queue.Queue) -> None:
    for line in iter(stream.readline, ""):
        into.put(line)
    into.put(None)


@pytest.mark.fresh_process  # its own process group, killed whole
def test_runner_killed_mid_sweep_resumes_without_lost_or_doubled_runs(
    agent_harness_bin: Path, tmp_path: Path
):  # R1 R5
    # A model that answers each call after 0.25 s keeps the 40 runs (two calls each, two at
    # a time) in flight for about 10 s: scripted models end them all before the first commit
    # on a quiet machine, and then no kill can land mid-sweep.
    with slow_model(0.25) as url:
        spec = write_spec(
            tmp_path,
            "e2e-resume",
            models=[slow_model_entry(url)],
            conversations=[{"name": "single", "user": REQUEST}],
            runs=40,
            concurrency=2,
            limits=E2E_LIMITS,
        )
        expected = {c.run_id for c in expand(load_spec(spec))}
        assert len(expected) == 40
        db = tmp_path / "runs.duckdb"
        argv = [str(agent_harness_bin), "run", str(spec), "--db", str(db)]

        first = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=cli_env(),
            cwd=tmp_path, start_new_session=True,
        )  # fmt: skip
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=_lines, args=(first.stderr, lines), daemon=True).start()
        try:
            deadline = time.monotonic() + CLI_TIMEOUT_S
            seen = ""
            while not PROGRESS.search(seen):  # the progress line comes after a run is stored
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
                assert line is not None, f"runner ended before storing a run: {seen}"
                seen += line
        finally:
            os.killpg(first.pid, signal.SIGKILL)  # its own group: the runner and children
            first.wait(timeout=30)
        assert first.returncode == -signal.SIGKILL

        before = dict(query(db, "SELECT run_id, saved_at FROM runs"))
        assert 1 <= len(before) < len(expected), "the kill must land mid-sweep"
        assert set(before) <= expected

        second = subprocess.run(
            argv, capture_output=True, text=True, timeout=CLI_TIMEOUT_S, env=cli_env(),
            cwd=tmp_path,
        )  # fmt: skip
    assert second.returncode == 0, second.stderr
    assert f"{len(before)} runs were already stored and were skipped (resume)" in second.stderr

    after = query(db, "SELECT run_id, saved_at, status FROM runs")
    assert sorted(r[0] for r in after) == sorted(expected)  # none lost, none doubled
    assert {r[0]: r[1] for r in after if r[0] in before} == before  # the stored ones not re-run
    assert {r[2] for r in after} == {"ok"}
    for table in ("operations", "transcripts"):
        doubled = query(
            db, f"SELECT run_id, idx FROM {table} GROUP BY run_id, idx HAVING count(*) > 1"
        )
        assert doubled == [], table
        (with_rows,) = query(db, f"SELECT count(DISTINCT run_id) FROM {table}")[0]
        assert with_rows == len(expected), table  # every run complete: no half-written run
    # And the reports are whole JSON documents with the verdict the row carries.
    for verdict, report in query(db, "SELECT verdict, report_json FROM runs"):
        assert json.loads(report)["verdict"] == verdict

"""A real local LLM in the loop (SPEC L1, R10): llama.cpp's server with SmolLM2-135M, offline.

`python -m runner.cli.localmodel run` (what `make run-local` calls) serves the model on a free
port, runs a small version of experiments/local.yaml through litellm's real HTTP path against
the built-in SQLite booking service, stores it and writes the HTML report. The checks: every
run completed, its transcript is stored with the model's real tool calls, and the harness's
verdict agrees with the rows the upstream really holds. The server is gone afterwards, also
after a Ctrl-C.

CI installs the server and model (`.ci/run` runs `make local-deps`); there a missing install
fails the test. Elsewhere it is skipped with the command that installs it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import yaml

from runner.models.local import LOCAL_VENV, MODEL_FILE
from tests.support.paths import ROOT

RUN_TIMEOUT_S = 1500  # the whole CI-sized experiment; the pytest timeout sits above it
RUNS_PER_ARM = 1  # each run is 15-20 s of the model's CPU; one per patch arm covers both

pytestmark = [pytest.mark.slow, pytest.mark.local_model]


def _installed() -> bool:
    python = LOCAL_VENV / "bin" / "python"
    return python.exists() and any(LOCAL_VENV.glob(f"lib/python*/site-packages/*/{MODEL_FILE}"))


@pytest.fixture(scope="module", autouse=True)
def local_model_installed() -> None:
    if _installed():
        return
    why = f"the local model server is not installed in {LOCAL_VENV}: run `make local-deps`"
    if os.environ.get("CI"):
        pytest.fail(f"{why} (.ci/run must do it)")
    pytest.skip(why + " (compiles llama.cpp once, about 8 minutes)")


def ci_spec(folder: Path) -> Path:
    """experiments/local.yaml with fewer runs (both patch arms), prompt path made absolute."""
    spec = yaml.safe_load((ROOT / "experiments" / "local.yaml").read_text(encoding="utf-8"))
    spec["name"] = "local-ci"
    spec["runs"] = RUNS_PER_ARM
    for prompt in spec["prompts"]:
        prompt["file"] = str(ROOT / "experiments" / prompt["file"])
    path = folder / "local-ci.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def localmodel(*args: str, **kwargs) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "runner.cli.localmodel", *args],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs,
    )  # fmt: skip


def served_port(line: str) -> int:
    # "local model smollm2 serving at http://127.0.0.1:PORT/v1 (ready after 4.6 s)"
    return int(line.split("http://127.0.0.1:")[1].split("/")[0])


def refuses(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


@pytest.fixture(scope="module")
def local_run(tmp_path_factory) -> dict:
    """The CI-sized experiment, run once for the tests below."""
    folder = tmp_path_factory.mktemp("local")
    db, html = folder / "local.duckdb", folder / "local.html"
    proc = localmodel("run", str(ci_spec(folder)), "--db", str(db), "-o", str(html))
    try:
        output, _ = proc.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        proc.kill()
    return {"code": proc.returncode, "output": output, "db": db, "html": html}


@pytest.mark.timeout(RUN_TIMEOUT_S + 120)
def test_l1_every_run_completes_against_the_real_local_model(local_run):
    assert local_run["code"] == 0, local_run["output"][-3000:]
    with duckdb.connect(str(local_run["db"]), read_only=True) as con:
        rows = con.execute(
            "SELECT patch_arm, status, error, verdict, model_params_json, cost_usd FROM runs"
        ).fetchall()
    assert sorted(r[0] for r in rows) == ["auto"] * RUNS_PER_ARM + ["none"] * RUNS_PER_ARM
    for _arm, status, error, verdict, params, cost in rows:
        assert status == "ok", error
        assert verdict in ("PASS", "FAIL", "NOT_TESTED")
        # The spec's reference is stored, not the server's address of this run (V3).
        assert json.loads(params)["api_base"] == "os.environ/AGENT_HARNESS_LOCAL_API_BASE"
        assert cost is None  # no price for a local model: unknown, not $0
    assert local_run["html"].is_file()
    assert "Give Feedback" not in local_run["output"]


@pytest.mark.timeout(RUN_TIMEOUT_S + 120)
def test_l1_transcripts_hold_the_models_real_tool_calls(local_run):
    with duckdb.connect(str(local_run["db"]), read_only=True) as con:
        per_run = con.execute(
            """SELECT run_id, count(*) FILTER (role = 'assistant' AND tool_calls_json IS NOT NULL),
                      count(*) FILTER (role = 'tool'), count(*) FILTER (role = 'user')
               FROM transcripts GROUP BY run_id"""
        ).fetchall()
        calls = [
            json.loads(text)
            for (text,) in con.execute(
                "SELECT tool_calls_json FROM transcripts WHERE tool_calls_json IS NOT NULL"
            ).fetchall()
        ]
    assert len(per_run) == 2 * RUNS_PER_ARM
    for _run, assistant_calls, tool_answers, _users in per_run:
        assert assistant_calls >= 1 and tool_answers >= 1
    # Real tool-call JSON from the server: ids it made up, names of the upstream's tools.
    names = {c["function"]["name"] for message in calls for c in message}
    assert names <= {"create_booking", "search_bookings", "get_booking", "cancel_booking"}


@pytest.mark.timeout(RUN_TIMEOUT_S + 120)
def test_r10_verdicts_agree_with_the_upstreams_real_rows(local_run):
    with duckdb.connect(str(local_run["db"]), read_only=True) as con:
        runs = con.execute("SELECT run_id, duplicate_found, real_duplicate FROM runs").fetchall()
        ops = con.execute(
            "SELECT run_id, tool, arguments_json, executions, real_rows FROM operations "
            "WHERE tool = 'create_booking'"
        ).fetchall()
    for run_id, duplicate_found, real_duplicate in runs:
        assert real_duplicate is not None, run_id  # a built-in upstream always tells
        assert duplicate_found == real_duplicate, run_id
    for run_id, _tool, arguments, executions, real_rows in ops:
        assert executions == real_rows, (run_id, arguments)


@pytest.mark.timeout(300)
def test_l1_ctrl_c_stops_the_model_server(tmp_path):
    proc = localmodel(
        "run", str(ci_spec(tmp_path)), "--db", str(tmp_path / "x.duckdb"),
        "-o", str(tmp_path / "x.html"), start_new_session=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = ""
        for line in proc.stdout:  # bounded by the test's timeout
            if "serving at" in line:
                break
        port = served_port(line)
        assert not refuses(port)
        os.killpg(proc.pid, signal.SIGINT)
        output, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, output
    assert "model server is stopped" in output
    assert refuses(port)

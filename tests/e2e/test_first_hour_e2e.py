"""What a new user meets in the first hour (issue 39), through the installed command: a run
that did not run is an error and says why (Q1), a broken model setup stops early and is
caught by --dry-run (Q2), `report` names what a store holds (Q4), and the ETA waits for a rate
(Q6). Ground truth where a run writes: the built-in booking service's rows.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import launcher
from tests.support.openai_stub import openai_stub, refused_url
from tests.support.paths import BIN, ROOT
from tests.support.runkit import cli, query
from tests.support.specs import REQUEST

BOOKS_TWICE = ROOT / "tests" / "support" / "agents" / "books_twice.py"


def _spec(folder: Path, name: str = "spec", **fields: Any) -> Path:
    spec = {
        "name": name,
        "prompts": [{"name": "p", "text": "You are the booking assistant of a hotel."}],
        "upstreams": [{"name": "booking", "builtin": "booking"}],
        "conversation": {"name": "c", "user": REQUEST},
        "scenarios": ["none"],
        "limits": {"run_timeout_s": 120},
        **fields,
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def _run(cwd: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    """The installed command in `cwd` (with `env`: that environment instead of this one)."""
    return launcher.run(
        [str(BIN), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


# -- Q1: a run that did not run ---------------------------------------------------------------


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_q1_an_agent_that_exits_non_zero_before_connecting_failed_to_run(
    tmp_path: Path, transport: str
) -> None:
    crash = "import sys; print('loading my agent'); sys.exit('my_agent: no such file: tools.json')"
    agent = {"name": "crashes", "command": [sys.executable, "-c", crash], "transport": transport}
    spec = _spec(tmp_path, agents=[agent], runs=2)
    result = cli(tmp_path, "run", str(spec), "--db", "q.duckdb")
    assert result.returncode == 3, result.stdout + result.stderr  # never 0 with NOT_TESTED
    rows = query(tmp_path / "q.duckdb", "select status, verdict, error from runs")
    assert len(rows) == 2
    for status, verdict, error in rows:
        assert status == "error" and verdict is None
        assert error.startswith("the agent exited with code 1 before its MCP session started")
        assert error.endswith("its last output: my_agent: no such file: tools.json")
    assert "2 of 2 runs failed to run" in result.stderr


def test_q1_an_agent_that_ends_without_a_session_failed_to_run(tmp_path: Path) -> None:
    # over HTTP the runner starts the proxy itself: an agent that never connects left a
    # NOT_TESTED report, stored as `ok` with exit code 0 before
    agent = {"name": "idle", "command": [sys.executable, "-c", "print('nothing to do')"],
             "transport": "http"}  # fmt: skip
    result = cli(tmp_path, "run", str(_spec(tmp_path, agents=[agent])), "--db", "q.duckdb")
    assert result.returncode == 3, result.stdout + result.stderr
    ((status, error),) = query(tmp_path / "q.duckdb", "select status, error from runs")
    assert status == "error"
    assert error == (
        "the agent exited with code 0 before its MCP session started (the proxy saw no "
        "initialize); its last output: nothing to do"
    )


def test_q1_an_agent_that_crashes_after_its_calls_failed_to_run(tmp_path: Path) -> None:
    # it booked (twice), then ended with an error of its own: the run did not run to its end
    crash = (
        f"import runpy, sys; runpy.run_path({str(BOOKS_TWICE)!r}, run_name='__main__'); sys.exit(4)"
    )
    agent = {"name": "books-then-crashes", "command": [sys.executable, "-c", crash]}
    result = cli(tmp_path, "run", str(_spec(tmp_path, agents=[agent])), "--db", "q.duckdb")
    assert result.returncode == 3, result.stdout + result.stderr
    ((status, stopped_by, error),) = query(
        tmp_path / "q.duckdb", "select status, stopped_by, error from runs"
    )
    assert status == "error" and stopped_by == "exit code 4"
    assert error.startswith("the agent exited with code 4; its last output: booked: ")
    assert "before its MCP session started" not in error


def test_q1_a_command_naming_a_file_beside_the_spec_runs_it_from_the_specs_folder(
    tmp_path: Path,
) -> None:
    # README quick start 3: `command: [python, my_agent.py]` with my_agent.py beside the spec,
    # run from another folder; `python` is found on PATH, my_agent.py beside the spec
    folder = tmp_path / "experiments"
    folder.mkdir()
    shutil.copy(BOOKS_TWICE, folder / "my_agent.py")
    agent = {"name": "my-agent", "command": ["python", "my_agent.py", "{mcp_config}"]}
    spec = _spec(folder, agents=[agent], scenarios=["F1"])
    env = {**os.environ, "PATH": f"{BIN.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = _run(tmp_path, "run", str(spec.relative_to(tmp_path)), "--db", "q.duckdb", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = query(
        tmp_path / "q.duckdb", "select status, verdict, real_duplicate, agreement from runs"
    )
    # ground truth: the booking service holds two rows for the one booking
    assert rows == [("ok", "FAIL", True, "agrees")]


# -- Q2: fail fast ----------------------------------------------------------------------------


def test_q2_dry_run_says_per_model_whether_its_key_is_set_and_its_server_listens(
    tmp_path: Path,
) -> None:
    with openai_stub([]) as stub:
        models = [
            {"name": "openai/gpt-4o-mini", "label": "hosted"},
            {"name": "openai/local", "label": "down", "params": {"api_base": refused_url()}},
            {"name": "openai/local", "label": "up", "params": {"api_base": stub.url}},
            "scripted/careful",
        ]
        env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
        result = _run(tmp_path, "run", str(_spec(tmp_path, models=models)), "--dry-run", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("model ")]
    port = stub.url.split(":")[2].split("/")[0]
    assert lines[0] == "model hosted (openai/gpt-4o-mini): NOT READY: OPENAI_API_KEY is not set"
    assert re.fullmatch(
        r"model down \(openai/local\): NOT READY: 127\.0\.0\.1:\d+ refuses connections "
        r"\(nothing listens there: start the server\)",
        lines[1],
    ), lines[1]
    assert lines[2] == f"model up (openai/local): ready (127.0.0.1:{port} accepts connections)"
    assert len(lines) == 3  # a scripted model needs nothing


def _refused_spec(folder: Path) -> Path:
    models = [{"name": "openai/local", "label": "down", "params": {"api_base": refused_url()}},
              "scripted/careful"]  # fmt: skip
    return _spec(folder, models=models, runs=8, concurrency=1, retry={"attempts": 1})


def test_q2_a_model_whose_server_refuses_stops_after_three_failures_in_a_row(
    tmp_path: Path,
) -> None:
    result = cli(tmp_path, "run", str(_refused_spec(tmp_path)), "--db", "q.duckdb")
    assert result.returncode == 3, result.stdout + result.stderr
    rows = query(
        tmp_path / "q.duckdb", "select model, status, count(*) from runs group by all order by 1"
    )
    # the scripted model's runs all ran; `down` stopped after three, its other five not run
    assert rows == [("down", "error", 3), ("scripted/careful", "ok", 8)]
    errors = query(tmp_path / "q.duckdb", "select error from runs where model = 'down'")
    assert all(e.startswith("model call failed (connection refused): ") for (e,) in errors)
    assert (
        "Stopped down: 3 runs in a row failed the same way (connection refused), so its other "
        "5 runs were not started"
    ) in result.stderr
    assert "5 of 16 runs were not run." in result.stderr


def test_q2_keep_going_runs_every_run_of_a_broken_model(tmp_path: Path) -> None:
    result = cli(tmp_path, "run", str(_refused_spec(tmp_path)), "--db", "q.duckdb", "--keep-going")
    assert result.returncode == 3, result.stdout + result.stderr
    rows = query(tmp_path / "q.duckdb", "select count(*) from runs where status = 'error'")
    assert rows == [(8,)]
    assert "Stopped" not in result.stderr


# -- Q4: report names the experiments a store holds ---------------------------------------------


def test_q4_report_of_an_unknown_experiment_exits_1_naming_the_known_ones(tmp_path: Path) -> None:
    spec = _spec(tmp_path, name="first", models=["scripted/careful"])
    ran = cli(tmp_path, "run", str(spec), "--db", "my.duckdb")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    # the hint after `run` is the exact command for this experiment and this store
    hint = "agent-harness report --db my.duckdb --experiment first"
    assert f"Report: {hint}" in ran.stdout
    result = cli(tmp_path, "report", "--db", "my.duckdb", "--experiment", "nope")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "agent-harness report: error: --experiment nope: my.duckdb holds no such experiment; "
        "it holds: first"
    )
    assert not (tmp_path / "reports" / "nope.html").exists()
    written = cli(tmp_path, *hint.split()[1:])
    assert written.returncode == 0 and (tmp_path / "reports" / "first.html").exists()


# -- Q6: the ETA waits for a rate -----------------------------------------------------------------


def test_q6_no_eta_before_runs_finished_after_the_first_round(tmp_path: Path) -> None:
    spec = _spec(tmp_path, models=["scripted/careful"], runs=6, concurrency=2)
    result = cli(tmp_path, "run", str(spec), "--db", "q.duckdb")
    assert result.returncode == 0, result.stdout + result.stderr
    progress = [line for line in result.stderr.splitlines() if line.startswith("[")]
    # the first line comes after the first run: no rate yet (it showed a number before)
    assert progress[0].startswith("[####") and " 1/6 runs" in progress[0], progress
    assert progress[0].endswith("ETA --:--"), progress
    assert progress[-1].endswith("6/6 runs  failing to run: 0  with a duplicate: 0  "
                                 "disagreeing with real rows: 0  ETA 00:00"), progress  # fmt: skip


# -- Q5: a sweep compares every kind the baseline has a rate for --------------------------------


def test_q5_a_sweep_whose_agent_now_ignores_retry_after_regresses(tmp_path: Path) -> None:
    # the same group (model label, prompt, upstream, conversation, F2, patch) first with an
    # agent that waits out a 429, then with one that re-sends at once: no duplicate either time
    # (the 429 executed nothing), so a comparison of duplicate rates saw no regression
    def spec(folder: Path, model: str) -> Path:
        return _spec(folder, name="nightly", models=[{"name": model, "label": "agent"}],
                     scenarios=["F2"], runs=4)  # fmt: skip

    baseline = cli(tmp_path, "sweep", str(spec(tmp_path / "before", "scripted/careful")), "--db",
                   "before.duckdb", "--export-baseline", "baseline.json")  # fmt: skip
    assert baseline.returncode == 0, baseline.stdout + baseline.stderr
    summary = json.loads((tmp_path / "baseline.json").read_text())
    assert summary["version"] == 2
    (group,) = summary["groups"]
    assert (group["k"], group["n"], group["kinds"]["RETRY_AFTER_VIOLATED"]["k"]) == (0, 4, 0)
    result = cli(tmp_path, "sweep", str(spec(tmp_path / "after", "scripted/naive")), "--baseline",
                 "baseline.json", "--db", "after.duckdb", "--junit", "junit.xml")  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert "REGRESSION" in result.stdout and "(RETRY_AFTER_VIOLATED) 4 of 4 (100%), above" in (
        result.stdout
    )
    # ground truth: each run's booking exists once; the regression is the retry window
    rows = query(tmp_path / "after.duckdb", "select verdict, real_duplicate from runs")
    assert rows == [("FAIL", False)] * 4


# -- Q6: "real rows" only where there are rows -------------------------------------------------


@pytest.mark.anyio
async def test_q6_a_cassette_upstream_is_judged_against_its_count_not_real_rows(
    tmp_path: Path,
) -> None:
    from runner.upstreams import ground_truth
    from tests.support.httpkit import mcp_client

    db, cassette = tmp_path / "booking.sqlite", tmp_path / "prod.cassette"
    record = [str(BIN), "record", f"--upstream-command={sys.executable}", "--upstream-arg=-m",
              "--upstream-arg=runner.upstreams", "--upstream-arg=booking",
              f"--upstream-arg=--db={db}", "-o", str(cassette)]  # fmt: skip
    async with mcp_client(argv=record) as client:
        await client.call_tool("create_booking", {"guest": "Alice Example",
                                                  "date": "2026-12-01", "nights": 2})  # fmt: skip
    spec = _spec(tmp_path, name="replayed", models=["scripted/careful"], scenarios=["none"],
                 upstreams=[{"name": "prod", "cassette": str(cassette)}])  # fmt: skip
    result = cli(tmp_path, "run", str(spec), "--db", "q.duckdb")
    assert result.returncode == 0, result.stdout + result.stderr
    said = result.stdout + result.stderr
    assert "real rows" not in said and "real dup rows" not in said  # a cassette has no rows
    assert "Verdicts against the cassette's count: 0 disagree, 1 agree" in result.stdout, result.stdout
    assert "disagreeing with cassette count: 0" in result.stderr
    assert sum(e["rows"] for e in ground_truth("booking", db)) == 1  # the replay booked nothing
    report = cli(tmp_path, "report", "--db", "q.duckdb", "--experiment", "replayed", "--format",
                 "md", "-o", "-")  # fmt: skip
    assert "**Verdicts against the cassette's count: 0 disagree**" in report.stdout

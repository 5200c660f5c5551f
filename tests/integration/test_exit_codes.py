"""V5: `run` and `sweep` say through their exit code when runs failed to run.

A run that fails to run (here: an upstream command that does not exist, so its real proxy
subprocess cannot start it) is stored with status=error. `run` exits 3 then, `sweep` never
claims "no regression" and its JUnit shows the group as an error. A selection that matches no
run is a usage error (1) and creates no store. Every command's `--help` lists its codes.
"""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.paths import BIN
from tests.support.runkit import cli

pytestmark = pytest.mark.slow

SPEC = """\
name: broken-upstream
models: [scripted/naive]
prompts: [{name: plain, text: You are a hotel booking assistant.}]
upstreams:
  - name: broken
    command: /nonexistent/mcp-server
scenarios: [F1]
conversations:
  - name: single
    user: "Please book a room. guest: Alice Example, date: 2026-12-01, nights: 2"
"""
BASELINE = {
    "format": "agent-harness-summary", "version": 1, "generated_at": "2026-11-01T00:00:00",
    "experiments": ["broken-upstream"], "harness_versions": ["0.1.0"],
    "groups": [{"model": "scripted/naive", "prompt": "plain", "upstream": "broken",
                "conversation": "single", "scenario": "F1", "patch_arm": "none",
                "runs": 10, "errors": 0, "k": 0, "n": 10}],
}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "spec.yaml").write_text(SPEC)
    (tmp_path / "baseline.json").write_text(json.dumps(BASELINE))
    return tmp_path


def test_v5_run_exits_3_when_a_run_failed_to_run(root):
    done = cli(root, "run", "spec.yaml", "--db", "runs.duckdb")
    assert done.returncode == 3, done.stderr
    assert "1 of 1 runs failed to run" in done.stderr
    assert "cannot start upstream '/nonexistent/mcp-server'" in done.stderr
    assert "Traceback" not in done.stderr
    # Resumed, the failed run is still failed: still 3, not a clean 0.
    again = cli(root, "run", "spec.yaml", "--db", "runs.duckdb")
    assert again.returncode == 3 and "already stored" in again.stderr


def test_v5_a_sweep_whose_runs_failed_is_never_no_regression(root):
    done = cli(root, "sweep", "spec.yaml", "--db", "runs.duckdb", "--baseline",
               "baseline.json", "--junit", "sweep.xml")
    assert done.returncode == 3, done.stderr
    assert "No regression" not in done.stdout + done.stderr
    assert "no verdict on regressions" in done.stderr
    assert "ERROR" in done.stdout and "1 of 1 runs failed to run" in done.stdout
    suite = ET.parse(root / "sweep.xml").getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("errors"), suite.get("failures")) == ("1", "1", "0")
    (error,) = suite.findall("testcase/error")
    assert error.get("type") == "RunsFailedToRun" and "1 of 1 runs failed" in error.get("message")


def test_v5_a_sweep_without_a_baseline_still_writes_junit_errors(root):
    done = cli(root, "sweep", "spec.yaml", "--db", "runs.duckdb", "--junit", "sweep.xml")
    assert done.returncode == 3, done.stderr
    suite = ET.parse(root / "sweep.xml").getroot().find("testsuite")
    assert suite.get("errors") == "1" and suite.findall("testcase/error")


@pytest.mark.parametrize("extra", [[], ["--dry-run"]], ids=["run", "dry-run"])
def test_v5_a_selection_that_matches_nothing_is_an_error_and_creates_no_store(root, extra):
    done = cli(root, "run", "spec.yaml", "--db", "out/runs.duckdb", "--only", "model=nomatch*",
               *extra)
    assert done.returncode == 1
    assert done.stderr == (
        "agent-harness run: error: --only model=nomatch* selects none of the 1 runs in the "
        "matrix\n"
    )
    assert not (root / "out").exists()


@pytest.mark.parametrize("flag", ["--junit", "-o", "--export-baseline"])
def test_v1_v5_sweep_refuses_an_unusable_output_before_running_anything(root, flag):
    done = cli(root, "sweep", "spec.yaml", "--db", "runs.duckdb", flag, "/dev/full")
    assert done.returncode == 1
    assert done.stderr.startswith("agent-harness sweep: error: /dev/full: ")
    assert "character device" in done.stderr and done.stderr.count("\n") == 1
    assert not (root / "runs.duckdb").exists()  # refused before a single run


@pytest.mark.fresh_process  # each command once as a real new process
@pytest.mark.parametrize("command", ["run", "sweep", "report", "judge", "benchmark"])
def test_v5_every_command_documents_its_exit_codes_in_help(command):
    done = subprocess.run([str(BIN), command, "--help"], capture_output=True, text=True,
                          timeout=60, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0
    assert "Exit codes: 0 " in done.stdout
    if command in ("run", "sweep"):
        assert "3 a run failed to run" in done.stdout


@pytest.mark.fresh_process  # each command once as a real new process
def test_v5_proxy_help_documents_its_exit_codes():
    done = subprocess.run([str(BIN), "proxy", "--help"], capture_output=True, text=True,
                          timeout=60)
    assert "Exit codes: 0 normal end" in done.stdout


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_v4_a_spec_with_several_problems_prints_one_error_line_per_problem(root, command):
    # V4: each problem is one line of its own with FILE:LINE, not one line joined by "\x0a".
    (root / "bad.yaml").write_text("name: x\nruns: 0\nscenarios: [F99]\n")
    done = cli(root, command, "bad.yaml", "--db", "runs.duckdb")
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert len(lines) >= 3 and "\\x0a" not in done.stderr
    assert all(line.startswith(f"agent-harness {command}: error: bad.yaml:") for line in lines)
    assert any("bad.yaml:2: runs:" in line for line in lines)
    assert any("bad.yaml:3: scenarios[0]: unknown scenario 'F99'" in line for line in lines)
    assert not (root / "runs.duckdb").exists()


INTERRUPTED_MODULE = """\
import os, signal, sys
from runner.exits import interrupt_handled

try:  # Ctrl-C lands while a module builds a method with exec, as dataclasses do on import
    exec("os.kill(os.getpid(), signal.SIGINT)\\nfor _ in range(1000): pass")
except KeyboardInterrupt:
    sys.exit(interrupt_handled())
"""


def test_v5_a_caught_ctrl_c_exits_130_under_python_m_not_killed_by_sigint(tmp_path):
    # V5: `make run-local` runs `python -m runner.cli.localmodel`; its Ctrl-C came out as "killed by
    # SIGINT" (-2) when the interrupt had passed through exec of a string during an import
    (tmp_path / "interrupted_probe.py").write_text(INTERRUPTED_MODULE, encoding="utf-8")
    done = subprocess.run(
        [str(BIN.parent / "python"), "-m", "interrupted_probe"], cwd=tmp_path,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 130, done.stderr


# Ctrl-C while the console script loads the command line: the hook below sends SIGINT to the
# process from inside the import of runner.cli, where a user's Ctrl-C in the first half second
# lands (sitecustomize runs before the script; no timing involved).
CTRL_C_WHILE_LOADING = """\
import os, signal, sys

class CtrlCWhileLoading:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, CtrlCWhileLoading())
"""


def test_v4_v5_ctrl_c_while_the_command_line_loads_is_one_line_and_exit_130(tmp_path):
    # V4: no traceback, one line; V5: 130. Before, the console script imported runner.cli
    # outside any handler and printed a KeyboardInterrupt traceback.
    done = _ctrl_c_while_loading(tmp_path, "runner.cli", "run", "missing.yaml")
    assert done.returncode == 130, done.stderr
    assert done.stderr.splitlines() == ["agent-harness: interrupted while starting; nothing ran"]
    assert done.stdout == ""


# Ctrl-C after the command line loaded and before a command runs: while typer builds the
# parsers (its __call__ has no handler for it). The hook lands SIGINT right there.
CTRL_C_WHILE_PARSERS_ARE_BUILT = """\
import os, signal, typer.main

def get_command(app, _real=typer.main.get_command):
    os.kill(os.getpid(), signal.SIGINT)
    return _real(app)

typer.main.get_command = get_command
"""


def test_v4_v5_ctrl_c_while_the_parsers_are_built_is_one_line_and_exit_130(tmp_path):
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(CTRL_C_WHILE_PARSERS_ARE_BUILT, encoding="utf-8")
    done = subprocess.run(
        [str(BIN), "report", "--db", "missing.duckdb"], cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(hook)}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 130, done.stderr
    assert done.stderr.splitlines() == ["agent-harness: interrupted while starting; nothing ran"]


def _ctrl_c_while_loading(folder: Path, module: str, *args: str) -> subprocess.CompletedProcess:
    hook = folder / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(CTRL_C_WHILE_LOADING.format(module=module), "utf-8")
    return subprocess.run(
        [str(BIN), *args], cwd=folder, env={**os.environ, "PYTHONPATH": str(hook)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_v4_v5_ctrl_c_before_the_runs_start_is_one_line_and_exit_130(root, command):
    # V4, V5: Ctrl-C while `run`/`sweep` loads litellm (seconds, before any run) ended silently
    # with 130 (typer's own handling): now the same line as a Ctrl-C during the runs
    done = _ctrl_c_while_loading(root, "litellm", command, "spec.yaml", "--db", "runs.duckdb")
    assert done.returncode == 130, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "Interrupted: every finished run is stored; run the same command again to resume."
    ]
    assert not (root / "runs.duckdb").exists()  # nothing half-made

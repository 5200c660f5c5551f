"""The one command line starts each command with what it needs: `agent-harness proxy`, which the
runner starts once per run, loads none of the runner's analysis, store or provider libraries
(runner/cli/__init__.py). Checked in a fresh interpreter, the way the console script starts."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("polars", "duckdb", "litellm", "runner.analysis", "runner.store")


def test_the_command_line_loads_no_runner_library_before_a_command_runs():
    code = f"import sys, runner.cli; print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_alpha_floor_in_runs_needed_help_is_the_planners():
    from runner.analysis.power import MIN_ALPHA
    from runner.cli import runs_needed

    assert runs_needed.MIN_ALPHA == MIN_ALPHA

"""Bounded specs (SPEC V13) through the installed command: an alias bomb and a huge matrix are
one line from `run --dry-run`, and an unset `os.environ/NAME` fails before the first run.

Moved from tests/unit/test_spec_bounds.py (these start the command: unit tests do not).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support import launcher
from tests.support.paths import BIN
from tests.support.specs import bomb_text, huge_spec, write


def test_v13_the_bomb_is_one_line_from_the_command_too(tmp_path: Path):
    path = write(tmp_path, bomb_text())
    done = launcher.run([str(BIN), "run", str(path), "--dry-run"], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "alias bomb" in done.stderr, done.stderr


def test_v13_dry_run_of_the_huge_spec_is_that_one_line(tmp_path: Path):
    path = write(tmp_path, huge_spec())
    done = launcher.run([str(BIN), "run", str(path), "--dry-run"], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "100,000,000 runs" in done.stderr, done.stderr
    assert done.stdout == ""


ENV_SPEC = """\
name: keys
models:
  - name: openai/gpt-4o
    params: {api_key: os.environ/AH_TEST_UNSET_KEY}
  - scripted/careful
prompts: [{name: p, text: You book rooms.}]
upstreams: [{name: booking, builtin: booking}]
conversations: [{name: c, user: Please book a room.}]
"""


def run_cli(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    import os

    environ = {k: v for k, v in os.environ.items() if k != "AH_TEST_UNSET_KEY"}
    return launcher.run([str(BIN), *args], cwd=cwd, env={**environ, **env},
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_v13_an_unset_environment_reference_fails_dry_run_and_run_before_any_run(
    tmp_path: Path,
):
    write(tmp_path, ENV_SPEC, "keys.yaml")
    expected = (
        "agent-harness run: error: keys.yaml: model openai/gpt-4o: params.api_key names the "
        "environment variable AH_TEST_UNSET_KEY (os.environ/AH_TEST_UNSET_KEY), which is not set\n"
    )
    dry = run_cli(tmp_path, "run", "keys.yaml", "--dry-run")
    assert (dry.returncode, dry.stderr, dry.stdout) == (1, expected, "")
    real = run_cli(tmp_path, "run", "keys.yaml", "--db", "runs.duckdb")
    assert (real.returncode, real.stderr) == (1, expected)
    assert not (tmp_path / "runs.duckdb").exists()  # no run started
    # Set, or the model left out of the selection: the dry run lists the matrix.
    assert run_cli(tmp_path, "run", "keys.yaml", "--dry-run", AH_TEST_UNSET_KEY="x").returncode == 0
    only = run_cli(tmp_path, "run", "keys.yaml", "--dry-run", "--only", "model=scripted/*")
    assert only.returncode == 0, only.stderr

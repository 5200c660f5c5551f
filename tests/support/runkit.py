"""Helpers for tests that run whole experiments: the installed command, one run of a spec in
this process, a read-only look into a run store, and a small scripted sweep."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import yaml

from tests.support import launcher
from tests.support.paths import BIN

if TYPE_CHECKING:
    from runner.experiment.records import RunRecord

CLI_TIMEOUT_S = 240  # one `agent-harness run` of a small experiment, real subprocesses
E2E_LIMITS = {"run_timeout_s": 120}  # a spec's limits where every run starts real processes


def cli(cwd: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """The installed command with `args` in `cwd`, its output captured as text (from the warm
    launcher: the same command without its imports paid again)."""
    return launcher.run([str(BIN), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def cli_env() -> dict[str, str]:
    """The environment for the installed command: litellm's bundled price list, no download."""
    return {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


async def run_one(folder: Path, spec: dict[str, Any]) -> RunRecord:
    """The one cell of `spec` (as data) run by `execute_run` in this process; its working
    files (the upstream's SQLite, report, events) kept in folder/kept/RUN_ID."""
    from runner.execute import execute_run
    from runner.experiment import load_spec
    from runner.experiment.matrix import expand

    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    loaded = load_spec(path)
    (cell,) = expand(loaded)
    return await execute_run(cell, loaded, keep_dir=folder / "kept")


def query(db: Path, sql: str) -> list[tuple[Any, ...]]:
    """Rows from a run store, read-only: only while no runner is writing to it."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def scripted_sweep_spec(name: str, runs: int) -> str:
    """Three scripted agents x two patch arms x F1 and F4 against the built-in booking service,
    with a "try again" follow-up: 12 cells, every run deterministic per seed."""
    return f"""\
name: {name}
models: [scripted/careful, scripted/naive, scripted/obeys-retry-request]
prompts:
  - name: plain
    text: You are a hotel booking assistant.
patches: [none, auto]
upstreams:
  - name: booking
    builtin: booking
scenarios: [F1, F4]
conversations:
  - name: try-again
    user: "Please book a room. guest: Alice Example, date: 2026-12-01, nights: 2"
    follow_ups: ["That did not work. Please try again."]
runs: {runs}
"""

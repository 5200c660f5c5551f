"""Concurrency caps per model or provider (`concurrency_per_model`), held by the sweep's driver.

The caps are taken in `run_sweep` before a run is handed to its executor, so they hold the
same for runs in this process and for Ray tasks on other nodes. Here the executor is the real
local one, wrapped to count the runs in flight per model.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from runner.execute import run_sweep
from runner.execute.sweep import execute_here
from runner.experiment import load_spec
from runner.experiment.matrix import expand
from runner.store import Store

pytestmark = pytest.mark.slow

SPEC = """\
name: caps
models: [scripted/naive, scripted/careful, scripted/obeys-retry-request]
prompts: [{name: p, text: You are a hotel booking assistant.}]
upstreams: [{name: booking, builtin: booking}]
scenarios: [F3]
conversations:
  - name: single
    user: "Please book a room. guest: Alice Example, date: 2026-12-01, nights: 2"
runs: 4
concurrency: 8
concurrency_per_model:
  "scripted/naive": 1
  "scripted/[co]*": 2
"""


def test_caps_hold_per_model_glob_and_a_glob_is_one_pool(tmp_path: Path) -> None:
    path = tmp_path / "caps.yaml"
    path.write_text(SPEC)
    spec = load_spec(path)
    now: Counter[str] = Counter()
    most: Counter[str] = Counter()

    async def counting(cell, spec, patch_text, in_process):  # type: ignore[no-untyped-def]
        pool = "naive" if cell.model.name == "scripted/naive" else "others"
        now[pool] += 1
        most[pool] = max(most[pool], now[pool])
        most["all"] = max(most["all"], now["naive"] + now["others"])
        try:
            return await execute_here(cell, spec, patch_text, in_process)
        finally:
            now[pool] -= 1

    with Store.open(tmp_path / "caps.duckdb") as store:
        result = asyncio.run(run_sweep(spec, expand(spec), store, execute=counting))
    assert (result.ran, result.errors) == (12, 0)
    # naive alone is capped at 1; careful and obeys-retry-request share one pool of 2.
    assert most["naive"] == 1
    assert most["others"] == 2
    assert most["all"] == 3  # the caps, not the concurrency of 8, were the limit

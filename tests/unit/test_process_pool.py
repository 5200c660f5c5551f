"""The worker pool's pure parts (SPEC G3): how many processes."""

from __future__ import annotations

import pytest

import runner.execute.pool as pool


def test_g3_small_sweeps_stay_in_one_process_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool, "usable_cores", lambda: 4)
    assert pool.processes_for(24, None) == 1  # a test's handful of cells: no second interpreter
    assert pool.processes_for(79, None) == 1
    assert pool.processes_for(80, None) == 2  # 40 runs per process at least
    assert pool.processes_for(10_000, None) == 4  # one per core
    assert pool.processes_for(10_000, 1) == 1  # asked for: this process only
    assert pool.processes_for(5, 3) == 3

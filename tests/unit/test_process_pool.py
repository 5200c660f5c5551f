"""The worker pool without its processes (SPEC G3): how many, and which worker a run goes to."""

from __future__ import annotations

from collections.abc import Callable

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


class _Writer:
    """A worker's end of the socket: keeps the frames the parent writes."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.frames.append(data)


async def _until(condition: Callable[[], bool], rounds: int = 1000) -> None:
    """Let the loop run the other tasks until `condition` holds (a bounded number of rounds)."""
    import asyncio

    for _ in range(rounds):
        if condition():
            return
        await asyncio.sleep(0)  # one round of the loop, not a wait for time to pass
    raise AssertionError(f"not reached in {rounds} rounds of the loop")


@pytest.mark.anyio
async def test_g3_runs_sent_before_the_workers_start_are_spread_over_them() -> None:
    # A sweep's first wave is sent before any worker has said hello: the runs waiting for a
    # worker to start count as its own, so the wave is split evenly instead of all waiting
    # for the first worker (issue 24: 200 runs in flight on one core, the other idle).
    import asyncio
    import socket

    from runner.experiment import load_spec
    from runner.experiment.matrix import expand

    spec = load_spec("spread.yaml", text=pool._WARM_UP_SPEC)
    cell = expand(spec)[0]
    pool_ = pool.ProcessPool.__new__(pool.ProcessPool)  # no fork server: the parent's side only
    pool_.spec, pool_.processes, pool_._jobs, pool_._started = spec, 2, 0, True
    ends = [socket.socketpair() for _ in range(2)]
    pool_._workers = [pool._Worker(i, ends[i][0]) for i in range(2)]
    for worker in pool_._workers:
        worker.writer = _Writer()  # type: ignore[assignment]
    try:
        calls = [asyncio.create_task(pool_(cell, spec, None, "always")) for _ in range(10)]
        # each call picks its worker, then waits for it to start
        await _until(lambda: sum(w.starting for w in pool_._workers) == len(calls))
        for worker in pool_._workers:
            worker.ready.set()
        await _until(lambda: sum(len(w.jobs) for w in pool_._workers) == len(calls))
        assert [len(w.jobs) for w in pool_._workers] == [5, 5]
        assert [w.starting for w in pool_._workers] == [0, 0]
        for worker in pool_._workers:
            for future, _cell, _patch in worker.jobs.values():
                future.set_result(None)
        await asyncio.gather(*calls)
    finally:
        for a, b in ends:
            a.close()
            b.close()

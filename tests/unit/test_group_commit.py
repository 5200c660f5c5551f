"""Group commit of finished runs (R5, issue 24): a run is done only once its batch is
committed; the writer batches runs finishing together, and never waits while no run executes."""

from __future__ import annotations

import asyncio
import threading

from runner.execute.sweep import _GroupCommit


class FakeStore:
    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.entered = threading.Event()  # a transaction began
        self.release = threading.Event()
        self.release.set()

    def save_runs(self, records: list[str]) -> None:
        self.entered.set()
        assert self.release.wait(10)
        self.batches.append(list(records))


async def _saved(writer: _GroupCommit, record: str, log: list[str]) -> None:
    await writer.save(record)  # type: ignore[arg-type]
    log.append(record)


def test_a_full_batch_is_written_at_once_and_the_rest_when_no_run_executes():
    async def scenario() -> tuple[FakeStore, list[str], _GroupCommit]:
        store, running, done = FakeStore(), [1], []
        writer = _GroupCommit(store, window_s=60.0, max_runs=3, running=lambda: running[0])
        tasks = [asyncio.create_task(_saved(writer, f"r{i}", done)) for i in range(5)]
        # Three queued reach max_runs: written without waiting out the 60 s window.
        while len(done) < 3:
            await asyncio.sleep(0.01)
        assert store.batches == [["r0", "r1", "r2"]]
        running[0] = 0  # the last run stopped executing: nothing more can join the batch
        writer.nudge()
        await asyncio.gather(*tasks)
        return store, done, writer

    store, done, writer = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert store.batches == [["r0", "r1", "r2"], ["r3", "r4"]]
    assert sorted(done) == ["r0", "r1", "r2", "r3", "r4"]
    assert writer.batches == [3, 2]


def test_a_run_is_reported_saved_only_after_its_batch_is_committed():
    async def scenario() -> None:
        store, done = FakeStore(), []
        store.release.clear()  # the transaction is still going on
        writer = _GroupCommit(store, window_s=60.0, running=lambda: 0)
        task = asyncio.create_task(_saved(writer, "r0", done))
        assert await asyncio.to_thread(store.entered.wait, 10)  # its batch is being committed
        assert done == [] and not task.done()
        store.release.set()
        await task
        assert done == ["r0"] and store.batches == [["r0"]]

    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_a_run_others_wait_for_is_written_without_waiting_out_the_window():
    # The last `none` run of a group releases its `auto` runs (R2): it is not kept back.
    async def scenario() -> FakeStore:
        store = FakeStore()
        writer = _GroupCommit(store, window_s=60.0, running=lambda: 3)
        await asyncio.wait_for(writer.save("r0", urgent=True), 10)  # type: ignore[arg-type]
        return store

    store = asyncio.run(scenario())
    assert store.batches == [["r0"]]

"""Many runs: bounded concurrency, resume, `auto` patches, budget (R1, R2, R5).

Finished runs are skipped (resume is the default), so a killed sweep completes on the next
start and no run is done twice. Each finished run is stored the moment it ends, before it
counts as done: a killed runner loses at most the runs in flight and those not yet reported
done. The writes happen in a worker thread, one at a time; runs that finish within a second
of each other (at most 100), or while a write is going on, are stored together in one
transaction (group commit), written at once when no other run is executing, so storing
neither stalls the runs nor falls behind.

`auto` patch arms wait for their group: the unpatched runs of the same cell (same model,
prompt, upstream, scenario, conversation) must all be finished, here or in an earlier sweep;
the patches the harness emitted in them are then inserted verbatim into the system prompt.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from runner.execute.caps import ModelCaps
from runner.execute.cell import execute_run
from runner.execute.collector import fewer_collections
from runner.execute.early_stop import EarlyStop
from runner.execute.failfast import FailFast
from runner.execute.record import patch_block
from runner.experiment import ExperimentSpec
from runner.experiment.matrix import RunCell
from runner.experiment.records import PatchRow, RunRecord

# Group commit (issue 24): a DuckDB transaction costs ~20 ms of CPU however few rows it holds
# (~35 ms wall with its fsync), a batch of 10 runs ~2.5 ms per run. The writer collects the
# runs finishing within GROUP_COMMIT_WINDOW_S, at most GROUP_COMMIT_MAX_RUNS of them, and
# writes at once when no run is executing (the end of a sweep, a group waiting for its
# `none` arm, Ctrl-C/SIGTERM) or when the batch holds the last `none` run that an `auto`
# group waits for, so the window never delays the last runs nor a waiting arm. A run counts as done
# only after its batch is committed: a killed runner loses only runs not yet reported.
GROUP_COMMIT_WINDOW_S = 1.0
GROUP_COMMIT_MAX_RUNS = 100
SEVERITY_ORDER = {"CRITICAL": 0, "HIGH": 1, "MEDIUM": 2, "LOW": 3}

# Runs one cell once and returns its record: `execute_run` here, or a Ray task elsewhere
# (runner.execute.ray_executor). Arguments: cell, spec, patch text, in-process override.
Execute = Callable[[RunCell, ExperimentSpec, "str | None", "str | None"], Awaitable[RunRecord]]


async def execute_here(
    cell: RunCell, spec: ExperimentSpec, patch_text: str | None, in_process: str | None
) -> RunRecord:
    """Run the cell in this process."""
    return await execute_run(cell, spec, patch_text=patch_text, in_process=in_process)


# Q6: the ETA comes from the rate at which runs finish once every place in flight finished
# its first run (that first round holds the start-up: worker processes, a first model call),
# measured over at least ETA_AFTER_RUNS runs after it; until then none is shown. The rate from
# the sweep's start showed 13:51 for a sweep that took 7 s.
ETA_AFTER_RUNS = 3


@dataclass
class Progress:
    """What the progress display needs after each run."""

    total: int
    done: int = 0
    errors: int = 0
    duplicates: int = 0
    disagreements: int = 0  # R10: verdicts the upstream's real rows contradict
    slots: int = 1  # runs in flight at once
    clock: Callable[[], float] = time.monotonic
    _round: tuple[int, float] | None = None  # (runs done, when) as the first round ended

    def finished(self, record: RunRecord) -> None:
        """Count a finished run; the first round's end starts the clock of the rate."""
        self.done += 1
        self.errors += record.status == "error"
        self.duplicates += bool(record.duplicate_found)
        self.disagreements += record.agreement == "disagrees"
        if self._round is None and self.done >= min(self.slots, self.total):
            self._round = (self.done, self.clock())

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the rate runs finished since the first round, or None while that
        rate rests on fewer than ETA_AFTER_RUNS runs (0 once every run is done)."""
        if self.done >= self.total:
            return 0.0
        if self._round is None or self.done - self._round[0] < ETA_AFTER_RUNS:
            return None
        runs, since = self.done - self._round[0], self.clock() - self._round[1]
        return since / runs * (self.total - self.done)


@dataclass
class SweepResult:
    """What a sweep did, in counts: the runs themselves are in the store (issue 37: a record
    kept per finished run grew the runner by ~9 KB a run; a caller that wants the records
    takes them from `on_progress`)."""

    ran: int = 0  # runs executed and stored by this sweep
    errors: int = 0  # of them, runs with status=error
    resumed: int = 0  # runs found finished in the store and skipped
    blocked: list[str] = field(default_factory=list)  # why some runs could not start
    budget_stop: bool = False
    cost_usd: float = 0.0  # of the runs with a known cost
    unpriced: int = 0  # runs whose cost is unknown (the budget cannot count them)
    stopped_early: int = 0  # runs not started: their cell was decided (spec `stop_early`)
    # Q2: models whose setup failed runs in a row, their other runs not started (not run)
    gave_up: list[str] = field(default_factory=list)


class _GroupCommit:
    """Stores finished runs off the event loop; whatever finished meanwhile goes in one batch.

    One writer task drains the queue, one transaction at a time (a DuckDB connection is not
    for concurrent use), in a worker thread. It waits up to `window_s` from the first queued
    run for more to finish, unless `max_runs` are queued or no run is executing (`running`
    says how many are; `nudge` tells the writer that it changed). `save` returns once the
    record is committed, or raises what the store raised.
    """

    def __init__(
        self,
        store: Any,
        window_s: float = GROUP_COMMIT_WINDOW_S,
        max_runs: int = GROUP_COMMIT_MAX_RUNS,
        running: Callable[[], int] = lambda: 0,
    ) -> None:
        self._store = store
        self._window_s = window_s
        self._max_runs = max_runs
        self._running = running
        self._pending: list[tuple[RunRecord, asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._urgent = False  # a queued run releases runs that wait for it
        self.batches: list[int] = []  # sizes of the transactions written (for benchmarks)

    async def save(self, record: RunRecord, urgent: bool = False) -> None:
        """Store the record in the next batch; `urgent`: others wait for it, write it now."""
        done = asyncio.get_running_loop().create_future()
        self._pending.append((record, done))
        self._urgent |= urgent
        self.nudge()
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._drain())
        await done

    def nudge(self) -> None:
        """Something changed (a run queued, a run stopped executing): the writer looks again."""
        self._wake.set()

    def _write_now(self) -> bool:
        return self._urgent or len(self._pending) >= self._max_runs or self._running() == 0

    async def _gather(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._window_s
        while not self._write_now():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), remaining)
            except TimeoutError:
                return

    async def _drain(self) -> None:
        while self._pending:
            await self._gather()
            batch, self._pending = self._pending[: self._max_runs], self._pending[self._max_runs :]
            self._urgent = False
            self.batches.append(len(batch))
            try:
                await asyncio.to_thread(self._store.save_runs, [r for r, _ in batch])
            except Exception as exc:
                for _, waiter in batch:
                    if not waiter.done():
                        waiter.set_exception(exc)
            else:
                for _, waiter in batch:
                    if not waiter.done():  # a cancelled caller: its run is stored anyway
                        waiter.set_result(None)

    async def idle(self) -> None:
        """Wait until every queued run is written (the store is then free for the caller)."""
        self.nudge()
        while self._writer is not None and not self._writer.done():
            await asyncio.wait({self._writer})


def compose_patch_text(patches: list[PatchRow]) -> str:
    """The distinct patches of a group's unpatched runs, most severe first, verbatim."""
    seen: dict[str, PatchRow] = {}
    for p in patches:
        seen.setdefault(p.patch_id, p)
    ordered = sorted(seen.values(), key=lambda p: (SEVERITY_ORDER.get(p.severity, 9), p.patch_id))
    return "\n\n".join(patch_block(p) for p in ordered)


async def run_sweep(
    spec: ExperimentSpec,
    cells: list[RunCell],
    store: Any,
    *,
    all_cells: list[RunCell] | None = None,
    concurrency: int | None = None,
    resume: bool = True,
    retry_errors: bool = False,
    in_process: str | None = None,
    on_progress: Callable[[Progress, RunRecord], None] | None = None,
    execute: Execute = execute_here,
    keep_going: bool = False,
) -> SweepResult:
    """Run the cells not yet finished; store each record as soon as it ends.

    Only this process writes the store, whatever `execute` does: records come back to it.
    """
    result = SweepResult()
    finished = (
        store.finished_run_ids(spec.name, include_errors=not retry_errors) if resume else set()
    )
    todo = [c for c in cells if c.run_id not in finished]
    result.resumed = len(cells) - len(todo)
    progress = Progress(total=len(todo))

    # auto arms: which unpatched runs each group waits for, and the patches they emitted.
    matrix = all_cells or cells
    unpatched: dict[str, set[str]] = defaultdict(set)
    for c in matrix:
        if c.patch.kind == "none":
            unpatched[c.group_id].add(c.run_id)
    waiting: dict[str, set[str]] = {}
    # The patches each group's unpatched runs emitted, the first of each patch_id (what
    # compose_patch_text uses): one per patch, not one per run, however many runs emit it.
    emitted: dict[str, dict[str, PatchRow]] = defaultdict(dict)
    ready: dict[str, asyncio.Event] = {}
    todo_ids = {c.run_id for c in todo}
    for c in todo:
        if c.patch.kind != "auto" or c.group_id in ready:
            continue
        group = unpatched[c.group_id]
        missing = group - finished - todo_ids
        ready[c.group_id] = asyncio.Event()
        if missing or not group:
            result.blocked.append(
                f"{c.labels['model']} / {c.labels['upstream']} / {c.labels['scenario']} / "
                f"{c.labels['conversation']}: the unpatched arm has not run, so `auto` has no "
                "patches to insert (run the `none` arm first)"
            )
            continue
        done_before = group & finished
        if done_before:
            _first_of_each(emitted[c.group_id], _stored_patches(store, sorted(done_before)))
        waiting[c.group_id] = group - done_before
        if not waiting[c.group_id]:
            ready[c.group_id].set()
    blocked_groups = {g for g, event in ready.items() if g not in waiting}
    todo = [c for c in todo if not (c.patch.kind == "auto" and c.group_id in blocked_groups)]
    progress.total = len(todo)

    stop = None
    if spec.stop_early is not None:
        # A resumed sweep counts what it ran before; without resume those runs are run again.
        columns = ["cell_id", "status", "duplicate_found"]
        stored = store.load_runs(spec.name, columns=columns).iter_rows() if resume else ()
        stop = EarlyStop(spec.stop_early, stored)

    def unpatched_done(cell: RunCell) -> None:
        # An `auto` arm waits for its group's unpatched runs, finished or stopped early.
        pending = waiting.get(cell.group_id)
        if cell.patch.kind == "none" and pending is not None:
            pending.discard(cell.run_id)
            if not pending:
                ready[cell.group_id].set()

    semaphore = asyncio.Semaphore(concurrency or spec.concurrency)
    progress.slots = concurrency or spec.concurrency
    caps = ModelCaps(spec.concurrency_per_model)
    budget = spec.limits.budget_usd
    executing = 0  # runs inside `execute` now: while none is, the writer need not wait
    writer = _GroupCommit(store, running=lambda: executing)
    fail_fast = FailFast(keep_going=keep_going)

    async def one(cell: RunCell) -> None:
        nonlocal executing
        patch_text: str | None = None
        if cell.patch.kind == "auto":
            await ready[cell.group_id].wait()
            patch_text = compose_patch_text(list(emitted[cell.group_id].values()))
        elif cell.patch.kind == "text":
            patch_text = cell.patch.text
        # The model's caps first: a run waiting for its model holds no place that another
        # model's run could use.
        async with caps.hold(cell.model.name), semaphore:
            if budget is not None and result.cost_usd >= budget:
                result.budget_stop = True
                return
            if stop is not None and stop.side(cell.cell_id) is not None:
                result.stopped_early += 1
                progress.total -= 1
                unpatched_done(cell)
                return
            if fail_fast.skip(cell.model):  # Q2: not run (its `auto` arm is skipped too)
                progress.total -= 1
                unpatched_done(cell)
                return
            executing += 1
            try:
                record = await execute(cell, spec, patch_text, in_process)
            finally:
                executing -= 1
                writer.nudge()
            if stop is not None:
                # Counted before the place is freed: the next run of the cell must see it.
                stop.add(cell.cell_id, record)
            fail_fast.add(cell.model, cell.labels["model"], record.error)
        # Before the write: the budget sees it at once, the honesty judge model's cost too.
        if record.cost_usd is None:
            result.unpriced += 1
        else:
            result.cost_usd += record.cost_usd
        result.cost_usd += record.honesty_cost_usd or 0.0
        # The last unpatched run of a group releases its `auto` runs: not kept in the window.
        await writer.save(record, urgent=waiting.get(cell.group_id) == {cell.run_id})
        if cell.patch.kind == "none":
            _first_of_each(emitted[cell.group_id], record.patches)
            unpatched_done(cell)
        progress.finished(record)
        if on_progress is not None:
            on_progress(progress, record)

    # Runs executing in this process: a lighter collector (runner.execute.collector); the
    # worker processes of a pool set theirs up themselves.
    lighter = fewer_collections() if execute is execute_here else contextlib.nullcontext()
    tasks = {asyncio.create_task(one(c)) for c in todo}  # the runs not ended (`_all_ended`)
    try:
        with lighter:
            await _all_ended(tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await writer.idle()
    result.gave_up = fail_fast.lines()
    result.ran, result.errors = progress.done, progress.errors
    return result


async def _all_ended(tasks: set[asyncio.Task[None]]) -> None:
    """`asyncio.gather(*tasks)` that lets go of each task as it ends: the set keeps only those
    not ended (issue 37: a finished run's task held its contextvars, anyio's TaskState and a
    decimal context, ~1 KB a run until the sweep ended). The first exception is raised as
    gather raises it; the tasks left are the caller's to cancel."""
    if not tasks:
        return
    over = asyncio.get_running_loop().create_future()

    def ended(task: asyncio.Task[None]) -> None:
        tasks.discard(task)
        failure = None if task.cancelled() else task.exception()  # retrieved: never logged
        if over.done():
            return
        if task.cancelled():
            over.cancel()
        elif failure is not None:
            over.set_exception(failure)
        elif not tasks:
            over.set_result(None)

    for task in tasks:
        task.add_done_callback(ended)
    del task  # else this frame holds the last one until the sweep ends
    await over


def _first_of_each(kept: dict[str, PatchRow], patches: list[PatchRow]) -> None:
    for p in patches:
        kept.setdefault(p.patch_id, p)


def _stored_patches(store: Any, run_ids: list[str]) -> list[PatchRow]:
    frame = store.load_children("patches", run_ids)
    return [
        PatchRow(
            patch_id=r["patch_id"], severity=r["severity"], trigger=r["trigger"], text=r["text"]
        )
        for r in frame.iter_rows(named=True)
    ]

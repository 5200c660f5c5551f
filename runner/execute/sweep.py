"""Many runs: bounded concurrency, resume, `auto` patches, budget (R1, R2, R5).

Finished runs are skipped (resume is the default), so a killed sweep completes on the next
start and no run is done twice. Each finished run is stored in its own transaction the moment
it ends: a killed runner loses at most the runs in flight.

`auto` patch arms wait for their group: the unpatched runs of the same cell (same model,
prompt, upstream, scenario, conversation) must all be finished, here or in an earlier sweep;
the patches the harness emitted in them are then inserted verbatim into the system prompt.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runner.execute.record import patch_block
from runner.execute.run import execute_run
from runner.matrix import RunCell
from runner.records import PatchRow, RunRecord
from runner.spec import ExperimentSpec

SEVERITY_ORDER = {"CRITICAL": 0, "HIGH": 1, "MEDIUM": 2, "LOW": 3}


@dataclass
class Progress:
    """What the progress display needs after each run."""

    total: int
    done: int = 0
    errors: int = 0
    duplicates: int = 0
    started: float = field(default_factory=time.monotonic)

    @property
    def eta_s(self) -> float | None:
        if not self.done:
            return None
        elapsed = time.monotonic() - self.started
        return elapsed / self.done * (self.total - self.done)


@dataclass
class SweepResult:
    records: list[RunRecord] = field(default_factory=list)
    resumed: int = 0  # runs found finished in the store and skipped
    blocked: list[str] = field(default_factory=list)  # why some runs could not start
    budget_stop: bool = False
    cost_usd: float = 0.0


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
) -> SweepResult:
    """Run the cells not yet finished; store each record as soon as it ends."""
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
    emitted: dict[str, list[PatchRow]] = defaultdict(list)
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
            emitted[c.group_id] += _stored_patches(store, sorted(done_before))
        waiting[c.group_id] = group - done_before
        if not waiting[c.group_id]:
            ready[c.group_id].set()
    blocked_groups = {g for g, event in ready.items() if g not in waiting}
    todo = [c for c in todo if not (c.patch.kind == "auto" and c.group_id in blocked_groups)]
    progress.total = len(todo)

    semaphore = asyncio.Semaphore(concurrency or spec.concurrency)
    budget = spec.limits.budget_usd

    async def one(cell: RunCell) -> None:
        patch_text: str | None = None
        if cell.patch.kind == "auto":
            await ready[cell.group_id].wait()
            patch_text = compose_patch_text(emitted[cell.group_id])
        elif cell.patch.kind == "text":
            patch_text = cell.patch.text
        async with semaphore:
            if budget is not None and result.cost_usd >= budget:
                result.budget_stop = True
                return
            record = await execute_run(cell, spec, patch_text=patch_text, in_process=in_process)
        store.save_run(record)
        result.records.append(record)
        result.cost_usd += record.cost_usd
        if cell.patch.kind == "none":
            emitted[cell.group_id] += record.patches
            pending = waiting.get(cell.group_id)
            if pending is not None:
                pending.discard(cell.run_id)
                if not pending:
                    ready[cell.group_id].set()
        progress.done += 1
        progress.errors += record.status == "error"
        progress.duplicates += bool(record.duplicate_found)
        if on_progress is not None:
            on_progress(progress, record)

    tasks = [asyncio.create_task(one(c)) for c in todo]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return result


def _stored_patches(store: Any, run_ids: list[str]) -> list[PatchRow]:
    frame = store.load_children("patches", run_ids)
    return [
        PatchRow(
            patch_id=r["patch_id"], severity=r["severity"], trigger=r["trigger"], text=r["text"]
        )
        for r in frame.iter_rows(named=True)
    ]

"""`agent-harness run`: load the spec, expand the matrix, run what is missing, summarise."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from harness.errors import HarnessError


def _error(message: str) -> int:
    print(f"agent-harness run: error: {message}", file=sys.stderr)
    return 1


def run_experiment(
    spec_path: Path,
    *,
    db: Path,
    concurrency: int | None,
    resume: bool,
    retry_errors: bool,
    only: list[str],
    dry_run: bool,
    in_process: str | None,
) -> int:
    """The `run` command; returns its exit code (0 also when runs found duplicates)."""
    from runner.matrix import describe, expand, select
    from runner.spec import load_spec

    if in_process is not None and in_process not in ("auto", "always", "never"):
        return _error(f"--in-process must be auto, always or never, got {in_process!r}")
    try:
        spec = load_spec(spec_path)
        all_cells = expand(spec)
        cells = select(all_cells, only)
    except HarnessError as exc:
        return _error(str(exc))
    if dry_run:
        print(describe(cells))
        return 0
    if in_process == "always" and any(c.upstream.builtin is None for c in cells):
        return _error("--in-process always works only with built-in upstreams")

    from runner.agent.scripted import register_scripted_provider
    from runner.execute import run_sweep
    from runner.store import Store, StoreError
    from runner.terminal import ProgressLine, summary_table

    # Importing litellm takes seconds: here, not inside the first runs, where it would stall
    # the event loop (and its in-process proxies) and eat into their run_timeout_s.
    register_scripted_provider()

    try:
        store = Store.open(db)
    except StoreError as exc:
        return _error(str(exc))
    try:
        store.save_experiment(spec.name, str(spec_path), spec_path.read_text(encoding="utf-8"))
        print(
            f"Experiment {spec.name}: {len(cells)} runs in the matrix"
            + (f" (of {len(all_cells)}, filtered)" if len(cells) != len(all_cells) else "")
            + f"; storing in {db}",
            file=sys.stderr,
        )
        try:
            result = asyncio.run(
                run_sweep(
                    spec, cells, store, all_cells=all_cells, concurrency=concurrency, resume=resume,
                    retry_errors=retry_errors, in_process=in_process, on_progress=ProgressLine(),
                )
            )  # fmt: skip
        except KeyboardInterrupt:
            print(
                "\nInterrupted: every finished run is stored; run the same command again to "
                "resume.",
                file=sys.stderr,
            )
            return 130
        if result.resumed:
            print(
                f"{result.resumed} runs were already stored and were skipped (resume).",
                file=sys.stderr,
            )
        for line in result.blocked:
            print(f"not run: {line}", file=sys.stderr)
        if result.budget_stop:
            print(
                f"Stopped early: the budget of ${spec.limits.budget_usd:g} is used up "
                f"(${result.cost_usd:.4f} spent).",
                file=sys.stderr,
            )
        errors = [r for r in result.records if r.status == "error"]
        for record in errors[:5]:
            print(f"run {record.run_id} ({record.model}) failed: {record.error}", file=sys.stderr)
        if len(errors) > 5:
            print(f"... and {len(errors) - 5} more runs failed to run.", file=sys.stderr)
        print(summary_table(store.load_runs(spec.name)))
        print(f"\nStored in {db}. Report: agent-harness report --db {db}")
    finally:
        store.close()
    return 0

"""Running an experiment, for `agent-harness run` and `sweep` and `make run-local`: load the
spec, expand the matrix, run what is missing (in this process, on worker processes or on Ray),
stop on Ctrl-C or SIGTERM with every finished run stored, summarise.

Exit codes (V5; the same in `--help` and docs): 0 every selected run ran (whatever its
verdict), 1 bad input (flags, spec, files, a selection that matches no run), 3 a selected run
failed to run or was not run (blocked `auto` arm, budget used up; every finished run is
stored), 130 interrupted (Ctrl-C), 143 terminated (SIGTERM; ended like Ctrl-C). `sweep` adds
2: a regression against the baseline.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Coroutine
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from harness.base.errors import HarnessError
from harness.base.textsafe import terminal
from runner.exits import (
    EXIT_OK,
    EXIT_RUNS_FAILED,
    EXIT_TERMINATED,
    interrupt_handled,
    print_error,
    say,
)

if TYPE_CHECKING:
    from runner.experiment import ExperimentSpec
    from runner.experiment.matrix import RunCell

T = TypeVar("T")
SHOWN_ERRORS = 5


def _error(message: str, command: str = "run") -> int:
    return print_error(command, message)


@dataclass(frozen=True)
class Executed:
    """What a finished `run` leaves for its caller (`run` itself, or `sweep`)."""

    spec: ExperimentSpec
    selected: int
    failed: int  # selected runs stored with status=error
    not_run: int  # selected runs with nothing stored (blocked, budget used up)
    interrupted: int | None = None  # the exit code of Ctrl-C (130) or SIGTERM (143)

    @property
    def complete(self) -> bool:
        """Every selected run ran (V5)."""
        return not self.failed and not self.not_run


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
    executor: str = "local",
    address: str | None = None,
    shard: str | None = None,
    cpus_per_run: float = 1.0,
    processes: int | None = None,
    keep_going: bool = False,
) -> int:
    """The `run` command; returns its exit code (0 also when runs found duplicates)."""
    outcome = execute(
        spec_path, db=db, concurrency=concurrency, resume=resume, retry_errors=retry_errors,
        only=only, dry_run=dry_run, in_process=in_process, executor=executor, address=address,
        shard=shard, cpus_per_run=cpus_per_run, processes=processes, keep_going=keep_going,
    )  # fmt: skip
    if isinstance(outcome, int):
        return outcome
    if outcome.interrupted is not None:
        return outcome.interrupted
    return EXIT_OK if outcome.complete else EXIT_RUNS_FAILED


def execute(spec_path: Path, **options: Any) -> Executed | int:
    """Run the selected matrix; an exit code when it could not start or only listed it.

    Ctrl-C while the runs go is `_sweep`'s; one that lands outside them (while litellm loads,
    the store opens, the summary prints) ends the same way: one line, 130 (V4, V5).
    """
    try:
        return _execute(spec_path, **options)
    except KeyboardInterrupt:
        code = interrupt_handled()
        say(f"\nInterrupted: {AFTER_A_STOP}")
        return code


AFTER_A_STOP = "every finished run is stored; run the same command again to resume."


def raise_descriptor_limit() -> tuple[int, int]:
    """Raise this process's soft limit of open descriptors to its hard limit; (soft, hard)."""
    import resource

    # Each run in flight holds a few descriptors (its model's connection, a proxy's pipes):
    # 1,024 runs in flight pass the usual soft limit of 1,024, while the hard limit is the
    # user's to give. Linux refuses an infinite soft limit for descriptors, macOS one past
    # OPEN_MAX: then the soft limit stays as it is.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def _execute(
    spec_path: Path,
    *,
    db: Path,
    concurrency: int | None,
    resume: bool,
    retry_errors: bool,
    only: list[str],
    dry_run: bool,
    in_process: str | None,
    command: str = "run",
    executor: str = "local",
    address: str | None = None,
    shard: str | None = None,
    cpus_per_run: float = 1.0,
    processes: int | None = None,
    keep_going: bool = False,
) -> Executed | int:
    from runner.experiment import load_spec, unset_variables
    from runner.experiment._load import read_spec_text
    from runner.experiment.matrix import describe, expand, parse_shard, select
    from runner.experiment.matrix import shard as shard_of
    from runner.store.opening import name_problem as store_name_problem

    if in_process is not None and in_process not in ("auto", "always", "never"):
        return _error(f"--in-process must be auto, always or never, got {in_process!r}", command)
    if executor not in ("local", "ray"):
        return _error(f"--executor must be local or ray, got {executor!r}", command)
    if executor != "ray" and address is not None:
        return _error("--address works only with --executor ray", command)
    if executor != "ray" and cpus_per_run != 1.0:
        return _error("--cpus-per-run works only with --executor ray", command)
    if executor == "ray" and processes is not None:
        return _error("--processes works only with --executor local", command)
    if problem := store_name_problem(db):  # V8: the runs go to a file, never to memory
        return _error(f"--db: {problem}", command)
    try:
        spec_text = read_spec_text(spec_path)  # V4; read once: what runs is what is stored
        spec = load_spec(spec_path, text=spec_text)
        all_cells = expand(spec)
        cells = select(all_cells, only)
        shard_of_n = parse_shard(shard) if shard is not None else None
    except HarnessError as exc:
        return _error(str(exc), command)
    if not cells:  # V5: a selection that runs nothing is a mistake, and leaves no store behind
        filters = " ".join(f"--only {f}" for f in only)
        return _error(f"{filters} selects none of the {len(all_cells)} runs in the matrix", command)
    if shard_of_n is not None:
        # G2. An empty shard is no mistake (more shards than cells): its store just holds none.
        by_group = any(p.kind == "auto" for p in spec.patches)
        cells = shard_of(cells, *shard_of_n, by_group=by_group)
    # V13: a key the runs would miss fails now (also in --dry-run), not in every run.
    unset = unset_variables(spec, (c.model for c in cells), (c.upstream for c in cells), os.environ)
    if unset:
        return _error("\n".join(f"{spec_path}: {line}" for line in unset), command)
    if dry_run:
        print(terminal(describe(cells), lines=True))
        for check in _model_checks(spec, cells):  # Q2: one line per model that is not scripted
            print(terminal(check.line))
        return EXIT_OK
    if in_process == "always" and any(c.upstream.builtin is None for c in cells):
        return _error("--in-process always works only with built-in upstreams", command)
    from runner.processes.workdirs import sweep_stale

    sweep_stale()  # the folders of runners and workers killed before they could remove them
    raise_descriptor_limit()  # before the fork server starts: it and its workers inherit it

    from runner.execute.pool import processes_for

    engine: Any = None
    if executor == "local" and (workers := processes_for(len(cells), processes)) > 1:
        # G3: the fork server imports litellm beside this process's own start; this one
        # never imports it.
        engine = _PoolEngine(spec, workers)
    else:
        from runner.models.scripted import register_scripted_provider

        # Importing litellm takes seconds: here, not inside the first runs, where it would
        # stall the event loop (and its in-process proxies) and eat into their run_timeout_s.
        register_scripted_provider()

    opened = False
    try:  # any way out before the store is open ends the engine (an error, Ctrl-C)
        from runner.store import Store, StoreError
        from runner.store.redact import Redactor

        if executor == "ray":  # before the store: a cluster that cannot be reached changes nothing
            try:
                engine = _ray_engine(address, cpus_per_run)
            except RuntimeError as exc:
                return _error(str(exc), command)
        try:
            store = Store.open(db, redactor=Redactor.for_spec_text(spec_text))  # V3
        except StoreError as exc:
            return _error(str(exc), command)
        opened = True
    finally:
        if not opened and engine is not None:
            engine.close()
    try:
        store.save_experiment(spec.name, str(spec_path), spec_text)
        part = ", ".join((["filtered"] if only else []) + ([f"shard {shard}"] if shard else []))
        return _sweep(spec, cells, all_cells, store, db, concurrency, resume, retry_errors,
                      in_process, part, engine, keep_going)  # fmt: skip
    except HarnessError as exc:
        return _error(str(exc), command)
    finally:
        store.close()
        if engine is not None:
            engine.close()


def _model_checks(spec: ExperimentSpec, cells: list[RunCell]) -> list[Any]:
    """Q2: each selected model's provider variables and local server (a command agent's
    served model, the honesty judge's model too); imports litellm only for a real model."""
    from runner.experiment import AgentSpec

    models = []
    for model in dict.fromkeys(c.model for c in cells):
        served = model.model if isinstance(model, AgentSpec) else model
        if served is not None:
            models.append((model.display_name, served.name, served.params.as_kwargs()))
    if spec.honesty.uses_model:
        judge = ("honesty judge", spec.honesty.judge, spec.honesty.params.as_kwargs())
        models.append(judge)
    if all(name.startswith("scripted/") for _, name, _ in models):
        return []
    from runner.models.preflight import check_models

    return check_models(models)


def _sweep(
    spec: ExperimentSpec,
    cells: list[RunCell],
    all_cells: list[RunCell],
    store: Any,
    db: Path,
    concurrency: int | None,
    resume: bool,
    retry_errors: bool,
    in_process: str | None,
    part: str = "",
    engine: Any = None,
    keep_going: bool = False,
) -> Executed | int:
    from runner.execute import run_sweep
    from runner.execute.terminal import ProgressLine, summary_table
    from runner.experiment import truth_kind, truth_words

    # Q6: the verdicts are set against real rows, a server's state or a cassette's count
    kinds = [truth_kind(upstream.model_dump()) for upstream in spec.upstreams]

    say(
        f"Experiment {spec.name}: {len(cells)} runs in the matrix"
        + (
            f" (of {len(all_cells)}, {part or 'filtered'})"
            if part or len(cells) != len(all_cells)
            else ""
        )
        + f"; storing in {db}"
        + (f"; running on {engine.describe()}" if engine is not None else "")
    )
    execute = {"execute": engine.execute} if engine is not None else {}
    stopped = None
    try:
        result = run_until_signalled(
            run_sweep(
                spec, cells, store, all_cells=all_cells, concurrency=concurrency, resume=resume,
                retry_errors=retry_errors, in_process=in_process,
                on_progress=ProgressLine(truth=truth_words(kinds, short=True)),
                keep_going=keep_going, **execute,
            )
        )  # fmt: skip
    except KeyboardInterrupt:
        stopped, how = interrupt_handled(), "Interrupted"
    except Terminated:
        stopped, how = EXIT_TERMINATED, "Terminated (SIGTERM)"
    if stopped is not None:  # V14: SIGTERM ends like Ctrl-C; the caller writes what ran
        say(f"\n{how}: {AFTER_A_STOP}")
        runs = store.load_runs(spec.name, columns=["run_id", "status"])
        return replace(_outcome(spec, cells, runs, retry_errors, quiet=True), interrupted=stopped)
    if result.resumed:
        say(f"{result.resumed} runs were already stored and were skipped (resume).")
    if engine is not None and getattr(engine.execute, "lost", 0):
        say(
            f"{engine.execute.lost} Ray tasks were lost with their node or worker; "
            "their runs were sent again."
        )
    if engine is not None and getattr(engine.execute, "crashed", 0):
        say(
            f"{engine.execute.crashed} worker processes ended during the sweep; the runs they "
            "held are stored as errors (--retry-errors runs them again)."
        )
    for line in result.blocked:
        say(f"not run: {line}")
    for line in result.gave_up:  # Q2
        say(line)
    if result.stopped_early and spec.stop_early is not None:
        say(
            f"{result.stopped_early} runs not started: their cell's duplicate rate was already "
            f"clear of {spec.stop_early.threshold:g} (stop_early)."
        )
    if result.budget_stop:
        say(
            f"Stopped early: the budget of ${spec.limits.budget_usd:g} is used up "
            f"(${result.cost_usd:.4f} spent)."
        )
    if result.unpriced and spec.limits.budget_usd is not None:
        say(
            f"{result.unpriced} runs have no known price: the budget counts only the runs "
            "whose cost is known."
        )
    runs = store.load_runs(spec.name)
    executed = _outcome(spec, cells, runs, retry_errors, result.stopped_early)
    print(terminal(summary_table(runs, truth_words(kinds)), lines=True))
    print(f"\nStored in {db}. Report: {report_command(db, spec.name)}")
    return executed


def report_command(db: Path, experiment: str) -> str:
    """Q4: the exact `report` command for this experiment's runs, ready to paste."""
    import shlex

    return shlex.join(["agent-harness", "report", "--db", str(db), "--experiment", experiment])


def _outcome(
    spec: ExperimentSpec,
    cells: list[RunCell],
    runs: Any,
    retried: bool,
    stopped: int = 0,
    *,
    quiet: bool = False,
) -> Executed:
    """Count the selected runs that failed or are missing, from the store: what it shows
    (redacted, V3) is what is printed, and runs failed in an earlier sweep count too. Runs
    that `stop_early` did not start (`stopped`) are not missing: the spec asked for that.
    `quiet`: count only (an interrupted sweep says one line)."""
    import polars as pl

    wanted = {c.run_id for c in cells}
    mine = runs.filter(pl.col("run_id").is_in(list(wanted)))
    errors = mine.filter(pl.col("status") == "error")
    if quiet:
        return Executed(spec, len(wanted), errors.height, len(wanted) - mine.height - stopped)
    for row in errors.head(SHOWN_ERRORS).iter_rows(named=True):
        say(f"run {row['run_id']} ({row['model']}) failed: {row['error']}")
    if errors.height:
        more = f"... {errors.height - SHOWN_ERRORS} more. " if errors.height > SHOWN_ERRORS else ""
        hint = "" if retried else " (`agent-harness run SPEC --retry-errors` runs them again)"
        say(f"{more}{errors.height} of {len(wanted)} runs failed to run{hint}.")
    missing = len(wanted) - mine.height - stopped
    if missing:
        say(f"{missing} of {len(wanted)} runs were not run.")
    return Executed(spec, len(wanted), errors.height, missing)


class Terminated(Exception):
    """SIGTERM arrived while the runs ran (V14): the sweep ends as Ctrl-C ends it."""


def run_until_signalled(work: Coroutine[Any, Any, T]) -> T:
    """asyncio.run(work), where SIGTERM cancels the work as Ctrl-C does (asyncio's own way for
    SIGINT: the main task is cancelled, so every run in flight is cancelled and every finished
    one committed) and then raises Terminated. The handler that was there before comes back."""
    previous = signal.getsignal(signal.SIGTERM)
    try:
        return asyncio.run(_stop_on_sigterm(work))
    finally:
        with contextlib.suppress(ValueError, TypeError):  # ValueError: not the main thread
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


async def _stop_on_sigterm(work: Coroutine[Any, Any, T]) -> T:
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    terminated = False

    def on_sigterm() -> None:
        nonlocal terminated
        if not terminated and main is not None:  # a second SIGTERM: the first one is under way
            terminated = True
            main.cancel()

    try:
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    except (NotImplementedError, RuntimeError, ValueError):  # no signals here: run as is
        return await work
    try:
        return await work
    except asyncio.CancelledError:
        if terminated and main is not None and main.uncancel() == 0:
            raise Terminated from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


class _RayEngine:
    """The connection to a Ray cluster and the `execute` step that sends runs to it."""

    def __init__(self, address: str | None, cpus_per_run: float) -> None:
        from runner.execute.ray_executor import RayExecutor, RayUnavailable, connect

        try:
            self.nodes, self.cpus = connect(address)
        except RayUnavailable as exc:
            raise RuntimeError(str(exc)) from exc
        self.execute = RayExecutor(cpus_per_run=cpus_per_run)

    def describe(self) -> str:
        from runner.execute.ray_executor import describe_cluster

        return f"Ray ({describe_cluster(self.nodes, self.cpus, self.execute.cpus_per_run)})"

    def close(self) -> None:
        from runner.execute.ray_executor import disconnect

        disconnect()


class _PoolEngine:
    """Worker processes on this machine (G3) and the `execute` step that sends runs to them."""

    def __init__(self, spec: ExperimentSpec, processes: int) -> None:
        from runner.execute.pool import ProcessPool

        self.execute = ProcessPool(spec, processes)

    def describe(self) -> str:
        return self.execute.describe()

    def close(self) -> None:
        self.execute.close()


def _ray_engine(address: str | None, cpus_per_run: float) -> _RayEngine:
    """Ray is an optional extra: a missing install is one line saying how to add it."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise RuntimeError("--executor ray needs Ray: pip install 'agent-harness[ray]'") from None
    return _RayEngine(address, cpus_per_run)

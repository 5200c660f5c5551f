"""`agent-harness run SPEC`: its flags, handed to the engine (runner/execute/experiment.py),
which runs the experiment and returns the exit code (V5; also in `--help`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

EXECUTOR_HELP = "local (this machine: this process or its worker processes, --processes) or ray (Ray tasks on any node of a cluster; pip install 'agent-harness\\[ray]')."
ADDRESS_HELP = "With --executor ray: HOST:PORT of a cluster's head, ray://HOST:PORT (Ray Client) or auto (a cluster `ray start` began on this machine). Default: RAY_ADDRESS, else such a cluster, else Ray started here for this sweep."
SHARD_HELP = "Run only part I of N of the matrix (e.g. 2/4): disjoint, stable parts for a CI matrix; join the stores with `agent-harness merge`."
CPUS_HELP = "With --executor ray: CPUs a run reserves on its node (below 1 puts several runs on one CPU, for runs that mostly wait on a model)."
KEEP_GOING_HELP = "Run every run even when a model's setup is broken; by default a model's remaining runs are not started after 3 runs of it in a row failed the same way (a missing or refused key, a refused connection, a model not found, an agent that did not start its MCP session)."
PROCESSES_HELP = "With --executor local: worker processes the runs are spread over (1: all in this process). Default: one per core when there are at least 40 runs per process, else 1. --concurrency stays the total in flight; this process alone writes the store."


def run_command(
    spec: Annotated[
        Path, typer.Argument(help="The experiment spec (YAML), e.g. experiments/example.yaml.")
    ],
    db: Annotated[
        Path,
        typer.Option(
            "--db",
            help="The DuckDB file runs are stored in (a file path: not :memory:, md:, a URL; an existing file must be a run store).",
        ),
    ] = Path("reports/runs.duckdb"),
    concurrency: Annotated[
        int | None,
        typer.Option(
            # the spec's bound, MAX_CONCURRENCY (not imported: `run --help` stays light)
            "--concurrency",
            min=1,
            max=1024,
            help="Runs at the same time (default: the spec's).",
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume/--no-resume", help="Skip runs already stored (default) or run all again."
        ),
    ] = True,
    retry_errors: Annotated[
        bool,
        typer.Option("--retry-errors", help="Also run again the runs stored with status=error."),
    ] = False,
    only: Annotated[
        list[str] | None,
        typer.Option(
            "--only",
            help="Run a slice: KEY=GLOB with KEY one of model, prompt, patch, upstream, scenario, conversation; repeatable (all must match).",
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="List the matrix and its size, and check each model's provider variables and local server (one line each); run nothing (the spec's bounds and os.environ/NAME references are checked as for a run).",
        ),
    ] = False,
    in_process: Annotated[
        str | None,
        typer.Option(
            "--in-process",
            help="auto (built-in upstreams in this process), always, or never (real proxy subprocesses).",
        ),
    ] = None,
    executor: Annotated[str, typer.Option("--executor", help=EXECUTOR_HELP)] = "local",
    address: Annotated[str | None, typer.Option("--address", help=ADDRESS_HELP)] = None,
    shard: Annotated[str | None, typer.Option("--shard", metavar="I/N", help=SHARD_HELP)] = None,
    cpus_per_run: Annotated[
        float, typer.Option("--cpus-per-run", min=0.01, max=64, help=CPUS_HELP)
    ] = 1.0,
    processes: Annotated[
        int | None, typer.Option("--processes", min=1, max=64, help=PROCESSES_HELP)
    ] = None,
    keep_going: Annotated[bool, typer.Option("--keep-going", help=KEEP_GOING_HELP)] = False,
) -> None:
    """Run an experiment: every cell of the matrix, each run judged by the proxy, stored in DuckDB.

    Each verdict is set against the built-in upstream's real rows; the closing summary counts the verdicts they contradict and lists those runs (a harness error, never the agent's).

    Exit codes: 0 every selected run ran (whatever its verdict or agreement); 1 bad input (flags, spec, files, an --only that selects no run); 3 a run failed to run or was not run (a model stopped after failures in a row included; every finished run is stored); 130 interrupted (Ctrl-C); 143 terminated (SIGTERM), stopped as Ctrl-C stops it.
    """
    from runner.execute.experiment import run_experiment

    raise typer.Exit(
        run_experiment(
            spec,
            db=db,
            concurrency=concurrency,
            resume=resume,
            retry_errors=retry_errors,
            only=only or [],
            dry_run=dry_run,
            in_process=in_process,
            executor=executor,
            address=address,
            shard=shard,
            cpus_per_run=cpus_per_run,
            processes=processes,
            keep_going=keep_going,
        )
    )

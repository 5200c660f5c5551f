"""`agent-harness`: the one command line for the harness and the runner."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli import harness_app

EXECUTOR_HELP = "local (this process) or ray (Ray tasks on any node of a cluster; pip install 'agent-harness\\[ray]')."
ADDRESS_HELP = "With --executor ray: HOST:PORT of a cluster's head, ray://HOST:PORT (Ray Client) or auto (a cluster `ray start` began on this machine). Default: RAY_ADDRESS, else such a cluster, else Ray started here for this sweep."
SHARD_HELP = "Run only part I of N of the matrix (e.g. 2/4): disjoint, stable parts for a CI matrix; join the stores with `agent-harness merge`."
CPUS_HELP = "With --executor ray: CPUs a run reserves on its node (below 1 puts several runs on one CPU, for runs that mostly wait on a model)."

app = harness_app(
    help=(
        "Measure whether LLM agents execute a write twice when an MCP tool call fails: a chaos "
        "proxy for MCP servers, a self-test, a demo server, and a batch experiment runner."
    )
)


@app.command("run")
def run_command(
    spec: Annotated[
        Path, typer.Argument(help="The experiment spec (YAML), e.g. experiments/example.yaml.")
    ],
    db: Annotated[Path, typer.Option("--db", help="The DuckDB file runs are stored in.")] = Path(
        "reports/runs.duckdb"
    ),
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency", min=1, max=256, help="Runs at the same time (default: the spec's)."
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
        bool, typer.Option("--dry-run", help="List the matrix and its size; run nothing.")
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
) -> None:
    """Run an experiment: every cell of the matrix, each run judged by the proxy, stored in DuckDB.

    Each verdict is set against the built-in upstream's real rows; the closing summary counts the verdicts they contradict and lists those runs (a harness error, never the agent's).

    Exit codes: 0 every selected run ran (whatever its verdict or agreement); 1 bad input (flags, spec, files, an --only that selects no run); 3 a run failed to run or was not run (every finished run is stored); 130 interrupted.
    """
    from runner.run_command import run_experiment

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
        )
    )


def main() -> None:
    """Console-script entry point."""
    app()


@app.command("report")
def report_command(
    db: Annotated[Path, typer.Option("--db", help="The run store to report on.")] = Path(
        "reports/runs.duckdb"
    ),
    out: Annotated[
        Path | None,
        typer.Option(
            "-o", "--out", help="Output file (default reports/NAME.html); - for standard output."
        ),
    ] = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help="html (one self-contained page) or md (tables for a pull-request comment).",
        ),
    ] = "html",
    experiment: Annotated[
        str | None,
        typer.Option("--experiment", help="Only this experiment (default: all in the store)."),
    ] = None,
    max_detail_runs: Annotated[
        int, typer.Option("--max-detail-runs", min=0, help="Runs shown in full in the drill-down.")
    ] = 200,
) -> None:
    """Render the stored runs as one static HTML page (or Markdown): tables, charts, every run.

    Exit codes: 0 written; 1 bad input (flags, store, output path).
    """
    from runner.report_commands import report

    raise typer.Exit(report(db, out, fmt, experiment, max_detail_runs))


@app.command("runs-needed")
def runs_needed_command(
    baseline: Annotated[
        float,
        typer.Option(
            "--baseline", min=0.0, max=1.0,
            help="Duplicate rate without the patch, 0..1 (e.g. 0.6 from a first small sweep).",
        ),
    ],
    target: Annotated[
        float,
        typer.Option(
            "--target", min=0.0, max=1.0,
            help="The duplicate rate with the patch you want to be able to detect, 0..1.",
        ),
    ],
    alpha: Annotated[
        float, typer.Option("--alpha", min=0.0, max=1.0, help="Significance level, two-sided.")
    ] = 0.05,
    power: Annotated[
        float,
        typer.Option("--power", min=0.0, max=1.0,
                     help="Wanted probability of detecting the difference."),
    ] = 0.8,
    runs: Annotated[
        int | None,
        typer.Option("--runs", min=1,
                     help="Instead: the power that this many runs per arm give."),
    ] = None,
) -> None:
    """Runs per patch arm needed to tell a baseline duplicate rate from a target rate (M3)."""
    from runner.plan_command import runs_needed_text

    try:
        text = runs_needed_text(baseline, target, alpha, power, runs)
    except ValueError as exc:
        typer.echo(f"agent-harness runs-needed: error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(text, nl=False)


@app.command("sweep")
def sweep_command(
    spec: Annotated[
        Path, typer.Argument(help="The experiment spec, e.g. experiments/nightly.yaml.")
    ],
    baseline: Annotated[
        Path | None,
        typer.Option(
            "--baseline", help="A run store (DuckDB) or an exported JSON summary to compare with."
        ),
    ] = None,
    db: Annotated[Path, typer.Option("--db", help="Where this sweep's runs are stored.")] = Path(
        "reports/runs.duckdb"
    ),
    junit: Annotated[
        Path | None, typer.Option("--junit", help="Write JUnit XML here (one test per cell group).")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("-o", "--out", help="HTML report (default reports/NAME.html).")
    ] = None,
    export_baseline: Annotated[
        Path | None,
        typer.Option(
            "--export-baseline", help="Also write this sweep's summary as a JSON baseline."
        ),
    ] = None,
    concurrency: Annotated[int | None, typer.Option("--concurrency", min=1, max=256)] = None,
    executor: Annotated[str, typer.Option("--executor", help=EXECUTOR_HELP)] = "local",
    address: Annotated[str | None, typer.Option("--address", help=ADDRESS_HELP)] = None,
    cpus_per_run: Annotated[
        float, typer.Option("--cpus-per-run", min=0.01, max=64, help=CPUS_HELP)
    ] = 1.0,
) -> None:
    """Regression sweep: run (resumably), compare duplicate rates with a baseline.

    Exit codes: 0 every run ran and no group regressed; 1 bad input; 2 a group's duplicate rate rose above its baseline interval; 3 a run failed to run or was not run (no claim of "no regression" then; JUnit shows those groups as errors); 130 interrupted.
    """
    from runner.report_commands import sweep

    raise typer.Exit(
        sweep(
            spec, baseline, db, junit, out, export_baseline, concurrency,
            executor=executor, address=address, cpus_per_run=cpus_per_run,
        )
    )  # fmt: skip


@app.command("merge")
def merge_command(
    stores: Annotated[
        list[Path], typer.Argument(help="Run stores to join, e.g. the stores of a sweep's shards.")
    ],
    out: Annotated[
        Path, typer.Option("-o", "--out", help="The store to merge into (created if missing).")
    ],
) -> None:
    """Join run stores of one experiment (e.g. --shard jobs of a CI matrix) into one.

    A run already in the output is not stored again; stores made with two versions of one
    experiment's spec are refused. Exit codes: 0 merged, 1 bad input or a conflict (the output
    is left as it was).
    """
    from runner.report_commands import merge

    raise typer.Exit(merge(stores, out))

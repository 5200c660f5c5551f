"""`agent-harness report`: the stored runs as one static HTML page or Markdown (R7).

Every file it writes goes through the one writer (V1, harness.base.outfile); the experiment
name that makes a default file name must be a plain name (V2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.base.errors import HarnessError
from runner.exits import EXIT_OK
from runner.exits import print_error as _error  # one line per problem


def report_command(
    db: Annotated[
        Path,
        typer.Option(
            "--db",
            help="The run store to report on: a file, read-only, never changed; it may come from elsewhere (views, macros and files that are not run stores are refused).",
        ),
    ] = Path("reports/runs.duckdb"),
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
        typer.Option(
            "--experiment",
            help="Only this experiment (default: all in the store); a name the store does not hold is an error that names the ones it holds.",
        ),
    ] = None,
    max_detail_runs: Annotated[
        int, typer.Option("--max-detail-runs", min=0, help="Runs shown in full in the drill-down.")
    ] = 200,
) -> None:
    """Render the stored runs as one static HTML page (or Markdown): tables, charts, every run.

    Exit codes: 0 written; 1 bad input (flags, store, an --experiment the store does not hold, output path).
    """
    raise typer.Exit(report(db, out, fmt, experiment, max_detail_runs))


def default_report_path(name: str, fmt: str) -> Path:
    """reports/NAME.html (or .md); V2: NAME must be a plain name, never a path."""
    from runner.experiment import name_problem

    problem = name_problem(name)
    if problem:
        raise HarnessError(f"experiment {name!r} cannot name a report file: {problem}")
    return Path("reports") / f"{name}.{'html' if fmt == 'html' else 'md'}"


def report(
    db: Path, out: Path | None, fmt: str, experiment: str | None, max_detail_runs: int
) -> int:
    """Write the HTML (or Markdown) report of a run store; print where it went."""
    from runner.experiment import name_problem
    from runner.html.report import write_report
    from runner.store.opening import name_problem as store_name_problem

    if fmt not in ("html", "md"):
        return _error("report", f"--format must be html or md, got {fmt!r}")
    if experiment is not None and (problem := name_problem(experiment)):
        return _error("report", f"--experiment {experiment!r}: {problem}")
    if problem := store_name_problem(db):  # V8: never a database in memory or a URL
        return _error("report", f"--db: {problem}")
    if not db.exists():
        return _error(
            "report",
            f"{db}: no run store here (run an experiment first: agent-harness run SPEC --db {db})",
        )
    try:
        target = out if out is not None else default_report_path(experiment or db.stem, fmt)
        path = write_report(
            db, target, fmt=fmt, experiment=experiment, max_detail_runs=max_detail_runs
        )
    except HarnessError as exc:
        return _error("report", str(exc))
    if path is not None:  # not when it went to stdout: that is the report's alone
        print(f"Report written to {target}")
    return EXIT_OK

"""`agent-harness sweep SPEC --baseline ...`: a regression sweep with JUnit XML for CI (R8)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from harness.base.errors import HarnessError
from harness.base.outfile import STDOUT, resolve, write_file
from harness.base.textsafe import terminal
from runner.cli.report import default_report_path, report
from runner.cli.run import (
    ADDRESS_HELP,
    CPUS_HELP,
    EXECUTOR_HELP,
    KEEP_GOING_HELP,
    PROCESSES_HELP,
)
from runner.exits import EXIT_ERROR, EXIT_OK, EXIT_REGRESSION, EXIT_RUNS_FAILED
from runner.exits import print_error as _error  # one line per problem

if TYPE_CHECKING:
    from runner.analysis.regression import Summary


def sweep_command(
    spec: Annotated[
        Path, typer.Argument(help="The experiment spec, e.g. experiments/nightly.yaml.")
    ],
    baseline: Annotated[
        Path | None,
        typer.Option(
            "--baseline",
            help="A run store (DuckDB, read-only, never changed) or an exported JSON summary to compare with; checked whole before any run.",
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
            "--export-baseline",
            help="Also write this sweep's summary as a JSON baseline (version 2: every kind's counts; version 1 files are still read).",
        ),
    ] = None,
    concurrency: Annotated[int | None, typer.Option("--concurrency", min=1, max=256)] = None,
    executor: Annotated[str, typer.Option("--executor", help=EXECUTOR_HELP)] = "local",
    address: Annotated[str | None, typer.Option("--address", help=ADDRESS_HELP)] = None,
    cpus_per_run: Annotated[
        float, typer.Option("--cpus-per-run", min=0.01, max=64, help=CPUS_HELP)
    ] = 1.0,
    processes: Annotated[
        int | None, typer.Option("--processes", min=1, max=64, help=PROCESSES_HELP)
    ] = None,
    keep_going: Annotated[bool, typer.Option("--keep-going", help=KEEP_GOING_HELP)] = False,
) -> None:
    """Regression sweep: run (resumably), compare each violation rate with a baseline.

    Compared per group, each with its own interval: runs with a duplicate execution, runs that re-sent before retry_after (RETRY_AFTER_VIOLATED), runs that never checked a timed-out write (UNVERIFIED_AFTER_TIMEOUT).

    Exit codes: 0 every run ran and no group regressed; 1 bad input; 2 a group's rate of one of these rose above its baseline interval; 3 a run failed to run or was not run (no claim of "no regression" then; JUnit shows those groups as errors); 130 interrupted (Ctrl-C), 143 terminated (SIGTERM): every finished run is stored and the JUnit XML covers the runs stored so far.
    """
    raise typer.Exit(
        sweep(
            spec, baseline, db, junit, out, export_baseline, concurrency,
            executor=executor, address=address, cpus_per_run=cpus_per_run, processes=processes,
            keep_going=keep_going,
        )
    )  # fmt: skip


def _check_outputs(**paths: Path | None) -> str | None:
    """Before the sweep runs for minutes: every output path usable (V1), none of them `-`."""
    for flag, path in paths.items():
        if path is None:
            continue
        if str(path) == STDOUT:
            return f"{flag} -: sweep prints its summary on standard output; give a file"
        try:
            resolve(path, flag, make_folders=True)
        except HarnessError as exc:
            return str(exc)
    return None


def _interrupted(code: int, base: Summary | None, db: Path, name: str, junit: Path | None) -> int:
    """V14: a sweep cut short by Ctrl-C or SIGTERM writes the JUnit XML of the runs it stored
    (what ran is compared; no HTML report, no baseline export from a partial sweep) and exits
    with the interruption's code."""
    from runner.analysis.regression import compare_to_baseline, junit_xml

    if junit is not None:
        try:
            write_file(junit, junit_xml(compare_to_baseline(base, db, name)), "JUnit XML file")
        except (HarnessError, ValueError) as exc:
            _error("sweep", str(exc))
        else:
            print(f"JUnit XML of the runs stored so far written to {junit}")
    return code


def sweep(
    spec: Path,
    baseline: Path | None,
    db: Path,
    junit: Path | None,
    out: Path | None,
    export_baseline: Path | None,
    concurrency: int | None,
    *,
    executor: str = "local",
    address: str | None = None,
    cpus_per_run: float = 1.0,
    processes: int | None = None,
    keep_going: bool = False,
) -> int:
    """Run (resumably), compare with the baseline, write JUnit + HTML.

    2 on a regression; else 3 when a run failed to run (never "no regression" then)."""
    from runner.analysis.regression import (
        compare_to_baseline,
        export_summary,
        junit_xml,
        load_summary,
    )
    from runner.execute.experiment import execute
    from runner.store import StoreError

    if baseline is not None and not baseline.exists():
        return _error(
            "sweep", f"{baseline}: baseline not found (a run store or an exported JSON summary)"
        )
    problem = _check_outputs(**{"--junit": junit, "-o": out, "--export-baseline": export_baseline})
    if problem:
        return _error("sweep", problem)
    try:  # V13: the whole baseline, before any run (V8: a store from elsewhere)
        base = load_summary(baseline) if baseline is not None else None
    except StoreError as exc:
        return _error("sweep", str(exc))
    executed = execute(
        spec, db=db, concurrency=concurrency, resume=True, retry_errors=False, only=[],
        dry_run=False, in_process=None, command="sweep", executor=executor, address=address,
        cpus_per_run=cpus_per_run, processes=processes, keep_going=keep_going,
    )  # fmt: skip
    if isinstance(executed, int):
        return executed
    name = executed.spec.name
    if executed.interrupted is not None:
        return _interrupted(executed.interrupted, base, db, name, junit)
    incomplete = not executed.complete
    try:
        if export_baseline is not None:
            text = json.dumps(export_summary(db, name), indent=2) + "\n"
            write_file(export_baseline, text, "baseline")
            print(f"Baseline summary written to {export_baseline}")
        if report(db, out or default_report_path(name, "html"), "html", name, 200) != 0:
            return EXIT_ERROR
        if baseline is None:
            print("No --baseline given: nothing to compare with.")
        result = compare_to_baseline(base, db, name)  # no baseline: every group new
        if junit is not None:
            write_file(junit, junit_xml(result), "JUnit XML file")
            print(f"JUnit XML written to {junit}")
    except (HarnessError, ValueError) as exc:
        return _error("sweep", str(exc))
    for group in result.groups if baseline is not None else []:
        mark = "REGRESSION" if group.regressed else ("ERROR" if group.new.errors else "ok")
        print(terminal(f"{mark:>10}  {group.label}: {group.describe()}"))
    for group in result.missing:
        print(terminal(
            f"{'missing':>10}  {group.model} | {group.upstream}, {group.conversation} | "
            f"{group.scenario} | patch {group.patch_arm}: in the baseline, not in this sweep"
        ))  # fmt: skip
    if baseline is None:
        return EXIT_RUNS_FAILED if incomplete else EXIT_OK
    if result.regressed:
        print(
            f"{len(result.regressions)} group(s) regressed: a rate (duplicate runs, re-sends "
            "before retry_after, timed-out writes never checked) lies above the baseline's 95% "
            "interval of that rate.",
            file=sys.stderr,
        )
        return EXIT_REGRESSION
    if incomplete:  # V5: runs that did not run cannot show a regression, so none is claimed
        print(
            f"Not compared in full: {executed.failed + executed.not_run} of {executed.selected} "
            "runs did not run (see above); no verdict on regressions.",
            file=sys.stderr,
        )
        return EXIT_RUNS_FAILED
    print("No regression against the baseline.")
    return EXIT_OK

"""`agent-harness report` and `agent-harness sweep` (R7, R8).

Every file they write goes through the one writer (V1, harness.base.outfile); the experiment name
that makes a default file name must be a plain name (V2). Exit codes as in run_command (V5).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harness.base.errors import HarnessError
from harness.base.outfile import STDOUT, resolve, write_file
from harness.base.textsafe import terminal
from runner.run_command import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_RUNS_FAILED,
    execute,
)
from runner.run_command import print_error as _error  # one line per problem


def default_report_path(name: str, fmt: str) -> Path:
    """reports/NAME.html (or .md); V2: NAME must be a plain name, never a path."""
    from runner.spec import name_problem

    problem = name_problem(name)
    if problem:
        raise HarnessError(f"experiment {name!r} cannot name a report file: {problem}")
    return Path("reports") / f"{name}.{'html' if fmt == 'html' else 'md'}"


def report(
    db: Path, out: Path | None, fmt: str, experiment: str | None, max_detail_runs: int
) -> int:
    """Write the HTML (or Markdown) report of a run store; print where it went."""
    from runner.html.report import write_report
    from runner.spec import name_problem

    if fmt not in ("html", "md"):
        return _error("report", f"--format must be html or md, got {fmt!r}")
    if experiment is not None and (problem := name_problem(experiment)):
        return _error("report", f"--experiment {experiment!r}: {problem}")
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
) -> int:
    """Run (resumably), compare with the baseline, write JUnit + HTML.

    2 on a regression; else 3 when a run failed to run (never "no regression" then)."""
    from runner.regression import compare_to_baseline, export_summary, junit_xml

    if baseline is not None and not baseline.exists():
        return _error(
            "sweep", f"{baseline}: baseline not found (a run store or an exported JSON summary)"
        )
    problem = _check_outputs(**{"--junit": junit, "-o": out, "--export-baseline": export_baseline})
    if problem:
        return _error("sweep", problem)
    executed = execute(
        spec, db=db, concurrency=concurrency, resume=True, retry_errors=False, only=[],
        dry_run=False, in_process=None, command="sweep", executor=executor, address=address,
        cpus_per_run=cpus_per_run,
    )  # fmt: skip
    if isinstance(executed, int):
        return executed
    name = executed.spec.name
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
        result = compare_to_baseline(baseline, db, name)  # no baseline: every group new
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
            f"{len(result.regressions)} group(s) regressed: their duplicate rate lies above "
            "the baseline's 95% interval.",
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


def merge(stores: list[Path], out: Path) -> int:
    """Merge run stores into `out`; print what each input added (G2)."""
    from runner.store import StoreError
    from runner.store.merge import merge_stores

    try:
        result = merge_stores(stores, out)
    except StoreError as exc:
        return _error("merge", str(exc))
    for path in stores:
        added, skipped = result.added[str(path)], result.skipped[str(path)]
        print(terminal(f"{path}: {added} runs added, {skipped} already there", lines=True))
    names = ", ".join(result.experiments) or "none"
    print(terminal(f"{out}: {result.runs} runs in all (experiments: {names})", lines=True))
    return 0

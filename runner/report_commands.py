"""`agent-harness report` and `agent-harness sweep` (R7, R8)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harness.atomicfile import write_atomically
from harness.errors import HarnessError


def _error(command: str, message: str) -> int:
    print(f"agent-harness {command}: error: {message}", file=sys.stderr)
    return 1


def report(
    db: Path, out: Path | None, fmt: str, experiment: str | None, max_detail_runs: int
) -> int:
    """Write the HTML (or Markdown) report of a run store; print where it went."""
    from runner.html.report import write_report

    if fmt not in ("html", "md"):
        return _error("report", f"--format must be html or md, got {fmt!r}")
    if not db.exists():
        return _error(
            "report",
            f"{db}: no run store here (run an experiment first: agent-harness run SPEC --db {db})",
        )
    if out is None:
        out = Path("reports") / (f"{experiment or db.stem}.{'html' if fmt == 'html' else 'md'}")
    try:
        path = write_report(
            db, out, fmt=fmt, experiment=experiment, max_detail_runs=max_detail_runs
        )
    except (HarnessError, OSError) as exc:
        return _error("report", str(exc))
    print(f"Report written to {path}")
    return 0


def sweep(
    spec: Path,
    baseline: Path | None,
    db: Path,
    junit: Path | None,
    out: Path | None,
    export_baseline: Path | None,
    concurrency: int | None,
) -> int:
    """Run (resumably), compare with the baseline, write JUnit + HTML; 2 on a regression."""
    from runner.regression import compare_to_baseline, export_summary, junit_xml
    from runner.run_command import run_experiment
    from runner.spec import load_spec

    if baseline is not None and not baseline.exists():
        return _error(
            "sweep", f"{baseline}: baseline not found (a run store or an exported JSON summary)"
        )
    code = run_experiment(
        spec, db=db, concurrency=concurrency, resume=True, retry_errors=False, only=[],
        dry_run=False, in_process=None,
    )  # fmt: skip
    if code != 0:
        return code
    try:
        name = load_spec(spec).name
        if export_baseline is not None:
            write_atomically(export_baseline, json.dumps(export_summary(db, name), indent=2) + "\n")
            print(f"Baseline summary written to {export_baseline}")
        if report(db, out or Path("reports") / f"{name}.html", "html", name, 200) != 0:
            return 1
        if baseline is None:
            print("No --baseline given: nothing to compare with.")
            return 0
        result = compare_to_baseline(baseline, db, name)
    except (HarnessError, OSError, ValueError) as exc:
        return _error("sweep", str(exc))
    if junit is not None:
        write_atomically(junit, junit_xml(result))
        print(f"JUnit XML written to {junit}")
    for group in result.groups:
        mark = "REGRESSION" if group.regressed else "ok"
        print(f"{mark:>10}  {group.label}: {group.describe()}")
    for group in result.missing:
        print(
            f"{'missing':>10}  {group.model} | {group.upstream}, {group.conversation} | "
            f"{group.scenario} | patch {group.patch_arm}: in the baseline, not in this sweep"
        )
    if result.regressed:
        print(
            f"{len(result.regressions)} group(s) regressed: their duplicate rate lies above "
            "the baseline's 95% interval.",
            file=sys.stderr,
        )
        return 2
    print("No regression against the baseline.")
    return 0

"""The entry point the CLI calls: a run store -> a report file on disk."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from harness.base.errors import HarnessError
from harness.base.outfile import write_file
from runner.analysis import analyse
from runner.analysis.details import DEFAULT_MAX_DETAIL_RUNS
from runner.html.markdown import render_markdown
from runner.html.render import render_html
from runner.store import Store
from runner.store.store import Experiments

ReportFormat = Literal["html", "md"]


def write_report(
    db_path: str | Path,
    out_path: str | Path,
    fmt: ReportFormat = "html",
    experiment: Experiments = None,
    max_detail_runs: int = DEFAULT_MAX_DETAIL_RUNS,
) -> Path | None:
    """Analyse the store at db_path (read-only) and write an HTML or Markdown report (V1: one
    writer; `-` is standard output); return the file written, None for standard output."""
    if fmt not in ("html", "md"):
        raise ValueError(f"unknown report format {fmt!r}: use html or md")
    with Store.open(db_path, read_only=True) as store:
        check_experiments(store, experiment, db_path)
        analysis = analyse(store, experiment, max_detail_runs=max_detail_runs)
    text = render_html(analysis) if fmt == "html" else render_markdown(analysis)
    return write_file(out_path, text, "report")


def check_experiments(store: Store, experiment: Experiments, db_path: str | Path) -> None:
    """Q4: an experiment the store does not hold is a mistake (a typo, another store), never an
    empty page; HarnessError naming the ones it holds."""
    wanted = [experiment] if isinstance(experiment, str) else list(experiment or ())
    known = store.experiment_names()
    unknown = [name for name in wanted if name not in known]
    if unknown:
        held = ", ".join(known) if known else "none"
        raise HarnessError(
            f"--experiment {unknown[0]}: {db_path} holds no such experiment; it holds: {held}"
        )

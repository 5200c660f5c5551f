"""What `agent-harness run` shows in the terminal: a progress line and a closing summary."""

from __future__ import annotations

import sys
import time
from typing import Any

import polars as pl

from runner.analysis.agreement import AGREEMENTS, AGREES, NO_CLAIM, NOT_CHECKABLE, UNKNOWN
from runner.analysis.labels import separate_param_sets
from runner.execute.sweep import Progress
from runner.experiment import ROW_WORDS
from runner.experiment.records import RunRecord


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    seconds = int(seconds)
    return f"{seconds // 60:02d}:{seconds % 60:02d}"


class ProgressLine:
    """One self-updating line on a terminal; a line every few seconds elsewhere (CI logs)."""

    def __init__(self, stream: Any = None, every_s: float = 5.0, truth: str = "real rows") -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.every_s = every_s
        self.truth = truth  # Q6: what the verdicts are set against, in short words
        self._last = 0.0

    def __call__(self, progress: Progress, record: RunRecord) -> None:
        now = time.monotonic()
        final = progress.done == progress.total
        if not self.tty and not final and now - self._last < self.every_s:
            return
        self._last = now
        width = 24
        filled = int(width * progress.done / max(progress.total, 1))
        line = (
            f"[{'#' * filled}{'.' * (width - filled)}] {progress.done}/{progress.total} runs"
            f"  failing to run: {progress.errors}  with a duplicate: {progress.duplicates}"
            f"  disagreeing with {self.truth}: {progress.disagreements}"
            f"  ETA {_clock(progress.eta_s)}"
        )
        if self.tty:
            self.stream.write("\r" + line + ("\n" if final else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def summary_table(runs: pl.DataFrame, truth: str = ROW_WORDS) -> str:
    """model x condition: runs, runs with a duplicate execution, verdict counts (issue 5);
    `truth`: what the verdicts are set against, in words (Q6: "real rows" only of rows)."""
    if runs.is_empty():
        return "No runs stored for this experiment."
    condition = pl.concat_str(
        [pl.col("upstream"), pl.col("scenario"), pl.col("conversation"), pl.col("patch_arm")],
        separator=" / ",
    )
    table = (
        separate_param_sets(runs)
        .with_columns(condition.alias("condition"))
        .group_by("model", "condition")
        .agg(
            pl.len().alias("runs"),
            (pl.col("status") == "error").sum().alias("errors"),
            pl.col("duplicate_found").fill_null(False).sum().alias("dup"),
            pl.col("real_duplicate").fill_null(False).sum().alias("real_dup"),
            (pl.col("verdict") == "PASS").sum().alias("PASS"),
            (pl.col("verdict") == "FAIL").sum().alias("FAIL"),
            (pl.col("verdict") == "NOT_TESTED").sum().alias("NOT_TESTED"),
            (pl.col("agreement") == "disagrees").sum().alias("disagree"),
            # Unknown (a model without a price) stays unknown, never a smaller sum.
            pl.when(pl.col("cost_usd").is_null().any())
            .then(None)
            .otherwise(pl.col("cost_usd").sum())
            .alias("cost"),
        )
        .sort("model", "condition")
    )
    truth_dups = "real dup rows" if truth == ROW_WORDS else "dup in truth"
    header = ("model", "upstream / scenario / conversation / patch", "runs", "with duplicate",
              truth_dups, "PASS", "FAIL", "NOT_TESTED", "errors", "disagree", "cost")  # fmt: skip
    rows = [
        (r["model"], r["condition"], str(r["runs"]), f"{r['dup']} of {r['runs'] - r['errors']}",
         str(r["real_dup"]), str(r["PASS"]), str(r["FAIL"]), str(r["NOT_TESTED"]), str(r["errors"]),
         str(r["disagree"]) if r["disagree"] else "-",
         "unknown" if r["cost"] is None else f"${r['cost']:.4f}")
        for r in table.iter_rows(named=True)
    ]  # fmt: skip
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join([*lines, "", *agreement_lines(runs, truth)])


# The most disagreeing runs the terminal lists one by one; the report lists them all.
_LISTED = 10


def agreement_lines(runs: pl.DataFrame, truth: str = ROW_WORDS) -> list[str]:
    """R10: how many verdicts the ground truth (`truth`, in words) contradicts, loud and first
    when any do."""
    from runner.analysis.analyse import disagreeing_runs

    ok = runs.filter(pl.col("status") != "error")
    counts = {s: int((ok.get_column("agreement") == s).sum()) for s in AGREEMENTS}
    tally = (
        f"{counts[AGREES]} agree, {counts[NO_CLAIM]} NOT_TESTED claim nothing, "
        f"{counts[NOT_CHECKABLE]} not checkable"
    )
    if counts[UNKNOWN]:  # T1: shown only when a truth probe failed
        tally += f", {counts[UNKNOWN]} unknown (the truth probe failed)"
    bad = disagreeing_runs(runs)
    if not bad:
        return [f"Verdicts against {truth}: 0 disagree, {tally}."]
    lines = [
        f"WARNING: {len(bad)} verdict{'s DISAGREE' if len(bad) != 1 else ' DISAGREES'} with "
        f"{truth}; {tally}:"
    ]
    for r in bad[:_LISTED]:
        lines.append(
            f"  {r['run_id'][:12]}  {r['model']}  {r['upstream']} / {r['scenario']} / "
            f"{r['conversation']} / {r['patch_arm']} #{r['repetition']}: {r['agreement_reason']}"
        )
    if len(bad) > _LISTED:
        lines.append(f"  ... and {len(bad) - _LISTED} more (every one is in the report).")
    return lines

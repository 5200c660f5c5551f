"""Per-cell honesty (M1) and duplicate attribution (M2) counts, joined onto the cell table.

Honesty: how many runs of a cell got each label (runs that failed to run have none).
Attribution: how many duplicate executions of a cell's runs had each cause.
"""

from __future__ import annotations

import polars as pl

from runner.analysis.attribution import ATTRIBUTIONS
from runner.analysis.model import CELL_KEYS
from runner.honesty import DISHONEST, LABELS

HONESTY_COLUMNS: dict[str, str] = {label: f"h_{label}" for label in LABELS}
ATTRIBUTION_COLUMNS: dict[str, str] = {cause: f"a_{cause}" for cause in ATTRIBUTIONS}

_OK = pl.col("status") != "error"


HONESTY_COUNTS = [*HONESTY_COLUMNS.values(), "h_judged", "h_dishonest", "h_errors"]


def honesty_counts() -> list[pl.Expr]:
    """Per group of runs: a count per honesty label, `h_judged`, `h_dishonest`, `h_errors`.

    `h_judged` counts the runs a judge labelled against real rows (not_measurable left out),
    `h_dishonest` those whose words misinformed the user (false success or failure, wrong
    details, unwarranted doubt), `h_errors` the runs whose judge failed.
    """
    label = pl.col("honesty_label")
    counts = [(_OK & (label == lab)).sum().alias(col) for lab, col in HONESTY_COLUMNS.items()]
    return [
        *counts,
        (_OK & label.is_not_null() & (label != "not_measurable")).sum().alias("h_judged"),
        (_OK & label.is_in(sorted(DISHONEST))).sum().alias("h_dishonest"),
        (_OK & label.is_null() & pl.col("honesty_judge").is_not_null()).sum().alias("h_errors"),
    ]


def add_honesty(cells: pl.DataFrame, runs: pl.DataFrame) -> pl.DataFrame:
    """The cells with the `honesty_counts` of their runs (Int64, 0 where none)."""
    per_cell = runs.group_by(list(CELL_KEYS)).agg(*honesty_counts())
    return _join(cells, per_cell, HONESTY_COUNTS)


def add_attribution(
    cells: pl.DataFrame, runs: pl.DataFrame, causes: pl.DataFrame
) -> pl.DataFrame:
    """The cells with a count of duplicate executions per cause (`a_<cause>`, `a_total`).

    `causes` has one row per (run_id, attribution) with its count `n`.
    """
    wide = (
        causes.join(runs.select("run_id", *CELL_KEYS, "status"), on="run_id")
        .filter(_OK)
        .group_by([*CELL_KEYS, "attribution"])
        .agg(n=pl.col("n").sum())
    )
    exprs = [
        pl.col("n").filter(pl.col("attribution") == cause).sum().alias(col)
        for cause, col in ATTRIBUTION_COLUMNS.items()
    ]
    per_cell = wide.group_by(list(CELL_KEYS)).agg(*exprs, a_total=pl.col("n").sum())
    return _join(cells, per_cell, [*ATTRIBUTION_COLUMNS.values(), "a_total"])


def _join(cells: pl.DataFrame, per_cell: pl.DataFrame, columns: list[str]) -> pl.DataFrame:
    joined = cells.join(per_cell, on=list(CELL_KEYS), how="left")
    return joined.with_columns(pl.col(c).fill_null(0).cast(pl.Int64) for c in columns)

"""Model labels that stay apart when a spec's model parameters were edited between sweeps.

A cell's id hashes the model's name and parameters (runner.experiment.matrix), so editing `params` makes
new cells and new runs; the store then holds runs of both parameter sets under one label. The
summaries group by label, so such a label gets the parameters that differ appended, e.g.
`qwen3-14b (timeout=300)` and `qwen3-14b (timeout=600)`: never one row mixing the two.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

_UNSET = "\0unset"  # no JSON value shows like this


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _suffixes(param_sets: list[str]) -> dict[str, str]:
    parsed = {raw: json.loads(raw or "{}") for raw in param_sets}
    keys = sorted({k for params in parsed.values() for k in params})
    differing = [k for k in keys if len({_show(p.get(k, _UNSET)) for p in parsed.values()}) > 1]
    return {
        raw: ", ".join(
            f"{k}={_show(params[k])}" if k in params else f"{k} unset" for k in differing
        )
        for raw, params in parsed.items()
    }


def separate_param_sets(runs: pl.DataFrame) -> pl.DataFrame:
    """The runs with `model` relabelled where one label was used with several parameter sets."""
    if runs.is_empty() or "model_params_json" not in runs.columns:
        return runs
    pairs = runs.select("model", "model_params_json").unique()
    shared = pairs.group_by("model").len().filter(pl.col("len") > 1).get_column("model")
    if shared.is_empty():
        return runs
    rows = []
    for label in shared.to_list():
        sets = pairs.filter(pl.col("model") == label).get_column("model_params_json").to_list()
        for raw, suffix in _suffixes(sets).items():
            rows.append({"model": label, "model_params_json": raw, "_label": f"{label} ({suffix})"})
    relabel = pl.DataFrame(rows, schema={"model": pl.String, "model_params_json": pl.String,
                                          "_label": pl.String})  # fmt: skip
    return (
        runs.join(relabel, on=["model", "model_params_json"], how="left", nulls_equal=True)
        .with_columns(pl.coalesce("_label", "model").alias("model"))
        .drop("_label")
    )

"""Read a run store and produce the whole Analysis the reports are rendered from (R6)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import polars as pl

from runner.analysis import cells as cell_mod
from runner.analysis import compare
from runner.analysis.agreement import AGREEMENTS
from runner.analysis.details import DEFAULT_MAX_DETAIL_RUNS, load_details, pick_detail_runs
from runner.analysis.labels import separate_param_sets
from runner.analysis.measures import add_attribution, honesty_counts
from runner.analysis.model import CELL_KEYS, CONDITION_KEYS, Analysis, ExperimentInfo, Overview
from runner.store import Store
from runner.store.rows import utc_naive
from runner.store.store import Experiments

# Error messages are grouped by their first line, cut here, so that one noisy provider error
# with a request id in it does not become a thousand groups.
_ERROR_LABEL_CHARS = 160
_KEYS = pl.col(CELL_KEYS)


def _error_groups(runs: pl.DataFrame) -> list[tuple[str, int]]:
    errors = runs.filter(pl.col("status") == "error")
    if errors.is_empty():
        return []
    label = (
        pl.col("error").fill_null("(no message)").str.strip_chars()
        .str.split("\n").list.first().str.slice(0, _ERROR_LABEL_CHARS)
    )
    grouped = (
        errors.group_by(label.alias("label")).agg(runs=pl.len())
        .sort(["runs", "label"], descending=[True, False])
    )
    return [(r[0], r[1]) for r in grouped.iter_rows()]


def _experiments(store: Store, runs: pl.DataFrame, experiment: Experiments) -> list[ExperimentInfo]:
    stored = {r["name"]: r for r in store.load_experiments(experiment).iter_rows(named=True)}
    per_run = runs.group_by("experiment").agg(
        runs=pl.len(), first=pl.col("started_at").min(), last=pl.col("started_at").max()
    )
    counts = {r["experiment"]: r for r in per_run.iter_rows(named=True)}
    infos = []
    for name in sorted(set(stored) | set(counts)):
        spec, seen = stored.get(name, {}), counts.get(name, {})
        infos.append(
            ExperimentInfo(
                name=name,
                spec_path=spec.get("spec_path"),
                first_started=spec.get("first_started") or seen.get("first"),
                last_started=spec.get("last_started") or seen.get("last"),
                runs=seen.get("runs", 0),
            )
        )
    return infos


def _overview(
    store: Store, runs: pl.DataFrame, experiment: Experiments, now: datetime
) -> Overview:
    # Only the two columns read of the runs that ran, not a copy of every column (N2).
    ok = runs.lazy().filter(pl.col("status") != "error").select("verdict", "agreement").collect()
    verdicts = dict(ok.group_by("verdict").agg(n=pl.len()).drop_nulls("verdict").iter_rows())
    common = {
        c: runs.get_column(c)[0]
        for c in CONDITION_KEYS
        if not runs.is_empty() and runs.get_column(c).n_unique() == 1
    }
    return Overview(
        experiments=_experiments(store, runs, experiment),
        generated_at=now,
        harness_versions=sorted(runs.get_column("harness_version").unique().to_list()),
        runs=runs.height,
        ok_runs=ok.height,
        error_runs=runs.height - ok.height,
        errors=_error_groups(runs),
        verdicts={v: verdicts.get(v, 0) for v in ("PASS", "FAIL", "NOT_TESTED")},
        first_started=runs.get_column("started_at").min(),
        last_finished=runs.get_column("finished_at").max(),
        common=common,
        tokens=int((runs["tokens_prompt"] + runs["tokens_completion"]).sum()),
        cost_usd=None if runs["cost_usd"].null_count() else float(runs["cost_usd"].sum()),
        honesty_judges=sorted(runs.get_column("honesty_judge").drop_nulls().unique().to_list()),
        agreement=_agreement_counts(ok),
        disagreeing=disagreeing_runs(runs),
        truth=_truth_kinds(store, experiment),
    )


def _truth_kinds(store: Store, experiment: Experiments) -> dict[str, str]:
    """Q6: upstream -> the kind of its ground truth, as the stored specs name it."""
    from runner.experiment import stored_truth_kinds

    kinds: dict[str, str] = {}
    for text in store.load_experiments(experiment).get_column("spec_text").to_list():
        kinds.update(stored_truth_kinds(text))
    return kinds


def _agreement_counts(ok: pl.DataFrame) -> dict[str, int]:
    counts = dict(ok.group_by("agreement").agg(n=pl.len()).drop_nulls("agreement").iter_rows())
    return {state: counts.get(state, 0) for state in AGREEMENTS}


def disagreeing_runs(runs: pl.DataFrame) -> list[dict[str, Any]]:
    """The runs whose verdict the real rows contradict (R10), in a stable order."""
    return (
        runs.filter((pl.col("status") != "error") & (pl.col("agreement") == "disagrees"))
        .sort("model", "upstream", "scenario", "conversation", "patch_arm", "repetition", "run_id")
        .select("run_id", "model", "prompt", "upstream", "scenario", "conversation",
                "patch_arm", "repetition", "verdict", "agreement_reason")
        .to_dicts()
    )  # fmt: skip


def analyse(
    store: Store,
    experiment: Experiments = None,
    max_detail_runs: int = DEFAULT_MAX_DETAIL_RUNS,
    now: datetime | None = None,
    pass_k: int = cell_mod.DEFAULT_PASS_K,
) -> Analysis:
    """Aggregate the stored runs (all, or of some experiments) into tables and drill-downs."""
    # model_params_json is bulk text, but the labels need it: edited params stay apart. Every
    # step below sorts what it shows, so the runs come in DuckDB's order, unsorted (N2).
    loaded = store.load_runs(experiment, columns=cell_mod.ANALYSED_COLUMNS, ordered=False)
    # The cell keys as categoricals while the runs are grouped, joined and sorted on them
    # (N2: the bench's 100,000 runs 0.31-0.35 -> 0.24-0.28 s of CPU); they compare and sort
    # as their text does, and the cells come out with text columns again.
    runs = separate_param_sets(loaded).with_columns(_KEYS.cast(pl.Categorical))
    # The honesty counts in the cells' own pass over the runs (N2; what add_honesty adds).
    parts = cell_mod.varying_condition_parts(runs)
    cells = cell_mod.cell_table(runs, parts, pass_k, counts=honesty_counts())
    cells = add_attribution(cells, runs, store.duplicate_causes(experiment))
    picked = pick_detail_runs(runs, cells, max_detail_runs)
    cells = cells.with_columns(_KEYS.cast(pl.String))
    texts = store.patch_texts(experiment).to_dicts()
    return Analysis(
        overview=_overview(store, runs, experiment, utc_naive(now or datetime.now(UTC))),
        cells=cells,
        before_after=compare.before_after(cells, runs),
        patch_arms=compare.patch_arms(cells),
        patch_texts=texts,
        details=load_details(store, picked),
        details_left_out=runs.height - picked.height,
        pass_k=pass_k,
    )

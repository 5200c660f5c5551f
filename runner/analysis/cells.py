"""Per-cell aggregation and the before/after-patch table, as polars expressions (R6)."""

from __future__ import annotations

import polars as pl

from runner.analysis.model import (
    CELL_KEYS,
    CONDITION_KEYS,
    ROW_KEYS,
    UNPATCHED,
    ArmResult,
    BeforeAfterRow,
    Count,
)
from runner.analysis.stats import fisher_exact, wilson_exprs
from runner.store.schema import RUNS

# The run columns the aggregation reads: every column but the bulk text ones (report JSON,
# transcript-sized text), which only the drill-down reads; this keeps 100,000 runs fast (N2).
RUN_COLUMNS = RUNS.names(bulk=False)

_OK = pl.col("status") != "error"


def varying_condition_parts(runs: pl.DataFrame) -> list[str]:
    """The condition columns that differ between runs; upstream and conversation when none do.

    The overview names the parts every run shares, so the tables need not repeat them.
    """
    varying = [c for c in CONDITION_KEYS if runs.get_column(c).n_unique() > 1]
    return varying or ["upstream", "conversation"]


def condition_expr(parts: list[str]) -> pl.Expr:
    """A readable condition label from the varying parts, e.g. "booking, follow-up 'retry'"."""
    # Order for reading: what is served (upstream), what is asked (conversation), how (prompt).
    order = [c for c in ("upstream", "conversation", "prompt") if c in parts]
    labelled = [
        pl.concat_str(pl.lit("prompt "), pl.col(c)) if c == "prompt" else pl.col(c)
        for c in order
    ]
    return pl.concat_str(labelled, separator=", ").alias("condition")


def _arm_order(arm: pl.Expr) -> pl.Expr:
    return pl.when(arm == UNPATCHED).then(0).when(arm == "auto").then(1).otherwise(2).cast(pl.Int8)


def cell_table(runs: pl.DataFrame, condition_parts: list[str]) -> pl.DataFrame:
    """One row per cell group with counts, duplicate rate, Wilson interval and means.

    Error runs count in `runs` and `errors` only; every rate is over the runs that ran (`n`).
    """
    verdict = pl.col("verdict")
    low, high = wilson_exprs("dup_k", "n")
    table = (
        runs.lazy()
        .group_by(list(CELL_KEYS))
        .agg(
            runs=pl.len(),
            errors=(~_OK).sum(),
            n=(_OK & pl.col("duplicate_found").is_not_null()).sum(),
            dup_k=(_OK & pl.col("duplicate_found").fill_null(False)).sum(),
            real_n=(_OK & pl.col("real_duplicate").is_not_null()).sum(),
            real_k=(_OK & pl.col("real_duplicate").fill_null(False)).sum(),
            # R10: verdicts set against the real rows (runner.execute.agreement).
            checked=(_OK & pl.col("agreement").is_in(["agrees", "disagrees"])).sum(),
            disagreements=(_OK & (pl.col("agreement") == "disagrees")).sum(),
            passed=(_OK & (verdict == "PASS")).sum(),
            failed=(_OK & (verdict == "FAIL")).sum(),
            not_tested=(_OK & (verdict == "NOT_TESTED")).sum(),
            mean_score=pl.col("score_overall").filter(_OK).mean(),
            tokens=(pl.col("tokens_prompt") + pl.col("tokens_completion")).sum(),
            cost_usd=pl.col("cost_usd").sum(),
            mean_latency_ms=pl.col("latency_ms").filter(_OK).mean(),
        )
        .with_columns(
            condition_expr(condition_parts),
            rate=pl.when(pl.col("n") > 0).then(pl.col("dup_k") / pl.col("n")),
            ci_low=low,
            ci_high=high,
            real_rate=pl.when(pl.col("real_n") > 0).then(pl.col("real_k") / pl.col("real_n")),
        )
        .sort(["model", "condition", "scenario", _arm_order(pl.col("patch_arm")), "patch_arm"])
        .with_row_index("cell_no", offset=1)
        .collect()
    )
    return table


def patch_arms(cells: pl.DataFrame) -> list[str]:
    """The patched arms in column order: "auto" first, then named patch files."""
    arms = cells.filter(pl.col("patch_arm") != UNPATCHED).get_column("patch_arm").unique()
    return sorted(arms.to_list(), key=lambda a: (a != "auto", a))


def before_after(cells: pl.DataFrame) -> list[BeforeAfterRow]:
    """One row per model x condition x scenario: unpatched k of n, then each patched arm."""
    arms = patch_arms(cells)
    keys = [*ROW_KEYS, "condition"]
    base = cells.filter(pl.col("patch_arm") == UNPATCHED).select(
        *keys, base_k=pl.col("dup_k"), base_n=pl.col("n"), base_real_k=pl.col("real_k"),
        base_real_n=pl.col("real_n"),
    )
    treated = cells.filter(pl.col("patch_arm") != UNPATCHED).select(
        *keys, "patch_arm", "dup_k", "n", "real_k", "real_n"
    )
    # Every row that has any arm; the long form carries one (row, arm) pair per line.
    rows = (
        pl.concat([base.select(keys), treated.select(keys)])
        .unique()
        .sort(["model", "condition", "scenario"])
    )
    long = rows.join(base, on=keys, how="left").join(treated, on=keys, how="left")
    by_row: dict[tuple, BeforeAfterRow] = {}
    # Python runs over the aggregated rows here (a few per cell), never over runs: Fisher's
    # test needs exact integer arithmetic per table.
    for rec in long.iter_rows(named=True):
        key = tuple(rec[k] for k in keys)
        row = by_row.get(key)
        if row is None:
            unpatched = Count(rec["base_k"], rec["base_n"]) if rec["base_n"] is not None else None
            row = BeforeAfterRow(
                model=rec["model"], prompt=rec["prompt"], upstream=rec["upstream"],
                conversation=rec["conversation"], scenario=rec["scenario"],
                condition=rec["condition"], unpatched=unpatched,
                arms=dict.fromkeys(arms),
                unpatched_real=_real(rec["base_real_k"], rec["base_real_n"]),
            )
            by_row[key] = row
        if rec["patch_arm"] is None:
            continue
        count = Count(rec["dup_k"], rec["n"])
        p_value = None
        if row.unpatched is not None and row.unpatched.n and count.n:
            u = row.unpatched
            p_value = fisher_exact(u.k, u.n - u.k, count.k, count.n - count.k)
        row.arms[rec["patch_arm"]] = ArmResult(count, p_value, _real(rec["real_k"], rec["real_n"]))
    return list(by_row.values())


def _real(k: int | None, n: int | None) -> Count | None:
    """Runs with a real duplicate row, where the upstream could tell for any run (else None)."""
    return Count(k, n) if n else None

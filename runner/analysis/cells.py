"""Per-cell aggregation as polars expressions: counts, rates, intervals, pass^k (R6, M3)."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from runner.analysis.model import CELL_KEYS, CONDITION_KEYS, UNPATCHED
from runner.analysis.stats import wilson_exprs
from runner.store.schema import RUNS

# The run columns the aggregation reads: every column but the bulk text ones (report JSON,
# transcript-sized text), which only the drill-down reads; this keeps 100,000 runs fast (N2).
RUN_COLUMNS = RUNS.names(bulk=False)

# What `analyse` reads of each run (N2: a third fewer columns than RUN_COLUMNS to load and
# convert for 100,000 runs): the cell keys and labels, the counts, the overview's fields and
# the disagreeing runs' sentences. A column used without being listed here fails loudly.
ANALYSED_COLUMNS = (
    "run_id", "experiment", "repetition", "seed", *CELL_KEYS, "model_params_json", "status",
    "error", "verdict", "score_overall", "duplicate_found", "real_duplicate", "agreement",
    "agreement_reason", "tokens_prompt", "tokens_completion", "cost_usd", "latency_ms",
    "started_at", "finished_at", "harness_version", "honesty_label", "honesty_judge",
)

_OK = pl.col("status") != "error"

# A safe run (pass^k's "pass"): it ran to the end, with no duplicate execution (neither seen by
# the harness nor in the upstream's real rows) and no violation (no FAIL, so no
# RETRY_AFTER_VIOLATED either). A NOT_TESTED run without a duplicate counts as safe: nothing
# was executed twice. Only runs with a known duplicate_found count, like the duplicate rate.
SAFE = (
    _OK
    & pl.col("duplicate_found").is_not_null()
    & ~pl.col("duplicate_found")
    & ~pl.col("real_duplicate").fill_null(False)
    & (pl.col("verdict") != "FAIL").fill_null(True)
)

DEFAULT_PASS_K = 4  # tau-bench's headline figures are pass^1 and pass^4 (issue 15)


def pass_k_expr(k: int, safe: str = "safe_k", n: str = "n") -> pl.Expr:
    """pass^k = C(safe, k) / C(n, k) as a polars expression; null when n < k."""
    value = pl.lit(1.0)
    for i in range(k):
        value = value * ((pl.col(safe) - i).clip(lower_bound=0) / (pl.col(n) - i))
    return pl.when(pl.col(n) >= k).then(value)


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


def cell_table(
    runs: pl.DataFrame,
    condition_parts: list[str],
    pass_k: int = DEFAULT_PASS_K,
    counts: Sequence[pl.Expr] = (),
) -> pl.DataFrame:
    """One row per cell group with counts, duplicate rate, Wilson interval, pass^k and means.

    Error runs count in `runs` and `errors` only; every rate is over the runs that ran (`n`).
    `counts`: more per-cell counts computed in the same pass (N2), as Int64 columns at the end
    (`measures.honesty_counts`: what `add_honesty` would add).
    """
    verdict = pl.col("verdict")
    low, high = wilson_exprs("dup_k", "n")
    table = (
        runs.lazy()
        .group_by(list(CELL_KEYS))
        .agg(
            *counts,
            runs=pl.len(),
            errors=(~_OK).sum(),
            n=(_OK & pl.col("duplicate_found").is_not_null()).sum(),
            dup_k=(_OK & pl.col("duplicate_found").fill_null(False)).sum(),
            safe_k=SAFE.sum(),
            real_n=(_OK & pl.col("real_duplicate").is_not_null()).sum(),
            real_k=(_OK & pl.col("real_duplicate").fill_null(False)).sum(),
            # R10: verdicts set against the real rows (runner.analysis.agreement).
            checked=(_OK & pl.col("agreement").is_in(["agrees", "disagrees"])).sum(),
            disagreements=(_OK & (pl.col("agreement") == "disagrees")).sum(),
            passed=(_OK & (verdict == "PASS")).sum(),
            failed=(_OK & (verdict == "FAIL")).sum(),
            not_tested=(_OK & (verdict == "NOT_TESTED")).sum(),
            mean_score=pl.col("score_overall").filter(_OK).mean(),
            tokens=(pl.col("tokens_prompt") + pl.col("tokens_completion")).sum(),
            # One run of unknown cost makes the cell's cost unknown, not a smaller sum.
            cost_usd=pl.when(pl.col("cost_usd").is_null().any())
            .then(None)
            .otherwise(pl.col("cost_usd").sum()),
            mean_latency_ms=pl.col("latency_ms").filter(_OK).mean(),
        )
        .with_columns(
            condition_expr(condition_parts),
            rate=pl.when(pl.col("n") > 0).then(pl.col("dup_k") / pl.col("n")),
            ci_low=low,
            ci_high=high,
            real_rate=pl.when(pl.col("real_n") > 0).then(pl.col("real_k") / pl.col("real_n")),
            pass_k=pass_k_expr(pass_k),
        )
        .sort(["model", "condition", "scenario", _arm_order(pl.col("patch_arm")), "patch_arm"])
        .with_row_index("cell_no", offset=1)
    )
    if counts:
        extra = [expr.meta.output_name() for expr in counts]
        table = table.select(
            pl.exclude(extra), *(pl.col(name).fill_null(0).cast(pl.Int64) for name in extra)
        )
    return table.collect()

"""The before/after-patch table: each patched arm against the unpatched runs (R6, M3).

Which test compares two arms:

- McNemar's exact test on pairs of runs, where the pairing is real: both runs of a pair
  (same repetition, same seed) faced the same random draws. The runner gives the patch arms
  of one repetition the same seed, and a chaos scenario draws its fault plan from it, so in
  a chaos scenario both runs of a pair meet the same faults at the same calls. Only with at
  least MIN_MCNEMAR_PAIRS pairs: with fewer, Fisher is the stronger test even then.
- Fisher's exact test on the two arms as independent samples everywhere else. Under a fixed
  fault (F1..F5) the shared seed decides nothing both runs share: a sampled provider is not
  made deterministic by a seed (OpenAI calls its seed best effort, others ignore it) and the
  patch changes the prompt anyway. Such a pairing is nominal; McNemar would still be a valid
  test of equal rates but would use only the discordant pairs (5 of 5 against 0 of 5 gives
  McNemar p = 0.0625, Fisher p = 0.008), so the arms are compared as what they are.

Holm's correction then runs over the comparisons of the table (rows x patched arms) that
could come out significant at all (see `can_reject`).
"""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from runner.analysis.model import (
    ROW_KEYS,
    UNPATCHED,
    ArmResult,
    BeforeAfterRow,
    Count,
)
from runner.analysis.stats import fisher_exact, holm, mcnemar_exact

# McNemar needs most runs in a pair: with fewer (runs that failed to run, a store made before
# seeds were shared), Fisher's test on all runs says more than McNemar's on the few pairs.
MIN_PAIRED_SHARE = 0.5
# And enough pairs: McNemar cannot reject at all with 5 pairs that differ, and below about 20
# pairs Fisher detects a patch's effect more often even when the pairs share their faults
# (bench/sim_paired_tests.py: 0.6 -> 0.2 at 10 pairs, Fisher 19 %, McNemar 17 %; at 20
# pairs McNemar 87 %, Fisher 68 %). Decided by the design, never by the outcomes.
MIN_MCNEMAR_PAIRS = 20

_OK = (pl.col("status") != "error") & pl.col("duplicate_found").is_not_null()


def pairing_is_real(scenario: str) -> bool:
    """Whether both runs of a seed pair share a random draw that shapes them (chaos faults)."""
    return scenario.startswith("chaos")


def patch_arms(cells: pl.DataFrame) -> list[str]:
    """The patched arms in column order: "auto" first, then named patch files."""
    arms = cells.filter(pl.col("patch_arm") != UNPATCHED).get_column("patch_arm").unique()
    return sorted(arms.to_list(), key=lambda a: (a != "auto", a))


def seed_pairs(runs: pl.DataFrame) -> pl.DataFrame:
    """Per row and patched arm: pairs of runs with the same repetition and seed, and how many
    had a duplicate only without the patch (b) or only with it (c)."""
    if "seed" not in runs.columns:
        return pl.DataFrame(schema={**{k: pl.String for k in (*ROW_KEYS, "patch_arm")},
                                    "pairs": pl.UInt32, "b": pl.UInt32, "c": pl.UInt32})
    ok = runs.lazy().filter(_OK & pl.col("seed").is_not_null())
    keys = [*ROW_KEYS, "repetition", "seed"]
    base = ok.filter(pl.col("patch_arm") == UNPATCHED).select(
        *keys, before=pl.col("duplicate_found")
    )
    treated = ok.filter(pl.col("patch_arm") != UNPATCHED).select(
        *keys, "patch_arm", after=pl.col("duplicate_found")
    )
    return (
        base.join(treated, on=keys)
        .group_by([*ROW_KEYS, "patch_arm"])
        .agg(
            pairs=pl.len(),
            b=(pl.col("before") & ~pl.col("after")).sum(),
            c=(~pl.col("before") & pl.col("after")).sum(),
        )
        .collect()
    )


def _compare(row: BeforeAfterRow, count: Count, pair: dict | None) -> ArmResult:
    base = row.unpatched
    if base is None or not base.n or not count.n:
        return ArmResult(count, None)
    pairs = pair["pairs"] if pair else 0
    enough = pairs >= max(MIN_MCNEMAR_PAIRS, MIN_PAIRED_SHARE * min(base.n, count.n))
    if pairing_is_real(row.scenario) and enough:
        b, c = pair["b"], pair["c"]  # type: ignore[index]
        return ArmResult(count, mcnemar_exact(b, c), test="mcnemar", pairs=pairs,
                         discordant=(b, c))
    p_value = fisher_exact(base.k, base.n - base.k, count.k, count.n - count.k)
    return ArmResult(count, p_value, test="fisher", pairs=pairs)


def before_after(cells: pl.DataFrame, runs: pl.DataFrame) -> list[BeforeAfterRow]:
    """One row per model x condition x scenario: unpatched k of n, then each patched arm,
    tested as the module docstring says, with Holm-adjusted p-values across the table."""
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
    pairs = {
        tuple(p[k] for k in (*ROW_KEYS, "patch_arm")): p
        for p in seed_pairs(runs).iter_rows(named=True)
    }
    by_row: dict[tuple, BeforeAfterRow] = {}
    # Python runs over the aggregated rows here (a few per cell), never over runs: the exact
    # tests need integer arithmetic per table.
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
        pair = pairs.get((*(rec[k] for k in ROW_KEYS), rec["patch_arm"]))
        result = _compare(row, Count(rec["dup_k"], rec["n"]), pair)
        row.arms[rec["patch_arm"]] = replace(result, real=_real(rec["real_k"], rec["real_n"]))
    table = list(by_row.values())
    _adjust(table, arms)
    return table


def can_reject(row: BeforeAfterRow, result: ArmResult) -> bool:
    """Whether the comparison could come out significant at all, given its margins.

    Both tests are conditional: Fisher's on the total of runs with a duplicate, McNemar's on
    the number of discordant pairs. With no duplicate in either arm, or nothing else (Fisher),
    or no discordant pair (McNemar), only one table is possible and p is 1 whatever happened.
    """
    if result.p_value is None or row.unpatched is None:
        return False
    if result.test == "mcnemar":
        return result.discordant is not None and sum(result.discordant) > 0
    events = row.unpatched.k + result.count.k
    return 0 < events < row.unpatched.n + result.count.n


def _real(k: int | None, n: int | None) -> Count | None:
    """Runs with a real duplicate row, where the upstream could tell for any run (else None)."""
    return Count(k, n) if n else None


def _adjust(table: list[BeforeAfterRow], arms: list[str]) -> None:
    """Holm over the table's comparisons that can reject, stored next to the raw p-values.

    A comparison that cannot reject (see `can_reject`) is left out of the family, Tarone's
    argument in its simplest form: given its margins it rejects with probability 0, so the
    family-wise error rate of the others stays at most alpha. Its Holm p is its raw p, 1.
    """
    slots = [
        (row, arm, result) for row in table for arm in arms
        if (result := row.arms[arm]) is not None
    ]
    family = [i for i, (row, _, result) in enumerate(slots) if can_reject(row, result)]
    adjusted = dict(zip(family, holm([slots[i][2].p_value for i in family]), strict=True))
    for i, (row, arm, result) in enumerate(slots):
        row.arms[arm] = replace(result, p_holm=adjusted.get(i, result.p_value))

"""Small exact statistics for run counts: Wilson score intervals and Fisher's exact test.

Pure Python on purpose: the package must not depend on scipy for two formulas.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import polars as pl

# The 97.5 % quantile of the standard normal distribution: a two-sided 95 % interval.
Z95 = 1.959963984540054

Alternative = Literal["two-sided", "less", "greater"]

# R's fisher.test treats tables whose probability is within this relative tolerance of the
# observed one as "as extreme"; without it, floating-point noise drops tied tables.
_RELATIVE_TOLERANCE = 1 + 1e-7


@dataclass(frozen=True)
class Interval:
    """A closed interval [low, high] for a proportion."""

    low: float
    high: float


def wilson_interval(k: int, n: int, z: float = Z95) -> Interval | None:
    """Wilson score interval for k successes in n trials; None when n is 0."""
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return None
    p = k / n
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denominator
    # At k=0 (k=n) the exact bound is 0 (1); the formula only gets there up to rounding.
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == n else min(1.0, centre + half)
    return Interval(low, high)


def wilson_exprs(k: str, n: str, z: float = Z95) -> tuple[pl.Expr, pl.Expr]:
    """The Wilson bounds as polars expressions over count columns k and n (null when n is 0)."""
    kk = pl.col(k).cast(pl.Float64)
    nn = pl.col(n).cast(pl.Float64)
    p = kk / nn
    z2 = z * z
    denominator = 1 + z2 / nn
    centre = (p + z2 / (2 * nn)) / denominator
    half = z * (p * (1 - p) / nn + z2 / (4 * nn * nn)).sqrt() / denominator
    low = (
        pl.when(pl.col(n) <= 0).then(None)
        .when(pl.col(k) == 0).then(0.0)
        .otherwise(pl.max_horizontal(centre - half, pl.lit(0.0)))
    )
    high = (
        pl.when(pl.col(n) <= 0).then(None)
        .when(pl.col(k) == pl.col(n)).then(1.0)
        .otherwise(pl.min_horizontal(centre + half, pl.lit(1.0)))
    )
    return low, high


def _log_choose(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def fisher_exact(a: int, b: int, c: int, d: int, alternative: Alternative = "two-sided") -> float:
    """Fisher's exact test p-value for the 2x2 table [[a, b], [c, d]].

    "less" and "greater" test the odds ratio against 1 as R's fisher.test does: "less" is the
    probability of a top-left count at most a, "greater" of one at least a, with all margins
    fixed (hypergeometric distribution).
    """
    if min(a, b, c, d) < 0:
        raise ValueError(f"table counts must be non-negative, got {(a, b, c, d)}")
    row1, col1, total = a + b, a + c, a + b + c + d
    lo, hi = max(0, col1 - (total - row1)), min(row1, col1)
    if lo == hi:
        return 1.0
    log_denominator = _log_choose(total, col1)

    def probability(x: int) -> float:
        log_p = _log_choose(row1, x) + _log_choose(total - row1, col1 - x) - log_denominator
        return math.exp(log_p)

    if alternative == "less":
        p = sum(probability(x) for x in range(lo, a + 1))
    elif alternative == "greater":
        p = sum(probability(x) for x in range(a, hi + 1))
    elif alternative == "two-sided":
        observed = probability(a)
        p = sum(
            q for q in (probability(x) for x in range(lo, hi + 1))
            if q <= observed * _RELATIVE_TOLERANCE
        )
    else:
        raise ValueError(f"unknown alternative {alternative!r}")
    return min(1.0, p)

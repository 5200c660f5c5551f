"""Small exact statistics for run counts: Wilson intervals, Fisher, McNemar, Holm, pass^k.

Pure Python on purpose: the package must not depend on scipy for a few formulas.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # polars only where an expression is built: `runs-needed` never loads it
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
    import polars as pl

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


_LOG_FACTORIALS = [0.0]  # log(i!) = lgamma(i + 1) for i = 0..; grown as a test needs


def _log_factorials(n: int) -> list[float]:
    """log(i!) for every i up to at least n, each exactly `math.lgamma(i + 1)` (N2: the report's
    200 Fisher tests called lgamma 86,000 times). A larger table replaces the shared one."""
    global _LOG_FACTORIALS
    table = _LOG_FACTORIALS
    if len(table) <= n:
        table = [math.lgamma(i + 1) for i in range(max(n + 1, 2 * len(table)))]
        _LOG_FACTORIALS = table
    return table


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
    lf = _log_factorials(total)
    log_denominator = lf[total] - lf[col1] - lf[total - col1]
    row2 = total - row1

    def probability(x: int) -> float:
        # log C(row1, x) + log C(row2, col1 - x) - log C(total, col1), summed in that order
        first = lf[row1] - lf[x] - lf[row1 - x]
        log_p = first + (lf[row2] - lf[col1 - x] - lf[row2 - col1 + x]) - log_denominator
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


def pass_hat_k(c: int, n: int, k: int) -> float:
    """pass^k: the unbiased estimate, from c safe runs of n, that k runs in a row are all safe.

    tau-bench's estimator C(c, k) / C(n, k): the chance that k runs drawn without replacement
    from the n observed are all safe. Its expectation over c ~ Binomial(n, p) is exactly p^k
    for every k <= n, which the plug-in (c/n)^k is not.
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got c={c}, n={n}, k={k}")
    return math.comb(c, k) / math.comb(n, k)


def pass_hat_curve(c: int, n: int) -> list[float]:
    """pass^k for k = 1..n (empty when n is 0), by the running product of (c-i)/(n-i)."""
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got c={c}, n={n}")
    curve, value = [], 1.0
    for i in range(n):
        value *= max(c - i, 0) / (n - i)
        curve.append(value)
    return curve


def mcnemar_exact(b: int, c: int) -> float:
    """Exact (binomial) McNemar test, two-sided, from the discordant pairs of a paired table.

    b: pairs with the event only in the first arm, c: only in the second. Under equal rates a
    discordant pair falls either way with probability 1/2, so the p-value is twice the smaller
    tail of Binomial(b + c, 1/2), at most 1 (R: binom.test(b, b + c), exact2x2::mcnemar.exact).
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be non-negative, got {(b, c)}")
    m = b + c
    if m == 0:
        return 1.0
    tail = sum(math.comb(m, i) for i in range(min(b, c) + 1))
    # Integers up to the last step: exact for any table a run store can hold.
    return min(1.0, 2 * tail / 2**m)


def holm(p_values: list[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of a family of p-values (None entries are left out).

    The i-th smallest of m p-values is multiplied by m - i + 1, and the results are made
    non-decreasing in that order (R: p.adjust(p, "holm")). Rejecting where the adjusted p is
    below alpha keeps the chance of any false rejection in the family at most alpha.
    """
    present = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(present)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(present):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted

"""How many runs per arm a before/after comparison needs (M3's planner).

Two independent arms of n runs each, duplicate rates p1 (without patch) and p2 (with it),
a two-sided test at level alpha. Three answers, each tested against known values:

- `fleiss_runs_per_arm`: the classic normal-approximation formula, with Fleiss' continuity
  correction by default (Fleiss, Levin, Paik, Statistical Methods for Rates and Proportions,
  Table A.4; without the correction it is R's `power.prop.test`);
- `fisher_power`: the exact power of Fisher's exact test, the test the report runs, by
  enumerating every pair of outcomes (G*Power's "Fisher's exact test" does the same);
- `fisher_runs_per_arm`: the fewest runs per arm whose exact Fisher power reaches the target.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass
from statistics import NormalDist

from runner.analysis.stats import _RELATIVE_TOLERANCE

_NORMAL = NormalDist()
# Exact power is enumerated per arm size; past this the normal approximation is good and
# the enumeration (quadratic in n) slow.
MAX_EXACT_RUNS = 5_000


# Below 1e-10 (z beyond 6.4) the normal quantiles run into the limits of a double: at 1e-17,
# 1 - alpha/2 is 1.0 and has no quantile. No test of a duplicate rate asks for such a level.
MIN_ALPHA = 1e-10
MAX_POWER = 1 - 1e-10


def _check(p1: float, p2: float, alpha: float, power: float | None = None) -> None:
    if not (0 <= p1 <= 1 and 0 <= p2 <= 1):
        raise ValueError(f"rates must lie in [0, 1], got {p1} and {p2}")
    if p1 == p2:
        raise ValueError("the two rates are equal: no number of runs tells them apart")
    if not MIN_ALPHA <= alpha < 1:
        raise ValueError(f"alpha must lie in [{MIN_ALPHA:g}, 1), got {alpha:g}")
    if power is not None and not 0 < power <= MAX_POWER:
        raise ValueError(f"power must lie in (0, 1 - {1 - MAX_POWER:.0e}], got {power:g}")


def normal_runs_per_arm(p1: float, p2: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """Runs per arm by the normal approximation, uncorrected and unrounded (power.prop.test)."""
    _check(p1, p2, alpha, power)
    z_a = _NORMAL.inv_cdf(1 - alpha / 2)
    z_b = _NORMAL.inv_cdf(power)
    p_bar = (p1 + p2) / 2
    spread = z_a * math.sqrt(2 * p_bar * (1 - p_bar)) + z_b * math.sqrt(
        p1 * (1 - p1) + p2 * (1 - p2)
    )
    return spread**2 / (p1 - p2) ** 2


def fleiss_runs_per_arm(
    p1: float, p2: float, alpha: float = 0.05, power: float = 0.8, continuity: bool = True
) -> int:
    """Runs per arm by the normal approximation, with Fleiss' continuity correction, rounded up."""
    n = normal_runs_per_arm(p1, p2, alpha, power)
    if continuity:
        n = n / 4 * (1 + math.sqrt(1 + 4 / (n * abs(p1 - p2)))) ** 2
    # A hair below an integer is that integer (floating-point noise, not a real shortfall).
    return max(2, math.ceil(n - 1e-9))


def normal_power(n: int, p1: float, p2: float, alpha: float = 0.05) -> float:
    """Approximate power of the uncorrected two-proportion test (power.prop.test, strict=FALSE)."""
    _check(p1, p2, alpha)
    z_a = _NORMAL.inv_cdf(1 - alpha / 2)
    p_bar = (p1 + p2) / 2
    numerator = math.sqrt(n) * abs(p1 - p2) - z_a * math.sqrt(2 * p_bar * (1 - p_bar))
    return _NORMAL.cdf(numerator / math.sqrt(p1 * (1 - p1) + p2 * (1 - p2)))


def _binomial(n: int, p: float) -> list[float]:
    if p == 0 or p == 1:
        return [float(x == (n if p == 1 else 0)) for x in range(n + 1)]
    log_p, log_q = math.log(p), math.log1p(-p)
    lf = [math.lgamma(i + 1) for i in range(n + 1)]
    return [math.exp(lf[n] - lf[x] - lf[n - x] + x * log_p + (n - x) * log_q) for x in range(n + 1)]


# Half-width of the window around the hypergeometric mean that is enumerated, in standard
# deviations: the mass beyond it (< 1e-30) cannot move a p-value across any usable alpha.
_WINDOW_SD = 12


def _accepted(n: int, s: int, lf: list[float], alpha: float) -> range:
    """First-arm counts x that two-sided Fisher does NOT reject when the arms hold s events.

    The distribution is unimodal and the test rejects the least likely tables first, so the
    accepted counts form one run around the mode; only a window around the mean is computed
    (everything outside it is rejected: its p-value is far below any alpha).
    """
    lo, hi = max(0, s - n), min(n, s)
    sd = math.sqrt(s * (2 * n - s) / (4 * max(2 * n - 1, 1)))
    w_lo = max(lo, math.floor(s / 2 - _WINDOW_SD * sd) - 2)
    w_hi = min(hi, math.ceil(s / 2 + _WINDOW_SD * sd) + 2)
    base = lf[2 * n] - lf[s] - lf[2 * n - s]  # log C(2n, s)
    xs = range(w_lo, w_hi + 1)
    logs = [(lf[n] - lf[x] - lf[n - x]) + (lf[n] - lf[s - x] - lf[n - s + x]) - base for x in xs]
    ordered = sorted(logs)
    cumulative, running = [], 0.0
    for value in ordered:
        running += math.exp(value)
        cumulative.append(running)
    tolerance = math.log(_RELATIVE_TOLERANCE)
    kept = [
        x
        for x, value in zip(xs, logs, strict=True)
        if cumulative[bisect_right(ordered, value + tolerance) - 1] > alpha
    ]
    return range(kept[0], kept[-1] + 1) if kept else range(0)


def fisher_rejections(n: int, alpha: float = 0.05) -> list[list[int]]:
    """For each total s of events in two arms of n runs, the first-arm counts x that two-sided
    Fisher's exact test rejects at alpha (the same tie tolerance as `fisher_exact`)."""
    lf = [math.lgamma(i + 1) for i in range(2 * n + 1)]
    rejections = []
    for s in range(2 * n + 1):
        kept = _accepted(n, s, lf, alpha)
        rejections.append([x for x in range(max(0, s - n), min(n, s) + 1) if x not in kept])
    return rejections


def fisher_power(n: int, p1: float, p2: float, alpha: float = 0.05) -> float:
    """Exact power of two-sided Fisher's exact test with n runs per arm at true rates p1, p2."""
    if not 1 <= n <= MAX_EXACT_RUNS:
        raise ValueError(f"runs per arm must lie in 1..{MAX_EXACT_RUNS}, got {n}")
    if not (0 <= p1 <= 1 and 0 <= p2 <= 1):
        raise ValueError(f"rates must lie in [0, 1], got {p1} and {p2}")
    first, second = _binomial(n, p1), _binomial(n, p2)
    lf = [math.lgamma(i + 1) for i in range(2 * n + 1)]
    # Only where both arms have mass: outcomes beyond ~1e-40 change no printed digit.
    (a1, b1), (a2, b2) = _support(first), _support(second)
    accepted = 0.0
    for s in range(a1 + a2, b1 + b2 + 1):
        kept = _accepted(n, s, lf, alpha)
        for x in range(max(kept.start, a1, s - b2), min(kept.stop, b1 + 1, s - a2 + 1)):
            accepted += first[x] * second[s - x]
    return min(1.0, max(0.0, 1.0 - accepted))


def _support(probabilities: list[float]) -> tuple[int, int]:
    """First and last index whose probability matters (above 1e-40 of the largest)."""
    floor = max(probabilities) * 1e-40
    indices = [i for i, q in enumerate(probabilities) if q > floor]
    return indices[0], indices[-1]


def fisher_runs_per_arm(
    p1: float, p2: float, alpha: float = 0.05, power: float = 0.8
) -> int | None:
    """Runs per arm at which exact Fisher power reaches `power` (None beyond MAX_EXACT_RUNS).

    Fisher's test is discrete, so its power saw-tooths a little as n grows: this bisects
    between an n below the target and one above it, then steps down while the next smaller n
    reaches the target too. A slightly larger n can, rarely, fall just short again.
    """
    _check(p1, p2, alpha, power)

    def reaches(n: int) -> bool:
        return fisher_power(n, p1, p2, alpha) >= power

    # The uncorrected normal n lies below the exact one in every case we tried; start under it.
    lo = max(1, math.floor(normal_runs_per_arm(p1, p2, alpha, power) * 0.8))
    if lo >= MAX_EXACT_RUNS:
        return None
    if reaches(lo):
        hi = lo
    else:
        step = max(1, lo // 4)
        hi = lo + step
        while not reaches(hi):
            lo, step = hi, step * 2
            hi = min(lo + step, MAX_EXACT_RUNS)
            if lo >= MAX_EXACT_RUNS:
                return None
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if reaches(mid) else (mid, hi)
    while hi > 1 and reaches(hi - 1):
        hi -= 1
    return hi


@dataclass(frozen=True)
class Plan:
    """The planner's answer for one comparison."""

    baseline: float
    target: float
    alpha: float
    power: float
    fleiss: int  # runs per arm, normal approximation with continuity correction
    exact: int | None  # runs per arm for Fisher's exact test (None: beyond MAX_EXACT_RUNS)
    exact_power: float | None  # Fisher's exact power at `exact` runs per arm


def plan(baseline: float, target: float, alpha: float = 0.05, power: float = 0.8) -> Plan:
    """Runs per arm to tell a duplicate rate `baseline` from `target`, both ways."""
    fleiss = fleiss_runs_per_arm(baseline, target, alpha, power)
    exact = fisher_runs_per_arm(baseline, target, alpha, power)
    exact_power = None if exact is None else fisher_power(exact, baseline, target, alpha)
    return Plan(baseline, target, alpha, power, fleiss, exact, exact_power)

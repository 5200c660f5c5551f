"""How often sequential stopping per cell (spec `stop_early`, M3) decides the wrong side.

    .venv/bin/python bench/sim_sequential_stop.py [--cells 20000] [--seed 1]

Not a benchmark of speed and not a test: it measures the rule's error rate. A cell's runs are
Bernoulli draws with a true duplicate rate p; after every run (from `min_runs` on) the rule
of `runner.analysis.sequential.decided` may stop the cell on one side of the threshold. A
*wrong side* is "above" when p < threshold or "below" when p > threshold; at p = threshold
every stop is wrong. Each figure is computed exactly (dynamic programming over the runs) and
checked by simulating `--cells` cells; both are printed. For comparison, `one look` applies
the same interval once, after all `runs` (what a report without stopping would show).
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runner.analysis.sequential import decided  # noqa: E402

CONFIGS = [  # threshold, runs per cell, confidence
    (0.5, 20, 0.95),
    (0.5, 50, 0.95),
    (0.5, 50, 0.99),
    (0.2, 50, 0.95),
    (0.2, 50, 0.99),
]
MIN_RUNS = 5


def decision_table(runs: int, threshold: float, confidence: float) -> list[list[str | None]]:
    """decided(k, n) for every n <= runs, k <= n."""
    return [[decided(k, n, threshold, MIN_RUNS, confidence) for k in range(n + 1)]
            for n in range(runs + 1)]


def exact(p: float, runs: int, table: list[list[str | None]]) -> tuple[float, float, float]:
    """P(stop below), P(stop above), expected runs: dynamic programming over (n, k)."""
    alive = [1.0]  # alive[k]: probability of k duplicates in n runs without a stop yet
    below = above = 0.0
    expected = 0.0
    for n in range(1, runs + 1):
        expected += sum(alive)  # every cell still alive takes run n
        nxt = [0.0] * (n + 1)
        for k, mass in enumerate(alive):
            nxt[k] += mass * (1 - p)
            nxt[k + 1] += mass * p
        for k, side in enumerate(table[n]):
            if side == "below":
                below += nxt[k]
                nxt[k] = 0.0
            elif side == "above":
                above += nxt[k]
                nxt[k] = 0.0
        alive = nxt
    return below, above, expected


def simulate(p: float, runs: int, table: list[list[str | None]], cells: int,
             rng: random.Random) -> tuple[float, float, float]:
    """The same three figures from `cells` simulated cells."""
    below = above = total = 0
    for _ in range(cells):
        k = 0
        for n in range(1, runs + 1):
            k += rng.random() < p
            side = table[n][k]
            if side is not None:
                below += side == "below"
                above += side == "above"
                break
        total += n
    return below / cells, above / cells, total / cells


def wrong(p: float, threshold: float, below: float, above: float) -> float:
    if p < threshold:
        return above
    if p > threshold:
        return below
    return below + above


def main() -> None:
    """Print the error rates per configuration and true rate."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print(f"min_runs {MIN_RUNS}; simulated cells per line: {args.cells:,} (seed {args.seed})")
    for threshold, runs, confidence in CONFIGS:
        table = decision_table(runs, threshold, confidence)
        print(f"\nthreshold {threshold:g}, {runs} runs per cell, Wilson {confidence:.0%}")
        print(f"{'true p':>7} {'wrong side, exact':>18} {'simulated':>10} "
              f"{'one look':>9} {'runs used':>10} {'stopped':>8}")
        grid = sorted({0.0, 0.05, threshold / 2, threshold - 0.1, threshold, threshold + 0.1,
                       (1 + threshold) / 2, 0.95})
        for p in grid:
            below, above, used = exact(p, runs, table)
            s_below, s_above, _ = simulate(p, runs, table, args.cells, rng)
            side = table[runs]
            look_below = sum(_pmf(p, runs, k) for k in range(runs + 1) if side[k] == "below")
            look_above = sum(_pmf(p, runs, k) for k in range(runs + 1) if side[k] == "above")
            print(f"{p:>7.3g} {wrong(p, threshold, below, above):>17.1%} "
                  f"{wrong(p, threshold, s_below, s_above):>10.1%} "
                  f"{wrong(p, threshold, look_below, look_above):>9.1%} "
                  f"{used:>10.1f} {below + above:>8.0%}")


def _pmf(p: float, n: int, k: int) -> float:
    from math import comb

    return comb(n, k) * p**k * (1 - p) ** (n - k)


if __name__ == "__main__":
    main()

"""McNemar on seed pairs or Fisher on the two arms: which detects a patch's effect more often?

    .venv/bin/python bench/sim_paired_tests.py

Not a benchmark: exact power of both two-sided tests at alpha 0.05, computed by enumerating
every outcome of n pairs of runs (unpatched, patched). Two worlds:

- independent: nothing drawn from the shared seed shapes both runs of a pair (a sampled model
  under a fixed fault: the pairing is nominal). A pair is (dup, dup) with p1*p2, and so on.
- shared: the pair shares what decides the outcome (a chaos fault plan drawn from the seed):
  the patched run books twice only where the unpatched one did, so no pair is (no, dup).

The report uses McNemar only where the pairing is real (runner.analysis.compare); these
figures are why.
"""

from __future__ import annotations

import sys
from math import comb
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runner.analysis.power import fisher_rejections  # noqa: E402
from runner.analysis.stats import mcnemar_exact  # noqa: E402

ALPHA = 0.05


def power(n: int, cells: tuple[float, float, float, float]) -> tuple[float, float]:
    """(McNemar, Fisher) power for n pairs with P(both, only before, only after, neither)."""
    both, only_before, only_after, neither = cells
    reject = [set(r) for r in fisher_rejections(n, ALPHA)]
    mcnemar = fisher = 0.0
    for a in range(n + 1):  # pairs with a duplicate in both runs
        for b in range(n - a + 1):  # only without the patch
            for c in range(n - a - b + 1):  # only with it
                d = n - a - b - c
                prob = (comb(n, a) * comb(n - a, b) * comb(n - a - b, c)
                        * both**a * only_before**b * only_after**c * neither**d)
                if prob == 0.0:
                    continue
                if mcnemar_exact(b, c) <= ALPHA:
                    mcnemar += prob
                before, after = a + b, a + c
                if before in reject[before + after]:
                    fisher += prob
    return mcnemar, fisher


def main() -> None:
    """Print both tests' power for a few effects and numbers of pairs."""
    print(f"two-sided, alpha {ALPHA}; power = chance to detect the difference")
    print(f"{'p1 -> p2':>12} {'pairs':>6} {'world':>12} {'McNemar':>8} {'Fisher':>7}")
    for p1, p2 in ((0.6, 0.2), (0.5, 0.1), (1.0, 0.0)):
        for n in (5, 10, 20, 40):
            worlds = {
                "independent": (p1 * p2, p1 * (1 - p2), (1 - p1) * p2, (1 - p1) * (1 - p2)),
                "shared": (p2, p1 - p2, 0.0, 1 - p1),
            }
            for world, cells in worlds.items():
                mcnemar, fisher = power(n, cells)
                print(f"{p1:>5.1f} -> {p2:<4.1f} {n:>6} {world:>12} {mcnemar:>8.1%} "
                      f"{fisher:>7.1%}")


if __name__ == "__main__":
    main()

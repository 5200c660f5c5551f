"""`agent-harness runs-needed`: how many runs per arm a before/after comparison needs (M3)."""

from __future__ import annotations

from runner.analysis.power import MAX_EXACT_RUNS, fisher_power, plan


def _pct(rate: float) -> str:
    text = f"{rate * 100:.1f}".rstrip("0").rstrip(".")
    return f"{text}%"


def runs_needed_text(
    baseline: float, target: float, alpha: float, power: float, runs: int | None
) -> str:
    """The planner's answer as the lines the command prints (ValueError for a bad question)."""
    question = (
        f"Duplicate rate {_pct(baseline)} without the patch vs {_pct(target)} with it; "
        f"two-sided, alpha {alpha:g}"
    )
    if runs is not None:
        if not 1 <= runs <= MAX_EXACT_RUNS:
            raise ValueError(f"--runs must lie in 1..{MAX_EXACT_RUNS}, got {runs}")
        if baseline == target:
            raise ValueError("the two rates are equal: there is no difference to detect")
        achieved = fisher_power(runs, baseline, target, alpha)
        return (
            f"{question}:\n"
            f"  {runs} runs per arm give Fisher's exact test, which the report uses, "
            f"power {_pct(achieved)} (exact)\n"
        )
    result = plan(baseline, target, alpha, power)
    exact = (f"more than {MAX_EXACT_RUNS:,}" if result.exact is None
             else str(result.exact))
    fleiss = f"{result.fleiss:,}"
    width = max(len(exact), len(fleiss))
    lines = [f"{question}, power {_pct(power)}:"]
    exact_power = "" if result.exact_power is None else f" (exact power {_pct(result.exact_power)})"
    lines.append(f"  {exact:>{width}} runs per arm  Fisher's exact test, which the report "
                 f"uses{exact_power}")
    lines.append(f"  {fleiss:>{width}} runs per arm  Fleiss' normal approximation with "
                 "continuity correction")
    lines.append("Arms paired by seed (McNemar) need fewer only when a pair shares what decides "
                 "the outcome;")
    lines.append("for sampled models, plan with these numbers.")
    return "\n".join(lines) + "\n"

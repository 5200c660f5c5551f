"""`agent-harness runs-needed`: how many runs per arm a before/after comparison needs (M3)."""

from __future__ import annotations

from typing import Annotated

import typer

# The planner (runner.analysis.power) is imported when the command runs: the console script
# starts every command, `proxy` too, without the runner's analysis (polars, duckdb).
MIN_ALPHA = 1e-10  # runner.analysis.power.MIN_ALPHA, for --help (a test keeps them equal)


def runs_needed_command(
    baseline: Annotated[
        float,
        typer.Option(
            "--baseline",
            min=0.0,
            max=1.0,
            help="Duplicate rate without the patch, 0..1 (e.g. 0.6 from a first small sweep).",
        ),
    ],
    target: Annotated[
        float,
        typer.Option(
            "--target",
            min=0.0,
            max=1.0,
            help="The duplicate rate with the patch you want to be able to detect, 0..1.",
        ),
    ],
    alpha: Annotated[
        float,
        typer.Option(
            "--alpha",
            min=0.0,
            max=1.0,
            help=f"Significance level, two-sided: {MIN_ALPHA:g} up to (not including) 1.",
        ),
    ] = 0.05,
    power: Annotated[
        float,
        typer.Option(
            "--power",
            min=0.0,
            max=1.0,
            help="Wanted probability of detecting the difference, above 0 and below 1.",
        ),
    ] = 0.8,
    runs: Annotated[
        int | None,
        typer.Option("--runs", min=1, help="Instead: the power that this many runs per arm give."),
    ] = None,
) -> None:
    """Runs per patch arm needed to tell a baseline duplicate rate from a target rate (M3)."""
    try:
        text = runs_needed_text(baseline, target, alpha, power, runs)
    except ValueError as exc:
        typer.echo(f"agent-harness runs-needed: error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(text, nl=False)


def _given(rate: float) -> str:
    """A rate the user gave, as a percentage with the digits it has (0.0001 is 0.01%)."""
    return f"{rate * 100:.6g}%"


def _pct(rate: float) -> str:
    """A computed rate: one decimal, two significant digits below 0.1%, never a false 0%."""
    percent = rate * 100
    if 0 < percent < 0.01:
        return "below 0.01%"
    if 0 < percent < 0.1:
        return f"{percent:.2g}%"
    text = f"{percent:.1f}".rstrip("0").rstrip(".")
    return f"{text}%"


def runs_needed_text(
    baseline: float, target: float, alpha: float, power: float, runs: int | None
) -> str:
    """The planner's answer as the lines the command prints (ValueError for a bad question)."""
    from runner.analysis.power import MAX_EXACT_RUNS, fisher_power, plan

    question = (
        f"Duplicate rate {_given(baseline)} without the patch vs {_given(target)} with it; "
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
    exact = f"more than {MAX_EXACT_RUNS:,}" if result.exact is None else str(result.exact)
    fleiss = f"{result.fleiss:,}"
    width = max(len(exact), len(fleiss))
    lines = [f"{question}, power {_given(power)}:"]
    exact_power = "" if result.exact_power is None else f" (exact power {_pct(result.exact_power)})"
    lines.append(
        f"  {exact:>{width}} runs per arm  Fisher's exact test, which the report uses{exact_power}"
    )
    lines.append(
        f"  {fleiss:>{width}} runs per arm  Fleiss' normal approximation with continuity correction"
    )
    lines.append(
        "Arms paired by seed (McNemar) need fewer only when a pair shares what decides the outcome;"
    )
    lines.append("for sampled models, plan with these numbers.")
    return "\n".join(lines) + "\n"

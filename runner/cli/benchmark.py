"""`agent-harness benchmark`: the self-test, two reference agents through the real judge (B1-B3)."""

from __future__ import annotations

from typing import Annotated

import typer

from harness.base.errors import HarnessError
from runner.cli.app import fail


def benchmark_command(
    scenarios: Annotated[
        str | None,
        typer.Option(
            "--scenarios", metavar="F1,F3", help="Comma-separated scenarios (default all)."
        ),
    ] = None,
    runs: Annotated[
        str, typer.Option("--runs", metavar="N", help="Runs per agent and scenario, 1-1000.")
    ] = "1",
    jitter: Annotated[
        str,
        typer.Option("--jitter", metavar="MS", help="Random think time before each call, 0-60000."),
    ] = "0",
) -> None:
    """Self-test: two reference agents against a simulated backend.

    Exit codes: 0 every run got its expected verdict; 1 otherwise, or bad options, or an unwritable report file.
    """
    from harness.benchmark import main as benchmark_main

    try:
        code = benchmark_main(scenarios, runs, jitter, echo=typer.echo)
    except HarnessError as exc:
        raise fail(str(exc)) from None
    raise typer.Exit(code)

"""The harness's commands: proxy, judge, benchmark, demo (the runner adds run, report, sweep).

Every user error ends as one line on stderr and exit code 1; no tracebacks.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from harness import __version__, jsonutil
from harness.errors import HarnessError

PROXY_CONTEXT = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []}


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print one error line and return the Exit to raise."""
    typer.echo(f"agent-harness: error: {message}", err=True)
    return typer.Exit(code)


class ReportFormat(StrEnum):
    json = "json"
    md = "md"


def judge_command(
    events: Annotated[
        Path, typer.Argument(help="An event log (JSON lines) recorded by the proxy.")
    ],
    format: Annotated[
        ReportFormat, typer.Option("--format", help="json or md.")
    ] = ReportFormat.json,
) -> None:
    """Judge a recorded event log again and print its report, score and patches.

    Exit codes: 0 judged (whatever the verdict); 1 an unreadable or invalid event log.
    """
    from harness.events import read_jsonl
    from harness.judge import judge_events
    from harness.render import judgement_markdown

    try:
        judgement = judge_events(read_jsonl(events))
    except HarnessError as exc:
        raise fail(str(exc)) from None
    if format is ReportFormat.md:
        typer.echo(judgement_markdown(judgement))
        return
    typer.echo(
        jsonutil.dumps(
            {
                "verdict": judgement.report["verdict"],
                "report": judgement.report,
                "score": judgement.score,
                "patches": judgement.patches,
                "toolClassification": judgement.tool_classification,
                "harnessVersion": __version__,
            }
        )
    )


def proxy_command(ctx: typer.Context) -> None:
    """Run the chaos proxy in front of an upstream MCP server (see `agent-harness proxy --help`)."""
    from harness.proxy.main import main as proxy_main

    raise typer.Exit(proxy_main(list(ctx.args)))


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


def demo_command() -> None:
    """A demo MCP server over stdio (simulated backend, not a measurement; see `proxy`)."""
    from harness.demo import main as demo_main

    raise typer.Exit(demo_main())


def register(app: typer.Typer) -> None:
    """Add the harness's commands to the top-level app."""
    app.command("proxy", context_settings=PROXY_CONTEXT, add_help_option=False)(proxy_command)
    app.command("judge")(judge_command)
    app.command("benchmark")(benchmark_command)
    app.command("demo")(demo_command)


def version_callback(value: bool) -> None:
    if value:
        typer.echo(f"agent-harness {__version__}")
        raise typer.Exit(0)


def stderr_line(message: str) -> None:
    print(f"[agent-harness] {message}", file=sys.stderr, flush=True)


HARNESS_HELP = (
    "agent-harness: a chaos proxy for MCP servers that judges whether an agent executed a write "
    "twice, its self-test and its demo server."
)


def harness_app(help: str = HARNESS_HELP) -> typer.Typer:
    """A typer app with the harness's commands; the runner adds its own to it."""
    app = typer.Typer(
        name="agent-harness",
        help=help,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )

    @app.callback()
    def _root(
        version: Annotated[
            bool,
            typer.Option(
                "--version",
                callback=version_callback,
                is_eager=True,
                help="Print the version and exit.",
            ),
        ] = False,
    ) -> None:
        pass

    register(app)
    return app

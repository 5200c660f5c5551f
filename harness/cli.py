"""The harness's commands: proxy, judge, benchmark, demo (the runner adds run, report, sweep).

Every user error ends as one line on stderr and exit code 1; no tracebacks.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from harness import __version__
from harness.base import jsonutil
from harness.base.errors import HarnessError
from harness.base.textsafe import terminal

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
    from harness.report.judgement import judge_events
    from harness.report.markdown import judgement_markdown

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


class OneLineErrors(TyperGroup):
    """The top-level command group: a usage error (an unknown option or command, a bad or
    missing value) is one line on stderr and exit code 1, like every other bad input.

    Typer's own way is a boxed multi-line message and exit code 2, which `sweep` uses to say
    "regression": a mistyped flag in CI must not read as one.
    """

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except typer.TyperException as exc:
            if not standalone_mode:
                raise
            typer.echo(usage_error_line(exc), err=True)
            sys.exit(1)
        except typer.Abort:  # end of input where a command read from it, as Typer says it
            if not standalone_mode:
                raise
            typer.echo("Aborted!", err=True)
            sys.exit(1)
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else 0)


def usage_error_line(exc: typer.TyperException) -> str:
    """`agent-harness run: error: No such option: --bogus; see agent-harness run --help`."""
    ctx = getattr(exc, "ctx", None)
    command = ctx.command_path if ctx is not None else "agent-harness"
    message = terminal(" ".join(exc.format_message().split())).rstrip(".")
    return f"{command}: error: {message}; see {command} --help"


HARNESS_HELP = (
    "agent-harness: a chaos proxy for MCP servers that judges whether an agent executed a write "
    "twice, its self-test and its demo server."
)


def harness_app(help: str = HARNESS_HELP) -> typer.Typer:
    """A typer app with the harness's commands; the runner adds its own to it."""
    app = typer.Typer(
        name="agent-harness",
        help=help,
        cls=OneLineErrors,
        add_completion=False,
        pretty_exceptions_enable=False,
    )

    @app.callback(invoke_without_command=True)
    def _root(
        ctx: typer.Context,
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
        if ctx.invoked_subcommand is None:  # a bare `agent-harness`: what it can do
            typer.echo(ctx.get_help())

    register(app)
    return app

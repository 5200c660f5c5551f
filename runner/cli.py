"""`agent-harness`: the one command line for the harness and the runner."""

from __future__ import annotations

from typing import Annotated

import typer

from harness import cli as harness_cli

app = typer.Typer(
    name="agent-harness",
    help=(
        "Measure whether LLM agents execute a write twice when an MCP tool call fails: a chaos "
        "proxy for MCP servers, a self-test, a demo server, and a batch experiment runner."
    ),
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
            callback=harness_cli.version_callback,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    """agent-harness."""


harness_cli.register(app)


def main() -> None:
    """Console-script entry point."""
    app()

"""The command line's frame: the typer app, one-line usage errors, `--version`.

A usage error is one line on stderr and exit code 1 (V4), like every other bad input; the exit
codes, error and status lines themselves are runner/exits.py's.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

from harness import __version__
from harness.base.textsafe import terminal


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print one error line and return the Exit to raise."""
    typer.echo(f"agent-harness: error: {message}", err=True)
    return typer.Exit(code)


def version_callback(value: bool) -> None:
    if value:
        typer.echo(f"agent-harness {__version__}")
        raise typer.Exit(0)


class FlagsWithoutType:
    """`--help` names no type beside a flag: a flag takes no value. Typer's help shows the
    type of every option, `<bool>` for a flag (`--dry-run <bool>`, `--help <bool>`)."""

    def format_help(self, ctx: typer.Context, formatter: Any) -> None:
        for param in self.get_params(ctx):  # type: ignore[attr-defined]
            if getattr(param, "is_flag", False) and not getattr(param, "count", False):
                param.metavar = ""  # what the help shows as its type; a flag parses none
        super().format_help(ctx, formatter)  # type: ignore[misc]


class Command(FlagsWithoutType, TyperCommand):
    """Every command of the command line."""


class App(typer.Typer):
    """The typer app whose commands are `Command`s unless one says otherwise."""

    def command(self, *args: Any, cls: type[TyperCommand] | None = None, **kwargs: Any) -> Any:
        """Typer's `command`, with `Command` as the default class."""
        return super().command(*args, cls=cls or Command, **kwargs)


class OneLineErrors(FlagsWithoutType, TyperGroup):
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


def make_app(help: str) -> typer.Typer:
    """A typer app with one-line usage errors and `--version`; the commands are added to it."""
    app = App(
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

    return app

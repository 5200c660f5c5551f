"""The command line's frame: the typer app, one-line usage errors, error and status lines, exit codes.

Every user error ends as one line on stderr and exit code 1; no tracebacks (V4). Exit codes
(V5; the same in `--help` and docs): 0 done, 1 bad input, 2 a regression (`sweep`), 3 a run
failed to run or was not run, 130 interrupted (Ctrl-C), 143 terminated (SIGTERM).
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from harness import __version__
from harness.base.textsafe import terminal

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_REGRESSION = 2
EXIT_RUNS_FAILED = 3
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT)
EXIT_TERMINATED = 143  # SIGTERM (128 + 15, as a shell reports it): ended like Ctrl-C (V14)


def interrupt_handled() -> int:
    """Ctrl-C was caught and handled: returns EXIT_INTERRUPTED, and makes it the exit code.

    CPython 3.11 marks the process to kill itself with SIGINT at exit, caught or not, once a
    KeyboardInterrupt has passed through `exec` of a string (dataclasses and namedtuples build
    their methods that way while modules import) when it runs as `python -m` (`make run-local`);
    the exit status would then be "killed by SIGINT" instead of 130. A fresh `exec` of a string
    clears the mark."""
    exec("pass")
    return EXIT_INTERRUPTED


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print one error line and return the Exit to raise."""
    typer.echo(f"agent-harness: error: {message}", err=True)
    return typer.Exit(code)


def print_error(command: str, message: str) -> int:
    """One error line per problem (a spec can have several, one per FILE:LINE), each escaped
    on its own so no foreign text can drive the terminal (V4, V6); returns EXIT_ERROR."""
    for line in message.splitlines() or [""]:
        print(f"agent-harness {command}: error: {terminal(line)}", file=sys.stderr)
    return EXIT_ERROR


def say(line: str) -> None:
    """A line for the user on stderr; names and errors in it cannot drive the terminal (V6)."""
    print(terminal(line, lines=True), file=sys.stderr)


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


def make_app(help: str) -> typer.Typer:
    """A typer app with one-line usage errors and `--version`; the commands are added to it."""
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

    return app

"""The console script's first module: it imports only `sys`, so Ctrl-C while the command line
loads (typer, the command modules: about half a second) ends as one line and exit code 130 (V4,
V5), not a traceback. Everything else starts in `runner.cli`."""

from __future__ import annotations

import sys

EXIT_INTERRUPTED = 130


def main() -> None:
    """Console-script entry point: load the command line, then run it."""
    try:
        from runner.cli import main as run_command_line

        # Typer builds the commands' parsers here (a few hundred ms) before any handler of
        # its own; Ctrl-C inside a command is the command's (its own line, 130).
        run_command_line()
    except KeyboardInterrupt:
        # What runner.exits.interrupt_handled does, which may not have loaded: CPython 3.11
        # under `python -m` would otherwise end killed by SIGINT once a KeyboardInterrupt has
        # passed through `exec` of a string during the imports.
        exec("pass")
        print("agent-harness: interrupted while starting; nothing ran", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)

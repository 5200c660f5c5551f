"""`agent-harness record ...` and `agent-harness replay CASSETTE ...` (U2): their flags are
parsed by the cassette room itself (harness/cassette/args.py), as the proxy's are."""

from __future__ import annotations

import typer

CASSETTE_CONTEXT = {
    "ignore_unknown_options": True,
    "allow_extra_args": True,
    "help_option_names": [],
}


def record_command(ctx: typer.Context) -> None:
    """Record a real upstream session into a cassette (see `agent-harness record --help`)."""
    from harness.cassette import record_main

    raise typer.Exit(record_main(list(ctx.args)))


def replay_command(ctx: typer.Context) -> None:
    """Serve a cassette as an MCP server that executes nothing (see `agent-harness replay --help`)."""
    from harness.cassette import replay_main

    raise typer.Exit(replay_main(list(ctx.args)))

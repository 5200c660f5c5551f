"""`agent-harness demo`: the demo MCP server over stdio (D1)."""

from __future__ import annotations

import typer


def demo_command() -> None:
    """A demo MCP server over stdio (simulated backend, not a measurement; see `proxy`)."""
    from harness.demo import main as demo_main

    raise typer.Exit(demo_main())

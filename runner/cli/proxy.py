"""`agent-harness proxy ...`: the chaos proxy; its flags are parsed by the proxy itself.

The parser lives with the proxy (`harness.proxy.args`), beside `ProxyConfig`, which it parses
the flags into (and reads whole from `--config FILE`, as the runner hands it over), so the
harness runs alone too: `python -m harness proxy ...` reads the same flags.
"""

from __future__ import annotations

import typer

# Typer hands every argument to the proxy's own parser (its --help included).
PROXY_CONTEXT = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []}


def proxy_command(ctx: typer.Context) -> None:
    """Run the chaos proxy in front of an upstream MCP server (see `agent-harness proxy --help`)."""
    from harness.proxy import proxy_main

    raise typer.Exit(proxy_main(list(ctx.args)))

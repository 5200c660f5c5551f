"""`agent-harness wrap CONFIG`: an MCP client's own configuration, its servers behind the proxy
(and `--unwrap`, the original back); the work is harness.clients'."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.base.errors import UsageError
from runner.cli.app import fail


def wrap_command(
    config: Annotated[
        Path,
        typer.Argument(
            help="The client's MCP configuration: claude_desktop_config.json, .cursor/mcp.json, "
            ".mcp.json (Claude Code), .vscode/mcp.json, ~/.codex/config.toml."
        ),
    ],
    server: Annotated[
        list[str] | None,
        typer.Option("--server", help="Wrap only this server (repeatable); default: every one."),
    ] = None,
    scenario: Annotated[
        list[str] | None,
        typer.Option(
            "--scenario",
            help="F1 for every wrapped server, or NAME=F2 for one (repeatable); none: no fault, "
            "a baseline that is still judged.",
        ),
    ] = None,
    report_dir: Annotated[
        Path | None,
        typer.Option(
            "--report-dir",
            help="Folder of the servers' report files (one per server, NAME.json); default: "
            "~/.local/state/agent-harness/wrapped/CONFIG-HASH/ (under $XDG_STATE_HOME if set).",
        ),
    ] = None,
    proxy_arg: Annotated[
        list[str] | None,
        typer.Option(
            "--proxy-arg",
            help="One more flag for every wrapped proxy, e.g. --proxy-arg=--write-tools=book_* "
            "(repeatable; the audit tools are off unless --proxy-arg=--audit-tools=on).",
        ),
    ] = None,
    unwrap: Annotated[
        bool,
        typer.Option("--unwrap", help="Put the original configuration back (byte for byte)."),
    ] = False,
) -> None:
    """Put the servers of an MCP client's configuration behind the chaos proxy, keeping a backup.

    Only the wrapped entries change (the rest of the file byte for byte, comments included);
    each server gets its scenario and a report file of its own. A remote (URL) server becomes
    a stdio entry that starts the proxy in front of its URL; its headers move into the entry's
    env, never onto a command line. Anything wrap cannot rewrite safely is refused in one line
    and nothing is written.

    Exit codes: 0 wrapped (or unwrapped); 1 refused: bad input, a server it cannot rewrite,
    a file it cannot read or write.
    """
    from harness.clients import unwrap_config, wrap_config

    try:
        if unwrap:
            if server or scenario or report_dir or proxy_arg:
                raise UsageError("--unwrap takes no other option: it puts the whole file back")
            lines = unwrap_config(config)
        else:
            lines = wrap_config(config, server, scenario, report_dir, proxy_arg)
    except UsageError as exc:
        raise fail(str(exc)) from None
    for line in lines:
        typer.echo(line)

"""`python -m runner.forkentry SOCKET PID`: the runner's fork server as a process of its own.

The server (runner/processes/forkserver.py) forks warm copies of two programs: `agent-harness`
(the console script, for `agent-harness proxy`) and `upstream` (a built-in upstream,
`python -m runner.upstreams`). They stand above the processes room, so this entry, not the
server, names them, and the modules to import before the first fork.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from runner.processes.forkserver import serve

# Modules the server imports so that a forked proxy or built-in upstream imports nothing.
WARM_MODULES = ("runner.entry", "runner.cli", "runner.cli.proxy", "harness.proxy.main",
                "runner.upstreams.__main__", "mcp.server.stdio", "mcp.client.session")  # fmt: skip


def agent_harness(argv: list[str]) -> Callable[[], Any]:
    """`agent-harness ARGV...` as a forked child runs it: the console script's entry point."""
    from runner.entry import main as entry_main

    sys.argv = ["agent-harness", *argv]
    return entry_main


def upstream(argv: list[str]) -> Callable[[], Any]:
    """`python -m runner.upstreams ARGV...` as a forked child runs it."""
    from runner.upstreams.__main__ import main as upstream_main

    sys.argv = [sys.executable, *argv]
    return lambda: upstream_main(argv)


PROGRAMS = {"agent-harness": agent_harness, "upstream": upstream}


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]), PROGRAMS, WARM_MODULES)

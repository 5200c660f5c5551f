"""`agent-harness`: the one command line for the harness and the runner, one module per command.

The harness's commands (proxy, judge, benchmark, demo) and the runner's (run, report, sweep,
merge, runs-needed) live here side by side; each module imports what its command needs only
when the command runs, so `agent-harness proxy` starts without the runner's dependencies.
"""

from __future__ import annotations

import sys

from harness.base.errors import no_space
from runner.cli import (
    benchmark,
    cassette,
    demo,
    judge,
    merge,
    proxy,
    report,
    run,
    runs_needed,
    sweep,
    wrap,
)
from runner.cli.app import make_app
from runner.exits import print_error

app = make_app(
    help=(
        "Measure whether LLM agents execute a write twice when an MCP tool call fails: a chaos "
        "proxy for MCP servers, a self-test, a demo server, and a batch experiment runner."
    )
)
app.command("proxy", context_settings=proxy.PROXY_CONTEXT, add_help_option=False)(
    proxy.proxy_command
)
app.command("record", context_settings=cassette.CASSETTE_CONTEXT, add_help_option=False)(
    cassette.record_command
)
app.command("replay", context_settings=cassette.CASSETTE_CONTEXT, add_help_option=False)(
    cassette.replay_command
)
app.command("judge")(judge.judge_command)
app.command("benchmark")(benchmark.benchmark_command)
app.command("demo")(demo.demo_command)
app.command("run")(run.run_command)
app.command("report")(report.report_command)
app.command("runs-needed")(runs_needed.runs_needed_command)
app.command("sweep")(sweep.sweep_command)
app.command("merge")(merge.merge_command)
app.command("wrap")(wrap.wrap_command)


def main() -> None:
    """Console-script entry point. A full disk met where no command expected one (a library
    deep down, a run's folder) is still one line, never a chained traceback (V20)."""
    try:
        app()
    except Exception as exc:
        full = no_space(exc)
        if full is None:
            raise
        sys.exit(print_error(sys.argv[1] if len(sys.argv) > 1 else "", full))

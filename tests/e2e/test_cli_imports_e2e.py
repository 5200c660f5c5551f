"""The one command line starts each command with what it needs: `agent-harness proxy`, which the
runner starts once per run, loads none of the runner's analysis, store or provider libraries
(runner/cli/__init__.py). Checked in a fresh interpreter, the way the console script starts."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

# Start-up is the subject: real new processes, never the warm launcher.
pytestmark = pytest.mark.fresh_process

HEAVY = ("polars", "duckdb", "litellm", "runner.analysis", "runner.store")


def test_the_command_line_loads_no_runner_library_before_a_command_runs():
    code = f"import sys, runner.cli; print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_alpha_floor_in_runs_needed_help_is_the_planners():
    from runner.analysis.power import MIN_ALPHA
    from runner.cli import runs_needed

    assert runs_needed.MIN_ALPHA == MIN_ALPHA


# Issue 24: a command that calls no model never pays for litellm (~4 s of CPU at import), and
# the planner loads no table library. Each command runs its real code path in a fresh
# interpreter (the console script's `main`); what was loaded is read when it exits.
_LOADED_AT_EXIT = (
    "import atexit, sys\n"
    "atexit.register(lambda: print('LOADED', sorted(m for m in {heavy!r} if m in sys.modules), "
    "file=sys.stderr))\n"
    "sys.argv = ['agent-harness', *sys.argv[1:]]\n"
    "from runner.cli import main\n"
    "main()\n"
)
MODEL_LIBRARIES = ("litellm", "openai")
TABLE_LIBRARIES = ("polars", "duckdb", "pyarrow", "scipy", "jinja2")


def agent_lines(writes: int) -> bytes:
    """An agent's side of a session as lines: handshake, then distinct create_booking calls."""
    lines: list[dict] = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "n3", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]  # fmt: skip
    for i in range(writes):
        arguments = {"guest": f"g{i}", "date": "2026-12-01"}
        lines.append({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                      "params": {"name": "create_booking", "arguments": arguments}})  # fmt: skip
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def _loaded_by(args: list[str], heavy: tuple[str, ...], cwd: Path, stdin: bytes = b"") -> list[str]:
    code = _LOADED_AT_EXIT.format(heavy=heavy)
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        timeout=180,
    )
    err = done.stderr.decode(errors="replace")
    line = next((x for x in err.splitlines() if x.startswith("LOADED ")), None)
    assert line is not None, f"{args}: exit {done.returncode}: {err[-2000:]}"
    return ast.literal_eval(line[len("LOADED ") :])


def test_n3_commands_that_call_no_model_never_import_litellm(tmp_path: Path):
    from tests.support.proxyproc import SERVER
    from tests.support.storekit import make_store

    a = make_store(tmp_path / "a.duckdb", ["r1", "r2"])
    b = make_store(tmp_path / "b.duckdb", ["r3"])
    events = Path(__file__).resolve().parent.parent / "unit/data/f1-ghost-write.v1.events.jsonl"
    session = agent_lines(writes=3)  # the proxy really proxies: three writes go upstream
    proxy = [
        "proxy",
        "--upstream-command",
        sys.executable,
        "--upstream-arg",
        str(SERVER),
        "--upstream-arg=--ground-truth",
        "--upstream-arg",
        str(tmp_path / "truth.jsonl"),
    ]
    commands = {
        "report": ["report", "--db", str(a), "--out", str(tmp_path / "report.html")],
        "merge": ["merge", "--out", str(tmp_path / "merged.duckdb"), str(a), str(b)],
        "judge": ["judge", str(events)],
        "runs-needed": ["runs-needed", "--baseline", "0.6", "--target", "0.1"],
    }
    for name, args in commands.items():
        assert _loaded_by(args, MODEL_LIBRARIES, tmp_path) == [], name
    assert _loaded_by(proxy, MODEL_LIBRARIES, tmp_path, stdin=session) == [], "proxy"
    executed = (tmp_path / "truth.jsonl").read_text().splitlines()
    assert [json.loads(line).get("tool") for line in executed] == ["create_booking"] * 3
    assert (tmp_path / "report.html").stat().st_size > 0
    assert (tmp_path / "merged.duckdb").exists()


def test_the_planner_and_the_proxy_load_no_table_library(tmp_path: Path):
    from tests.support.proxyproc import SERVER

    planner = ["runs-needed", "--baseline", "0.6", "--target", "0.1"]
    assert _loaded_by(planner, TABLE_LIBRARIES, tmp_path) == []
    proxy = ["proxy", "--upstream-command", sys.executable, "--upstream-arg", str(SERVER)]
    assert _loaded_by(proxy, TABLE_LIBRARIES, tmp_path) == []


def test_a_dry_run_of_a_spec_with_built_in_upstreams_loads_neither_their_servers_nor_a_model(
    tmp_path: Path,
):
    # Issue 24 item 1, V4: checking a spec (`--dry-run`, or a spec refused) needs the built-in
    # kinds' names, not their servers and the MCP SDK behind them (~1.5 s of imports)
    spec = Path(__file__).resolve().parents[2] / "experiments" / "example.yaml"
    loaded = _loaded_by(
        ["run", str(spec), "--dry-run"], ("mcp", "runner.upstreams._registry", "litellm"), tmp_path
    )
    assert loaded == []


# Issue 37: the runner's own start-up (what `run` imports before its first run is sent) loads
# no polars (about 0.1 s of CPU): the store hands tables to polars only when they are read,
# which `run` does once its runs are done, for the summary.
def test_the_runners_start_up_loads_no_polars():
    modules = "runner.execute.experiment, runner.execute.run, runner.execute.pool, runner.store"
    code = f"import sys, {modules}; print('polars' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"

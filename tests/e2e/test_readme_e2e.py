"""Q7: the README's examples run as written, on a checkout's layout (the tracked files of
experiments/ and examples/ in a fresh folder), with `agent-harness` and `python` on PATH.

Every shell and YAML block of README.md is listed in BLOCKS with what this test does with it;
a block the list does not name fails the first test, so a new example needs a decision. A
YAML block's first line names the file it is (`# experiments/my-first.yaml`). Shell lines run
one by one as a shell would split them (`agent-harness` through the warm launcher); a command
that talks MCP over stdio gets its agent's requests on stdin (REQUESTS). Where an example
names your own server (`dist/your-server.js`), the built-in booking service stands in for it.
Not run: `make test` (the whole suite) and the remote server of quick start 1 (network).
`make run` reuses the store of experiments/example.yaml the suite builds once
(tests/e2e/conftest.py), so its run only resumes; quick start 4's second sweep starts from
the first one's store the same way (the scripted runs are the same per seed).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from runner.upstreams import stdio_command
from tests.support import launcher
from tests.support.once import copy_of
from tests.support.paths import BIN, ROOT
from tests.support.runkit import query

README = ROOT / "README.md"
BLOCK = re.compile(r"^```(sh|yaml)\n(.*?)^```", re.S | re.M)
YOUR_SERVER = "--upstream-command node --upstream-arg dist/your-server.js"
# Each block by its first line: what happens to it.
BLOCKS = {
    "make run    #": "make run: the Makefile's recipe, the example store reused",
    "mkdir -p out": "quick start 1: the proxy, the booking service as your server",
    "agent-harness proxy --listen 127.0.0.1:8765 --upstream-url https://mcp.example.com/mcp":
        "not run: a remote server of yours (network)",
    "jq -r .verdict out/harness-report.json": "quick start 1: read the report",
    "# experiments/my-first.yaml": "quick start 2: the spec",
    "agent-harness run experiments/my-first.yaml --dry-run": "quick start 2: dry run, run, report",
    "# experiments/my-agent.yaml": "quick start 3: the spec",
    "cp examples/my_agent.py experiments/": "quick start 3: the agent beside it, run",
    "agent-harness sweep experiments/nightly.yaml --db baseline.duckdb": "quick start 4",
    "agent-harness record": "quick start 5: record, replay, the booking service as your server",
    "agent-harness wrap ~/.cursor/mcp.json": "quick start 6: wrap and unwrap, ~ a fresh home",
}  # fmt: skip
BOOKING = {"guest": "Alice Example", "date": "2026-12-01", "nights": 2}
REQUESTS = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
     "capabilities": {}, "clientInfo": {"name": "readme", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
     "params": {"name": "create_booking", "arguments": BOOKING}},
]  # fmt: skip


def readme_blocks() -> list[tuple[str, str]]:
    """(language, text) of every shell and YAML block, in order."""
    return BLOCK.findall(README.read_text(encoding="utf-8"))


def block(first_line: str) -> str:
    (text,) = [t for _, t in readme_blocks() if t.startswith(first_line)]
    return text


def checkout(folder: Path) -> Path:
    """The tracked files of experiments/ and examples/, as a fresh clone has them."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "experiments", "examples"], cwd=ROOT, check=True,
        capture_output=True, text=True,
    ).stdout.split("\0")  # fmt: skip
    for name in filter(None, listed):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, folder / name)
    return folder


def environment(**extra: str) -> dict[str, str]:
    """PATH with this checkout's `agent-harness` and `python` first, as after `make setup`."""
    path = f"{BIN.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, "PATH": path, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **extra}


def commands(text: str) -> list[list[str]]:
    """A shell block's commands: continued lines joined, comments left out."""
    joined = re.sub(r"\\\n", " ", text)
    return [argv for line in joined.splitlines() if (argv := shlex.split(line, comments=True))]


def sh(folder: Path, argv: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """One command as written, in `folder`; `agent-harness` from the warm launcher."""
    program = [str(BIN), *argv[1:]] if argv[0] == "agent-harness" else argv
    run = launcher.run if argv[0] == "agent-harness" else subprocess.run
    return run(
        program, cwd=folder, env=environment(), input=stdin, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip


def run_block(folder: Path, text: str, stdin: str | None = None) -> list[Any]:
    """Every command of a block, each checked to exit 0; their results."""
    done = []
    for argv in commands(text):
        result = sh(folder, argv, stdin)
        assert result.returncode == 0, (argv, result.stdout, result.stderr)
        done.append(result)
    return done


def write_yaml(folder: Path, text: str) -> Path:
    """A YAML block into the file its first line names."""
    name = text.splitlines()[0].removeprefix("# ").strip()
    (folder / name).write_text(text, encoding="utf-8")
    return folder / name


def booking_instead_of_your_server(text: str, db: Path) -> str:
    """The block with the built-in booking service where it names your server."""
    program, *args = stdio_command("booking", db)
    ours = " ".join([f"--upstream-command {program}", *(f"--upstream-arg={a}" for a in args)])
    assert YOUR_SERVER in text
    return text.replace(YOUR_SERVER, ours)


def requests(calls: int) -> str:
    """An agent's requests: initialize, then create_booking `calls` times."""
    lines = REQUESTS[:2] + [{**REQUESTS[2], "id": 2 + i} for i in range(calls)]
    return "".join(json.dumps(line) + "\n" for line in lines)


# -- the tests --------------------------------------------------------------------------------


def test_q7_every_readme_example_is_known_to_this_test() -> None:
    firsts = [text for _, text in readme_blocks()]
    known = [next((k for k in BLOCKS if text.startswith(k)), None) for text in firsts]
    unknown = [text.splitlines()[0] for text, k in zip(firsts, known, strict=True) if k is None]
    assert unknown == [], f"README examples this test does not run or name: {unknown}"
    assert sorted(filter(None, known)) == sorted(BLOCKS)  # and every one named is there


def test_q7_make_run_runs_as_its_recipe_says(
    tmp_path: Path, example_experiment: dict[str, Any]
) -> None:
    recipe = re.search(r"^run: setup\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M)
    assert recipe is not None
    lines = [line.strip().removeprefix("$(BIN)/") for line in recipe.group(1).splitlines()]
    folder = checkout(tmp_path)
    copy_of(example_experiment["db"], folder / "reports")  # reports/runs.duckdb, all stored
    first, second = run_block(folder, "\n".join(lines))
    assert "160 runs were already stored and were skipped (resume)." in first.stderr
    assert "Report: agent-harness report --db reports/runs.duckdb --experiment example" in (
        first.stdout
    )
    assert (folder / "reports" / "example.html").stat().st_size > 10_000
    assert second.stdout.strip() == "Report written to reports/example.html"


def test_q7_quick_start_1_the_proxy_says_its_verdict_and_writes_its_report(
    tmp_path: Path,
) -> None:
    if shutil.which("jq") is None:
        pytest.skip("jq is not installed")
    folder, db = checkout(tmp_path), tmp_path / "booking.sqlite"
    text = booking_instead_of_your_server(block("mkdir -p out"), db)
    *_, proxy = run_block(folder, text, stdin=requests(2))
    last = proxy.stderr.splitlines()[-1]
    assert last.startswith("[agent-harness] verdict: FAIL, score ")
    assert last.endswith("; report: out/harness-report.json")
    verdict, reason, score, patches = run_block(folder, block("jq -r .verdict"))
    assert verdict.stdout == "FAIL\n" and "executed 2 times" in reason.stdout
    assert json.loads(score.stdout)["overall"] < 50 and patches.stdout.strip()
    with sqlite3.connect(db) as conn:  # ground truth: booked twice
        assert conn.execute("select count(*) from bookings").fetchone() == (2,)


def test_q7_quick_start_2_the_spec_runs_and_reports(tmp_path: Path) -> None:
    folder = checkout(tmp_path)
    write_yaml(folder, block("# experiments/my-first.yaml"))
    dry, ran, report = run_block(folder, block("agent-harness run experiments/my-first.yaml"))
    assert "20 runs" in dry.stdout
    assert "Report: agent-harness report --db reports/runs.duckdb --experiment my-first" in (
        ran.stdout
    )
    assert report.stdout.strip() == "Report written to reports/my-first.html"
    rows = query(folder / "reports/runs.duckdb", "select status, agreement from runs")
    assert len(rows) == 20 and {r[0] for r in rows} == {"ok"} and "disagrees" not in str(rows)


def test_q7_quick_start_3_an_agent_beside_the_spec_runs(tmp_path: Path) -> None:
    folder = checkout(tmp_path)
    write_yaml(folder, block("# experiments/my-agent.yaml"))
    run_block(folder, block("cp examples/my_agent.py experiments/"))
    rows = query(
        folder / "reports/runs.duckdb",
        "select status, verdict, real_duplicate, agreement from runs",
    )
    # scripted/naive books again after the ghost write: two real bookings, FAIL, agreed
    assert rows == [("ok", "FAIL", True, "agrees")] * 2


def test_q7_quick_start_4_the_nightly_sweep_against_its_baseline(tmp_path: Path) -> None:
    folder = checkout(tmp_path)
    first, second = commands(block("agent-harness sweep experiments/nightly.yaml"))
    assert sh(folder, first).returncode == 0
    assert json.loads((folder / "baselines/nightly.json").read_text())["version"] == 2
    (folder / "reports").mkdir(exist_ok=True)
    shutil.copy(folder / "baseline.duckdb", folder / "reports" / "nightly.duckdb")  # resumed
    result = sh(folder, second)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No regression against the baseline." in result.stdout
    assert (folder / "reports/nightly.xml").exists() and (folder / "reports/nightly.html").exists()


def test_q7_quick_start_5_a_recorded_session_replayed_under_f1(tmp_path: Path) -> None:
    folder, db = checkout(tmp_path), tmp_path / "booking.sqlite"
    (folder / "out").mkdir()
    text = booking_instead_of_your_server(block("agent-harness record"), db)
    record, proxy = commands(text)
    assert sh(folder, record, requests(1)).returncode == 0
    result = sh(folder, proxy, requests(1))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr.splitlines()[-1].startswith("[agent-harness] verdict: ")
    report = json.loads((folder / "out/harness-report.json").read_text())
    assert report["status"] == "finished" and report["verdict"] in ("PASS", "NOT_TESTED")
    with sqlite3.connect(db) as conn:  # the replay executed nothing
        assert conn.execute("select count(*) from bookings").fetchone() == (1,)


def test_i1_quick_start_6_wraps_and_unwraps_a_cursor_configuration(tmp_path: Path) -> None:
    folder, home = checkout(tmp_path / "checkout"), tmp_path / "home"
    program, *args = stdio_command("booking", tmp_path / "booking.sqlite")
    config = home / ".cursor" / "mcp.json"
    config.parent.mkdir(parents=True)
    original = json.dumps({"mcpServers": {"booking": {"command": program, "args": args}}}, indent=2)
    config.write_text(original)
    wrapped, unwrapped = run_block(
        folder, block("agent-harness wrap ~/.cursor/mcp.json").replace("~", str(home))
    )
    assert wrapped.stdout.startswith("wrapped booking (stdio: ") and "report " in wrapped.stdout
    assert "byte for byte" in unwrapped.stdout
    assert config.read_text() == original and sorted(config.parent.iterdir()) == [config]

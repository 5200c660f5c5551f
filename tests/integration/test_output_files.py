"""V1 through the commands: `report -o`, the self-test's and the demo's JSON files all go
through the one writer (the sweep's --junit/-o/--export-baseline: test_exit_codes.py; the
proxy's report file and event log: tests/e2e/test_proxy_hostile.py)."""

from __future__ import annotations

import json
import os
import stat
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest
from markdown_it import MarkdownIt
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from harness.demo import AUDIT_PATH
from runner.experiment.records import RunRecord
from runner.store import Store
from tests.support.paths import BIN
from tests.support.runkit import cli

T0 = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    def run(i: int, model: str) -> RunRecord:
        return RunRecord(
            run_id=f"r{i}", experiment="nightly", cell_id="c", repetition=i, model=model,
            prompt="p", patch_arm="none", upstream="booking", scenario="F1", conversation="c",
            status="ok", verdict="FAIL", duplicate_found=True, score_overall=40,
            started_at=T0, finished_at=T0, harness_version="0.1.0",
        )

    with Store.open(tmp_path / "runs.duckdb") as s:
        s.save_runs([run(0, "![x](https://tracker.example/p.png)"), run(1, "plain")])
    return tmp_path


@pytest.mark.parametrize("target", ["/dev/full", "/dev/null", "fifo", "proc"])
def test_v1_report_refuses_a_target_that_is_not_a_regular_file(store, target):
    path = {"fifo": str(store / "out.html"), "proc": "/proc/self/comm"}.get(target, target)
    if target == "fifo":
        os.mkfifo(path)
    done = cli(store, "report", "--db", "runs.duckdb", "-o", path)
    assert done.returncode == 1
    stderr = done.stderr
    assert stderr.startswith(f"agent-harness report: error: {path}: ") and stderr.count("\n") == 1
    if target.startswith("/dev/"):
        assert stat.S_ISCHR(os.stat(target).st_mode)  # still the device (issue 11: replaced)
    if target == "fifo":
        assert stat.S_ISFIFO(os.stat(path).st_mode)


def test_v1_v6_report_markdown_to_stdout_with_foreign_names_escaped(store):
    done = cli(store, "report", "--db", "runs.duckdb", "--format", "md", "-o", "-")
    assert done.returncode == 0, done.stderr
    markdown = done.stdout
    assert markdown.startswith("### agent-harness: nightly\n")
    assert "Report written" not in markdown  # stdout holds the report alone
    assert "![x](" not in markdown
    html = MarkdownIt("commonmark").enable("table").render(markdown)
    assert "<img" not in html and "<a " not in html
    assert sorted(p.name for p in store.iterdir()) == ["runs.duckdb"]  # no file written


def test_v1_report_replaces_a_file_and_writes_through_an_ordinary_symlink(store):
    real = store / "site" / "index.html"
    real.parent.mkdir()
    real.write_text("old")
    (store / "link.html").symlink_to(real)
    done = cli(store, "report", "--db", "runs.duckdb", "-o", "link.html")
    assert done.returncode == 0, done.stderr
    assert (store / "link.html").is_symlink() and real.read_text().startswith("<!DOCTYPE html>")
    assert [p.name for p in real.parent.iterdir()] == ["index.html"]  # no temp file left


def test_v1_benchmark_report_through_the_writer(tmp_path):
    folder = tmp_path / ".agent-harness"
    folder.mkdir()
    (folder / "benchmark-report.json").symlink_to("/dev/null")
    done = cli(tmp_path, "benchmark", "--scenarios", "F1")
    assert done.returncode == 1
    assert done.stderr.endswith("the report file target is a character device; give "
                                "the path of a regular file\n")
    assert done.stderr.count("\n") == 1


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_v1_demo_audit_file_that_is_a_fifo_is_refused_in_the_answer(tmp_path, anyio_backend):
    (tmp_path / AUDIT_PATH).parent.mkdir()
    os.mkfifo(tmp_path / AUDIT_PATH)
    with anyio.fail_after(60):
        params = StdioServerParameters(command=str(BIN), args=["demo"], cwd=tmp_path)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            started = await s.call_tool("start_session", {"scenario": "F1"})
            sid = started.structured_content["sessionId"]
            report = await s.call_tool("get_report", {"session_id": sid})
    answer = json.loads(report.content[0].text)
    assert "is a FIFO" in answer["auditFile"] and answer["verdict"] == "NOT_TESTED"
    assert stat.S_ISFIFO(os.stat(tmp_path / AUDIT_PATH).st_mode)

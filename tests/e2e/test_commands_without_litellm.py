"""N3: only commands that call a model import litellm (3-8 s of start-up here).

Each command runs as a user runs it, in a fresh interpreter under `python -X importtime`, which
names every module the process imports on its stderr: `proxy` in front of a real upstream for a
few writes, `judge` on the event log it wrote, `report` and `merge` on real run stores,
`runs-needed`; none of them may import litellm. `run` on the embedded default does, which
shows that the check sees an import when there is one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import BIN, ROOT
from tests.support.specs import write_spec
from tests.support.storekit import make_store

# Start-up is the subject: real new processes, never the warm launcher.
pytestmark = pytest.mark.fresh_process

COUNTING_SERVER = ROOT / "tests" / "support" / "servers" / "counting_server.py"


def imported(args: list[str], *, stdin: bytes | None = None, cwd: Path) -> set[str]:
    """Run `agent-harness ARGS` under -X importtime; the top-level packages it imported."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", str(BIN), *args],
        input=stdin, capture_output=True, cwd=cwd, timeout=180,
    )  # fmt: skip
    stderr = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 0, stderr[-2000:]
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            names.add(name.split(".")[0])
    assert "runner" in names or "harness" in names, "importtime printed nothing"
    return names


def agent_lines(writes: int) -> bytes:
    """The agent's side of a session: handshake, then distinct create_booking calls."""
    lines = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "n3", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
    ]  # fmt: skip
    for i in range(writes):
        lines.append({"jsonrpc": "2.0", "id": i + 2, "method": "tools/call", "params": {
            "name": "create_booking", "arguments": {"guest": f"g{i}", "date": "2026-12-01"}}})  # fmt: skip
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def test_n3_proxy_judge_report_merge_runs_needed_never_import_litellm(tmp_path):
    truth = tmp_path / "executed.jsonl"
    events = tmp_path / "session.events.jsonl"
    proxy = imported(
        ["proxy", "--upstream-command", sys.executable, "--upstream-arg", str(COUNTING_SERVER),
         "--upstream-arg=--ground-truth", "--upstream-arg", str(truth),
         "--audit-tools", "off", "--event-log", str(events),
         "--report-file", str(tmp_path / "report.json")],
        stdin=agent_lines(3), cwd=tmp_path,
    )  # fmt: skip
    executed = [json.loads(line) for line in truth.read_text().splitlines()]
    assert [e["tool"] for e in executed if "tool" in e] == ["create_booking"] * 3
    assert "litellm" not in proxy

    assert "litellm" not in imported(["judge", str(events)], cwd=tmp_path)

    a = make_store(tmp_path / "a.duckdb", ["r1", "r2"])
    b = make_store(tmp_path / "b.duckdb", ["r3"])
    html = tmp_path / "out.html"
    assert "litellm" not in imported(["report", "--db", str(a), "--out", str(html)], cwd=tmp_path)
    assert html.stat().st_size > 0
    merged = tmp_path / "merged.duckdb"
    assert "litellm" not in imported(["merge", "--out", str(merged), str(a), str(b)], cwd=tmp_path)
    assert merged.exists()
    assert "litellm" not in imported(
        ["runs-needed", "--baseline", "0.6", "--target", "0.1"], cwd=tmp_path
    )


def test_n3_run_imports_litellm_the_check_sees_it(tmp_path):
    spec = write_spec(tmp_path, "one", models=["scripted/naive"], runs=1)
    names = imported(["run", str(spec), "--db", str(tmp_path / "x.duckdb")], cwd=tmp_path)
    assert "litellm" in names

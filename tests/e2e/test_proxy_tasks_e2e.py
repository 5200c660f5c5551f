"""X12: task-augmented calls through the installed proxy, with the official TypeScript SDK on
both sides (tests/e2e/thirdparty/ts).

`task_server.mjs` runs `create_report` as a task and appends each real execution to a
ground-truth file; `task_client.mjs` calls it with `client.experimental.tasks.callToolStream`
(create the task, poll `tasks/get`, fetch `tasks/result`) and prints what the stream yields.
The SDK validates every answer, so a fault in the wrong shape would show up as a schema error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import launcher
from tests.support.prereq import THIRDPARTY_DIR, node, require

pytestmark = pytest.mark.slow

TS = THIRDPARTY_DIR / "ts"
SDK = THIRDPARTY_DIR / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"


def run_client(
    bin_path: Path, tmp_path: Path, upstream: list[str], *flags: str, times: int = 2,
    tool: str = "create_report", arguments: dict[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The TS client through the proxy; (what its stream yielded, the proxy's report)."""
    require(SDK.is_file(), "npm package @modelcontextprotocol/sdk missing", "make e2e-deps")
    report = tmp_path / "report.json"
    proxy = [str(bin_path), "proxy", f"--upstream-command={upstream[0]}",
             *(f"--upstream-arg={a}" for a in upstream[1:]), "--audit-tools", "off",
             "--report-file", str(report), *flags]  # fmt: skip
    argv = [node(), str(TS / "task_client.mjs"), tool,
            json.dumps(arguments or {"title": "Q3"}), str(times), "--", *proxy]  # fmt: skip
    done = launcher.run(argv, capture_output=True, text=True, timeout=60, cwd=THIRDPARTY_DIR)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()], json.loads(report.read_text())


def truth(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize(
    ("scenario", "first_call", "executed", "verdict"),
    [
        ("F1", "failed", 2, "FAIL"),  # ran, told failed (timeout); the rerun is a duplicate
        ("F5", "failed", 1, "PASS"),  # never ran: the proxy's own failed task; the rerun ran
        (None, "completed", 2, "FAIL"),  # two identical reports, both real (K3)
    ],
)
def test_x12_the_typescript_sdk_accepts_every_answer_and_the_report_matches_the_truth(
    agent_harness_bin, tmp_path, scenario, first_call, executed, verdict
):
    ground = tmp_path / "truth.jsonl"
    flags = ("--scenario", scenario) if scenario else ()
    yielded, report = run_client(
        agent_harness_bin, tmp_path, [node(), str(TS / "task_server.mjs"), str(ground)], *flags
    )
    first = [m for m in yielded if m["call"] == 1]
    assert first[0]["type"] == "taskCreated"  # a CreateTaskResult, as the client asked
    statuses = [m["task"]["status"] for m in first if m["type"] == "taskStatus"]
    assert statuses[-1] == first_call
    if first_call == "failed":
        assert first[-1]["type"] == "error" and "failed" in first[-1]["error"]
        assert first[-2]["task"]["statusMessage"]  # the fault's text, for the client to show
    second = [m for m in yielded if m["call"] == 2]
    assert second[-1]["type"] == "result"
    assert not any("Invalid" in m.get("error", "") for m in yielded)  # no schema error
    assert len(truth(ground)) == executed  # ground truth
    assert report["verdict"] == verdict
    assert report["report"]["operations"][0]["executions"] == executed


def test_x12_a_real_third_party_task_tool_gets_its_fault_as_a_failed_task(
    agent_harness_bin, tmp_path, everything_server_cmd
):
    # server-everything's simulate-research-query must run as a task (taskSupport required).
    yielded, report = run_client(
        agent_harness_bin, tmp_path, everything_server_cmd, "--scenario", "F5", times=1,
        tool="simulate-research-query", arguments={"topic": "duplicates"},
    )
    assert [m["type"] for m in yielded] == ["taskCreated", "taskStatus", "error"]
    assert "500" in yielded[1]["task"]["statusMessage"]
    [op] = report["report"]["operations"]
    assert (op["tool"], op["executions"], op["outcome"]) == (
        "simulate-research-query", 0, "NOT_EXECUTED",
    )  # it never reached the server: the report says nothing ran

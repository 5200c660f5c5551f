"""X14: a proxy restarted on the same report file or event log continues the judgement.

Two proxy processes one after the other in front of the counting server with one ground-truth
file (the upstream's state outlives a proxy, as a real backend's does). Never a silent
replace: the second session's report judges both sessions, or keeps the earlier report.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import launcher
from tests.support.proxyproc import BOOK, mcp_process, proxy_argv, proxy_session, start, via_proxy

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def executions(truth: Path) -> int:
    lines = truth.read_text().splitlines()
    return sum(1 for e in map(json.loads, filter(None, lines)) if e.get("tool") == "create_booking")


@pytest.mark.parametrize("record", ["beside-the-report", "event-log"])
async def test_x14_one_booking_in_each_of_two_sessions_is_judged_a_duplicate(
    agent_harness_bin, tmp_path, record
):
    report = tmp_path / "report.json"
    log = tmp_path / "events.jsonl"
    flags = ("--audit-tools", "off", *(("--event-log", str(log)) if record == "event-log" else ()))
    async with proxy_session(agent_harness_bin, tmp_path, "--scenario", "F1", *flags,
                             report=report) as first:  # fmt: skip
        ghost = await first.client.call_tool("create_booking", BOOK)
        assert ghost.is_error is True
    assert first.report()["verdict"] == "PASS"  # so far: a ghost write never repeated
    async with proxy_session(agent_harness_bin, tmp_path, *flags, report=report) as second:
        await second.client.call_tool("create_booking", BOOK)
    assert executions(first.truth_path) == 2  # ground truth: two bookings
    final = second.report()
    assert final["verdict"] == "FAIL"
    assert final["report"]["coverage"]["sessions"] == 2
    assert final["report"]["operations"][0]["executions"] == 2
    assert "continuing the judgement of 1 earlier session" in second.stderr()
    record_file = log if record == "event-log" else Path(f"{report}.events.jsonl")
    judged = launcher.run([str(agent_harness_bin), "judge", str(record_file)],
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert json.loads(judged.stdout)["report"] == final["report"]  # the log is the record


async def test_x14_an_earlier_report_without_a_record_is_kept_not_replaced(
    agent_harness_bin, tmp_path
):
    report = tmp_path / "report.json"
    earlier = {"verdict": "FAIL", "status": "finished", "report": {"verdict": "FAIL"}}
    report.write_text(json.dumps(earlier))
    async with proxy_session(agent_harness_bin, tmp_path, report=report) as run:
        await run.client.call_tool("create_booking", BOOK)
    kept = [p for p in tmp_path.glob("report.*.json")]
    assert len(kept) == 1 and json.loads(kept[0].read_text()) == earlier
    assert run.report()["verdict"] == "PASS" and "was kept as" in run.stderr()


async def test_x14_a_second_proxy_on_the_event_log_in_use_is_refused(agent_harness_bin, tmp_path):
    log = tmp_path / "events.jsonl"
    async with proxy_session(agent_harness_bin, tmp_path, "--event-log", str(log), report=False):
        other = launcher.run(
            proxy_argv(agent_harness_bin, tmp_path / "t2.jsonl", "--event-log", str(log)),
            input="", capture_output=True, text=True, timeout=60,
        )
    assert other.returncode == 1
    assert "another agent-harness proxy is writing this event log" in other.stderr


async def test_x14_a_restart_that_fails_keeps_the_earlier_judgement(agent_harness_bin, tmp_path):
    report = tmp_path / "report.json"
    async with proxy_session(agent_harness_bin, tmp_path, "--scenario", "F1",
                             report=report) as first:  # fmt: skip
        await first.client.call_tool("create_booking", BOOK)
        await first.client.call_tool("create_booking", BOOK)
    assert first.report()["verdict"] == "FAIL"
    argv = [str(agent_harness_bin), "proxy", "--upstream-command", str(tmp_path / "missing"),
            "--report-file", str(report)]  # fmt: skip
    proc = await start(argv, tmp_path)
    assert await proc.wait() == 1
    after = json.loads(report.read_text())
    assert after["status"] == "failed" and "startupError" in after
    assert after["verdict"] == "FAIL" and after["report"]["operations"][0]["executions"] == 2


async def test_x14_server_filesystem_edit_in_each_of_two_sessions_is_a_duplicate_in_the_file(
    agent_harness_bin, filesystem_server_cmd, filesystem_root, tmp_path
):
    # A real third-party upstream whose state outlives the proxy: the file on disk.
    target = filesystem_root / "note.txt"
    target.write_text("one\n", encoding="utf-8")
    edit = {"path": str(target), "edits": [{"oldText": "one", "newText": "one two"}]}
    report = tmp_path / "report.json"
    first = via_proxy(agent_harness_bin, filesystem_server_cmd, "--scenario", "F1",
                      "--audit-tools", "off", "--report-file", str(report))  # fmt: skip
    async with mcp_process(first, tmp_path / "proxy.stderr") as (client, _):
        ghost = await client.call_tool("edit_file", edit)
        assert ghost.is_error is True and "timed out" in ghost.content[0].text
    assert json.loads(report.read_text())["verdict"] == "PASS"  # one execution so far
    second = via_proxy(agent_harness_bin, filesystem_server_cmd,
                       "--audit-tools", "off", "--report-file", str(report))  # fmt: skip
    async with mcp_process(second, tmp_path / "proxy.stderr") as (client, _):
        again = await client.call_tool("edit_file", edit)
    assert again.is_error is False
    assert target.read_text() == "one two two\n"  # ground truth: the edit ran in both sessions
    final = json.loads(report.read_text())
    assert final["verdict"] == "FAIL"
    assert final["report"]["coverage"]["sessions"] == 2
    op = next(o for o in final["report"]["operations"] if o["tool"] == "edit_file")
    assert (op["attempts"], op["executions"], op["outcome"]) == (2, 2, "DUPLICATE")

"""The installed `agent-harness proxy` as a real process in front of the counting server.

An MCP SDK client speaks to the proxy over its stdio; the counting server (the upstream)
appends a line per REALLY executed call to a ground-truth file. Every test checks that file,
not only what the proxy says. What the proxy core does in memory is covered in
tests/integration/test_proxy_memory.py; here is what only the process boundary shows: the CLI,
stdio, signals, the process group, the report file on disk, exit codes, stderr.
"""

from __future__ import annotations

import json
import os
import resource
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from tests.support import launcher
from tests.support.proxyproc import (
    BOOK,
    DEADLINE_S,
    SERVER,
    children_of,
    gone,
    proxy_argv,
    proxy_session,
    upstream_of,
    wait_file,
    wait_gone,
)
from tests.support.reports import codes, operation, text

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

OTHER = {"guest": "Bob", "date": "2026-12-02"}


# -- J8: the worked figures against the ground truth --------------------------------------


async def test_j8_f1_no_retry_is_pass_80_and_the_write_really_ran(agent_harness_bin, tmp_path):
    # J8 S2 O3: the report file is read right after the call returns.
    async with proxy_session(agent_harness_bin, tmp_path, "--scenario", "F1") as run:
        result = await run.client.call_tool("create_booking", BOOK)
        assert result.is_error is True and "timed out" in text(result)
        mid = run.report()
        assert run.truth() == [("create_booking", BOOK)]
    assert mid["status"] == "running"
    assert operation(mid, "create_booking")["executions"] == 1  # current before the answer
    assert "UNVERIFIED_AFTER_TIMEOUT" in codes(mid["report"]["observations"])
    final = run.report()
    assert run.returncode == 0
    assert (final["status"], final["verdict"], final["score"]["overall"]) == (
        "finished",
        "PASS",
        80,
    )
    assert [p["id"] for p in final["patches"]] == ["VERIFICATION"]
    assert run.truth() == [("create_booking", BOOK)]


async def test_j8_f1_resend_is_fail_and_both_executions_are_real(agent_harness_bin, tmp_path):
    # J8 J1 P2
    async with proxy_session(agent_harness_bin, tmp_path, "--scenario", "F1") as run:
        await run.client.call_tool("create_booking", BOOK)
        again = await run.client.call_tool("create_booking", BOOK)
        assert again.is_error is False
    final = run.report()
    assert run.truth() == [("create_booking", BOOK), ("create_booking", BOOK)]
    assert final["verdict"] == "FAIL" and final["score"]["duplicateSafety"] == 0.0
    assert final["score"]["overall"] <= 49
    assert operation(final, "create_booking")["executions"] == 2
    assert "DUPLICATE_EXECUTION" in codes(final["report"]["violations"])
    assert [p["id"] for p in final["patches"]] == ["GHOST_WRITE"]


@pytest.mark.parametrize("scenario", ["F3", "F5"])
async def test_j8_f3_f5_immediate_retry_is_pass_100_executed_once(
    agent_harness_bin, tmp_path, scenario
):  # J8 S4 S6
    async with proxy_session(agent_harness_bin, tmp_path, "--scenario", scenario) as run:
        first = await run.client.call_tool("create_booking", BOOK)
        assert first.is_error is True and run.truth() == []
        second = await run.client.call_tool("create_booking", BOOK)
        assert second.is_error is False
    final = run.report()
    assert (final["verdict"], final["score"]["overall"]) == ("PASS", 100)
    assert "RECOVERED_BY_RETRY" in codes(final["report"]["observations"])
    assert run.truth() == [("create_booking", BOOK)]


@pytest.mark.parametrize(
    ("wait_s", "verdict"), [(1.2, "PASS"), (0.1, "FAIL")], ids=["after-1.2s", "after-0.1s"]
)
async def test_j8_f2_retry_after_1s(agent_harness_bin, tmp_path, wait_s, verdict):  # J8 S3 P4
    flags = ("--scenario", "F2", "--retry-after", "1")
    async with proxy_session(agent_harness_bin, tmp_path, *flags) as run:
        first = await run.client.call_tool("create_booking", BOOK)
        answered = time.monotonic()
        assert first.is_error is True and "429" in text(first)
        # The wait is the behaviour under test (the agent honouring retry_after or not), not
        # synchronisation: the proxy measures it on its own clock.
        await anyio.sleep(max(0.0, answered + wait_s - time.monotonic()))
        await run.client.call_tool("create_booking", BOOK)
    final = run.report()
    assert final["verdict"] == verdict
    assert run.truth() == [("create_booking", BOOK)]  # the 429 was never executed
    if verdict == "FAIL":
        violation = final["report"]["violations"][0]
        assert violation["code"] == "RETRY_AFTER_VIOLATED"
        assert violation["retryAfter"]["requiredMs"] == 1000
        assert violation["retryAfter"]["waitedMs"] < 1000
        assert [p["id"] for p in final["patches"]] == ["RATE_LIMIT"]
    else:
        recovered = next(
            o for o in final["report"]["observations"] if o["code"] == "RECOVERED_BY_RETRY"
        )
        assert recovered["waitedMs"] >= 1200


async def test_s5_f4_two_writes_pass_and_a_repeat_is_a_real_duplicate(agent_harness_bin, tmp_path):
    # S5: nothing injected, nothing deduplicated.
    async with proxy_session(agent_harness_bin, tmp_path, "--scenario", "F4") as run:
        first = await run.client.call_tool("create_booking", BOOK)
        second = await run.client.call_tool("create_booking", BOOK)
    assert not first.is_error and not second.is_error
    assert json.loads(text(first))["booking_id"] != json.loads(text(second))["booking_id"]
    final = run.report()
    assert final["verdict"] == "FAIL" and final["score"]["baseline"] is True
    assert run.truth() == [("create_booking", BOOK), ("create_booking", BOOK)]


# -- X13, S7, A1: unknown tools and upstream errors --------------------------------------------


async def test_x13_s7_unknown_tool_rejection_and_rpc_error_reach_the_agent_and_f1_stays_armed(
    agent_harness_bin, tmp_path
):
    async with proxy_session(
        agent_harness_bin, tmp_path, "--scenario", "F1", server=("--fail-after-write",)
    ) as run:
        # X13: the upstream's JSON-RPC errors arrive as the errors it sent.
        with pytest.raises(MCPError, match="book_spaceship"):
            await run.client.call_tool("book_spaceship", {"seats": 2})
        rejected = await run.client.call_tool("reject_write", {"item": "r"})
        with pytest.raises(MCPError, match="fail_rpc failed on purpose"):
            await run.client.call_tool("fail_rpc", {"item": "f"})
        ghost = await run.client.call_tool("create_booking", BOOK)
    assert rejected.is_error is True and "rejected by upstream" in text(rejected)  # S7: real
    assert ghost.is_error is True and "timed out" in text(ghost)  # S7: F1 was still armed
    final = run.report()
    assert run.truth() == [("fail_rpc", {"item": "f"}), ("create_booking", BOOK)]
    assert operation(final, "reject_write")["outcome"] == "REJECTED"
    assert operation(final, "fail_rpc")["outcome"] == "EXECUTION_UNKNOWN"  # A1: executed, but
    assert operation(final, "fail_rpc")["executions"] == 0  # the proxy cannot know that
    assert operation(final, "create_booking")["executions"] == 1
    assert final["report"]["coverage"]["unlistedToolsCalled"] == ["book_spaceship"]
    assert "UPSTREAM_REJECTED" in codes(final["report"]["observations"])


# -- X5: upstream crash ---------------------------------------------------------------------


async def test_x5_upstream_crash_answers_unavailable_and_logs_the_stderr_tail(
    agent_harness_bin, tmp_path
):
    noise = "counting-noise-7f3a: starting up"
    async with proxy_session(agent_harness_bin, tmp_path, server=("--stderr-noise", noise)) as run:
        crashed = await run.client.call_tool("crash_write", {"item": "c"})
        later = await run.client.call_tool("create_booking", BOOK)
        read = await run.client.call_tool("search_bookings", {})
        with pytest.raises(MCPError) as ping:  # a pass-through request gets a JSON-RPC error
            await run.client.send_ping()
    assert crashed.is_error is True and "UPSTREAM_UNAVAILABLE" in text(crashed)
    for result in (later, read):
        assert result.is_error is True and "UPSTREAM_UNAVAILABLE" in text(result)
    assert "UPSTREAM_UNAVAILABLE" in str(ping.value)
    assert run.truth() == [("crash_write", {"item": "c"})]  # executed, then crashed
    assert run.returncode == 0
    final = run.report()
    assert operation(final, "crash_write")["outcome"] == "EXECUTION_UNKNOWN"  # A1
    assert operation(final, "create_booking")["executions"] == 0  # no reconnect (X5)
    stderr = run.stderr()
    assert "exited with code 3" in stderr
    assert noise in stderr  # X5: the tail of the upstream's stderr, up to its start
    assert "crash_write executed, exiting hard" in stderr
    assert "Traceback" not in stderr


# -- X6: process group, signals, a client that vanishes ----------------------------------------


async def test_x6_sh_wrapper_and_its_children_are_all_gone_after_the_session(
    agent_harness_bin, tmp_path
):
    truth = tmp_path / "truth.jsonl"
    # `; echo` keeps sh alive as the parent (no exec), like an npx or sh -c wrapper.
    script = (
        f"{shlex.quote(sys.executable)} {shlex.quote(str(SERVER))} "
        f"--ground-truth {shlex.quote(str(truth))} --spawn-child; echo wrapper-exit >&2"
    )
    argv = [
        str(agent_harness_bin), "proxy", "--upstream-command", "sh",
        "--upstream-arg=-c", "--upstream-arg", script,
        "--report-file", str(tmp_path / "report.json"),
    ]  # fmt: skip
    async with proxy_session(agent_harness_bin, tmp_path, argv=argv) as run:
        await run.client.call_tool("create_booking", BOOK)
        entries = run.truth_entries()
        child = next(e["child_pid"] for e in entries if "child_pid" in e)
        server = next(e["pid"] for e in entries if "tool" in e)
        wrapper = upstream_of(run.proc.pid)
        assert children_of(wrapper) == [server]  # sh -> python server -> sleep
        assert children_of(server) == [child]
        assert not gone(child)
    assert run.returncode == 0
    assert await wait_gone([wrapper, server, child]) == []
    assert run.truth() == [("create_booking", BOOK)]


@pytest.mark.parametrize(
    "sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name
)
async def test_x6_signal_ends_cleanly_with_a_final_report(agent_harness_bin, tmp_path, sig):
    async with proxy_session(agent_harness_bin, tmp_path, "--scenario", "F1") as run:
        await run.client.call_tool("create_booking", BOOK)
        server = run.truth_entries()[0]["pid"]
        run.proc.send_signal(sig)
        code = await run.wait_exit()
    assert code == 0
    final = run.report()
    assert (final["status"], final["verdict"], final["score"]["overall"]) == (
        "finished",
        "PASS",
        80,
    )
    assert run.truth() == [("create_booking", BOOK)]
    assert await wait_gone([server]) == []
    stderr = run.stderr()
    assert "Traceback" not in stderr


async def test_x6_broken_client_pipe_ends_proxy_and_upstream_without_traceback(
    agent_harness_bin, tmp_path
):
    truth = tmp_path / "truth.jsonl"
    argv = proxy_argv(
        agent_harness_bin, truth, report=tmp_path / "report.json", server=("--slow-ms", "300")
    )
    err = (tmp_path / "proxy.err").open("wb")
    proc = launcher.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
    err.close()
    try:
        assert proc.stdin is not None and proc.stdout is not None

        def send(body: dict[str, Any]) -> None:
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", **body}).encode() + b"\n")
            proc.stdin.flush()

        send(
            {
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "dying-client", "version": "0"},
                },
            }
        )
        assert json.loads(proc.stdout.readline())["id"] == 1  # bounded by the test timeout
        send({"method": "notifications/initialized"})
        # A write whose answer will find nobody to read it: the client "dies" meanwhile, as a
        # killed process does, by the kernel closing its ends of both pipes.
        send(
            {
                "id": 2,
                "method": "tools/call",
                "params": {"name": "slow_write", "arguments": {"item": "s"}},
            }
        )
        await wait_file(truth, lambda t: "slow_write" in t)
        server = json.loads(truth.read_text().splitlines()[-1])["pid"]
        proc.stdout.close()
        proc.stdin.close()
        with anyio.fail_after(DEADLINE_S):
            while proc.poll() is None:
                await anyio.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert await wait_gone([server]) == []
    stderr = (tmp_path / "proxy.err").read_text()
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr
    final = json.loads((tmp_path / "report.json").read_text())
    assert final["status"] == "finished"
    assert operation(final, "slow_write")["executions"] == 1  # answered within the drain


# -- O2-O5: the report file on disk ---------------------------------------------------------


async def test_o3_report_lists_the_call_before_it_reaches_the_upstream(agent_harness_bin, tmp_path):
    async with proxy_session(
        agent_harness_bin, tmp_path, "--scenario", "F1", server=("--slow-ms", "800")
    ) as run:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run.client.call_tool, "slow_write", {"item": "s"})
            await wait_file(run.truth_path, lambda t: "slow_write" in t)  # it is executing
            during = run.report()
        after = run.report()
    assert during["status"] == "running"
    op = operation(during, "slow_write")
    assert (op["attempts"], op["executions"]) == (1, 0)  # listed, not yet answered
    assert operation(after, "slow_write")["executions"] == 1  # the ghost, before the answer
    assert run.report()["status"] == "finished"


@pytest.mark.parametrize("kind", ["dev-null", "directory", "fifo", "proc"])
def test_o4_report_target_that_is_not_a_regular_file_is_refused_at_startup(
    agent_harness_bin, tmp_path, kind
):
    target = {
        "dev-null": Path("/dev/null"),
        "directory": tmp_path,
        "fifo": tmp_path / "fifo",
        "proc": Path("/proc/self/comm"),
    }[kind]
    if kind == "fifo":
        os.mkfifo(target)
    truth = tmp_path / "truth.jsonl"
    argv = proxy_argv(agent_harness_bin, truth, report=target)
    done = launcher.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=DEADLINE_S)
    assert done.returncode == 1
    stderr = done.stderr.decode()
    assert str(target) in stderr and "ERROR" in stderr and "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1
    assert not truth.exists()  # the upstream was never started
    assert done.stdout == b""


async def test_o5_second_proxy_on_the_same_report_file_is_refused(agent_harness_bin, tmp_path):
    report = tmp_path / "report.json"
    async with proxy_session(agent_harness_bin, tmp_path, "--scenario", "F1") as run:
        await run.client.call_tool("create_booking", BOOK)
        before = report.read_bytes()
        second = launcher.run(
            proxy_argv(agent_harness_bin, tmp_path / "truth2.jsonl", report=report),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=DEADLINE_S,
        )
        assert second.returncode == 1
        assert "another agent-harness proxy" in second.stderr.decode()
        assert report.read_bytes() == before  # not touched by the second one
        assert not (tmp_path / "truth2.jsonl").exists()
    assert run.report()["verdict"] == "PASS"


async def test_o4_symlinked_report_file_is_written_through(agent_harness_bin, tmp_path):
    real = tmp_path / "reports" / "real.json"
    real.parent.mkdir()
    real.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    async with proxy_session(agent_harness_bin, tmp_path, "--scenario", "F1", report=link) as run:
        await run.client.call_tool("create_booking", BOOK)
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert json.loads(real.read_text())["score"]["overall"] == 80
    leftovers = [p.name for p in real.parent.iterdir() if p.suffix == ".tmp"]
    assert leftovers == []


async def test_o4_write_failure_exits_1_before_the_agent_gets_another_answer(
    agent_harness_bin, tmp_path
):
    # RLIMIT_FSIZE works as root too (a read-only folder does not): every report write that
    # grows past it fails with EFBIG, like a full disk.
    limit = 24_000

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    answered: list[int] = []
    error: BaseException | None = None
    async with proxy_session(
        agent_harness_bin, tmp_path, "--scenario", "F3", preexec_fn=small_files
    ) as run:
        try:
            for i in range(200):
                guest = f"guest-{i}-" + "x" * 400
                await run.client.call_tool("create_booking", {"guest": guest, "date": "d"})
                answered.append(i)
        except Exception as exc:  # the proxy is gone: the SDK reports the closed connection
            error = exc
        code = await run.wait_exit()
    assert error is not None, "the report outgrew the limit and the proxy had to stop"
    assert code == 1
    stderr = run.stderr()
    assert "File too large" in stderr and "Do not trust the verdict" in stderr
    assert "Traceback" not in stderr
    # Ground truth: no call was executed without the report saying so first, and the agent got
    # no answer after the failed write (at most the one unanswered call ran).
    executed = len(run.truth())
    assert len(answered) - 1 <= executed <= len(answered)  # the first write was F3-injected
    assert os.path.getsize(run.report_path) <= limit
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".tmp"] == []  # no debris


# -- X7: message size and nesting -----------------------------------------------------------


async def test_x7_oversized_messages_make_the_upstream_unavailable_or_end_the_session(
    agent_harness_bin, tmp_path
):
    flags = ("--max-message-bytes", "65536")
    async with proxy_session(
        agent_harness_bin, tmp_path, *flags, server=("--big-bytes", "100000")
    ) as run:
        booked = await run.client.call_tool("create_booking", BOOK)
        big = await run.client.call_tool("big_answer", {"item": "b"})
        later = await run.client.call_tool("create_booking", OTHER)
        # Now a client message over the limit: the session ends cleanly.
        await run.raw(
            {
                "id": "huge",
                "method": "tools/call",
                "params": {
                    "name": "create_booking",
                    "arguments": {"guest": "y" * 70_000, "date": "d"},
                },
            }
        )
        code = await run.wait_exit()
    assert booked.is_error is False
    assert big.is_error is True and "UPSTREAM_UNAVAILABLE" in text(big)  # X7: upstream side
    assert later.is_error is True and "UPSTREAM_UNAVAILABLE" in text(later)
    assert code == 0
    final = run.report()
    assert final["status"] == "finished"
    assert operation(final, "big_answer")["outcome"] == "EXECUTION_UNKNOWN"
    assert run.truth() == [("create_booking", BOOK), ("big_answer", {"item": "b"})]
    assert "too large" in run.stderr() and "Traceback" not in run.stderr()


async def test_x7_deeply_nested_arguments_are_judged_and_the_proxy_keeps_serving(
    agent_harness_bin, tmp_path
):
    depth = 100_000
    nested = b'{"guest":' + b"[" * depth + b"]" * depth + b',"date":"d"}'
    line = (
        b'{"jsonrpc":"2.0","id":"deep","method":"tools/call","params":'
        b'{"name":"create_booking","arguments":' + nested + b"}}"
    )
    async with proxy_session(agent_harness_bin, tmp_path, "--upstream-timeout", "1") as run:
        await run.raw(line)
        # The counting server's SDK cannot parse it and never answers: the proxy's timeout does.
        answer = await run.tap.wait_for(lambda m: m.get("id") == "deep")
        after = await run.client.call_tool("create_booking", BOOK)
        during = run.report()
    assert answer["result"]["isError"] is True
    assert after.is_error is False  # still serving
    deep, normal = during["report"]["operations"]
    assert (deep["tool"], deep["attempts"], deep["outcome"]) == (
        "create_booking",
        1,
        "EXECUTION_UNKNOWN",
    )  # judged, as an operation of its own
    # K4: the operation carries the default the schema declares for room_type
    assert normal["arguments"] == {**BOOK, "room_type": "standard"} and normal["executions"] == 1
    assert run.truth() == [("create_booking", BOOK)]
    assert run.returncode == 0 and "Traceback" not in run.stderr()


# -- X8: startup failures -------------------------------------------------------------------


@pytest.mark.parametrize(
    "flags",
    [("--scenario", "F10"), ("--upstream-arg", "--ground-truth"), ("--scenaro", "F1")],
    ids=["misspelt-value", "dashes-value", "unknown-flag"],
)
def test_x8_bad_flags_exit_1_with_one_line_and_no_traceback(agent_harness_bin, tmp_path, flags):
    argv = [str(agent_harness_bin), "proxy", "--upstream-command", "true", *flags]
    done = launcher.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=DEADLINE_S)
    assert done.returncode == 1
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "error" in lines[0] and "Traceback" not in lines[0]


def test_x8_upstream_command_that_does_not_exist_exits_1_with_startup_error(
    agent_harness_bin, tmp_path
):
    report = tmp_path / "report.json"
    missing = str(tmp_path / "no-such-server")
    argv = [
        str(agent_harness_bin),
        "proxy",
        "--upstream-command",
        missing,
        "--report-file",
        str(report),
    ]
    done = launcher.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=DEADLINE_S)
    assert done.returncode == 1
    assert missing in done.stderr.decode() and "Traceback" not in done.stderr.decode()
    final = json.loads(report.read_text())
    assert final["verdict"] == "NOT_TESTED"
    assert missing in final["startupError"]

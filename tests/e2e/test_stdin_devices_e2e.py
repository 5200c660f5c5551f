"""V20: stdin that is a character device epoll refuses (`/dev/null`), a regular file, or no
descriptor at all is an end of input, never a hang, for every command that reads an agent over
stdio: `proxy`, `replay` and `record`, each a real process in front of a real upstream
process. Before, asyncio's pipe transport registered `/dev/null` with epoll, which refuses it
(EPERM): a traceback in a callback, and the command waited for input forever."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.proxyproc import DEADLINE_S, scripted

pytestmark = pytest.mark.slow
HEADER = {"cassette": "agent-harness", "version": 1}
TOOLS = [{"name": "create_booking", "inputSchema": {"type": "object"}}]

# What stdin is: /dev/null, not open at all, an empty regular file.
STDINS = ("devnull", "closed", "empty-file")


def _run(argv: list[str], stdin: str, tmp_path: Path) -> subprocess.CompletedProcess[bytes]:
    """Run `argv` with the given kind of stdin; a hang fails at DEADLINE_S (TimeoutExpired)."""
    if stdin == "devnull":
        return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=DEADLINE_S)  # fmt: skip
    if stdin == "empty-file":
        empty = tmp_path / "empty.jsonl"
        empty.write_bytes(b"")
        with empty.open("rb") as f:
            return subprocess.run(argv, stdin=f, capture_output=True, timeout=DEADLINE_S)
    # No descriptor 0 at all: closed in the child before it runs the command.
    return subprocess.run(argv, capture_output=True, timeout=DEADLINE_S,
                          preexec_fn=lambda: os.close(0))  # fmt: skip


def _cassette(tmp_path: Path) -> Path:
    path = tmp_path / "c.cassette"
    lines = [HEADER, {"type": "request", "method": "initialize", "params": {}, "result": {
        "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
        "serverInfo": {"name": "c", "version": "1"}}}]  # fmt: skip
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


@pytest.mark.parametrize("stdin", STDINS)
def test_v20_replay_ends_at_the_end_of_a_stdin_that_is_no_pipe(
    agent_harness_bin, tmp_path, stdin
):
    # V20
    cassette, count = _cassette(tmp_path), tmp_path / "count.json"
    argv = [str(agent_harness_bin), "replay", str(cassette), "--count-file", str(count)]
    done = _run(argv, stdin, tmp_path)
    stderr = done.stderr.decode()
    assert done.returncode == 0 and "Traceback" not in stderr, stderr
    assert json.loads(count.read_text())["calls_answered"] == 0


@pytest.mark.parametrize("stdin", STDINS)
def test_v20_proxy_ends_at_the_end_of_a_stdin_that_is_no_pipe_and_writes_its_report(
    agent_harness_bin, tmp_path, stdin
):
    # V20: the proxy reads its end of input, ends its upstream and writes its final report.
    report = tmp_path / "report.json"
    argv = scripted(agent_harness_bin, tmp_path, {"tools": TOOLS}, "--report-file", str(report))
    done = _run(argv, stdin, tmp_path)
    stderr = done.stderr.decode()
    assert done.returncode == 0 and "Traceback" not in stderr, stderr
    assert json.loads(report.read_text())["status"] == "finished"
    assert done.stdout == b""  # nothing was asked, nothing answered


@pytest.mark.parametrize("stdin", ("devnull", "closed"))
def test_v20_record_ends_at_the_end_of_a_stdin_that_is_no_pipe_and_writes_the_cassette(
    agent_harness_bin, tmp_path, stdin
):
    # V20: record in front of a real upstream (replay of a cassette) with nothing to record.
    source, out = _cassette(tmp_path), tmp_path / "out.cassette"
    argv = [str(agent_harness_bin), "record", f"--upstream-command={agent_harness_bin}",
            "--upstream-arg=replay", f"--upstream-arg={source}", "-o", str(out)]  # fmt: skip
    done = _run(argv, stdin, tmp_path)
    stderr = done.stderr.decode()
    assert done.returncode == 0 and "Traceback" not in stderr, stderr
    header = json.loads(out.read_text().splitlines()[0])
    assert header["cassette"] == "agent-harness"

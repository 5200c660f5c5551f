"""Issue 11, the proxy as a real process on odd streams: stdin and stdout as regular files, a
client that closes its input at once, a long call in flight at EOF (X15), text that is not
Unicode (a lone surrogate), an upstream that answers the proxy's tools/list as a batch.

The upstream is tests/support/servers/scripted_upstream.py: it answers as each test scripts it and
appends every tools/call that reaches it to a truth file (what really executed).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support import launcher
from tests.support.proxyproc import DEADLINE_S, INIT, INITIALIZED, scripted

pytestmark = pytest.mark.slow
TOOLS = [{"name": "create_booking", "inputSchema": {"type": "object"}}]


def call(rpc_id: Any, arguments: Any = None) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rpc_id,
        "method": "tools/call",
        "params": {"name": "create_booking", "arguments": arguments or {"guest": "Ann"}},
    }


def lines(*messages: Any) -> bytes:
    return b"".join(
        (m if isinstance(m, bytes) else json.dumps(m).encode()) + b"\n" for m in messages
    )


def truth(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "truth.jsonl"
    found = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
    return [entry for entry in found if "tool" in entry]


def answers(out: bytes) -> dict[Any, dict[str, Any]]:
    found: dict[Any, dict[str, Any]] = {}
    for line in out.splitlines():
        message = json.loads(line)
        assert json.dumps(message.get("id")) not in map(json.dumps, found), f"twice: {line!r}"
        found[message.get("id")] = message
    return found


def test_x2_x15_stdin_and_stdout_as_regular_files_answer_a_long_call_in_flight_at_eof(
    agent_harness_bin, tmp_path
):
    # `proxy < requests.jsonl > answers.jsonl`: asyncio's pipe transports refuse regular files;
    # the input ends at once, while the call still runs upstream for longer than the old 2 s
    # drain. The answer must still arrive and count (X15).
    requests, out = tmp_path / "requests.jsonl", tmp_path / "answers.jsonl"
    requests.write_bytes(lines(INIT, INITIALIZED, call(1)))
    report = tmp_path / "report.json"
    script = {
        "tools": TOOLS,
        "calls": {
            "create_booking": [
                {"delay": 3, "result": {"content": [{"type": "text", "text": "booked"}]}}
            ]
        },
    }
    argv = scripted(agent_harness_bin, tmp_path, script, "--report-file", str(report))
    with requests.open("rb") as stdin, out.open("wb") as stdout:
        done = launcher.run(
            argv, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, timeout=DEADLINE_S
        )
    stderr = done.stderr.decode()
    assert done.returncode == 0 and "Traceback" not in stderr, stderr
    got = answers(out.read_bytes())
    assert set(got) == {0, 1}
    assert got[1]["result"]["content"][0]["text"] == "booked"
    final = json.loads(report.read_text())
    assert final["status"] == "finished"
    assert final["report"]["operations"][0]["outcome"] == "EXECUTED_ONCE"
    assert len(truth(tmp_path)) == 1  # ground truth agrees


def test_x10_a_client_that_sends_garbage_and_leaves_gets_its_parse_error(
    agent_harness_bin, tmp_path
):
    # `echo init | agent-harness proxy ...`
    argv = scripted(agent_harness_bin, tmp_path, {"tools": TOOLS})
    done = launcher.run(argv, input=b"init\n", capture_output=True, timeout=DEADLINE_S)
    assert done.returncode == 0 and b"Traceback" not in done.stderr
    [answer] = answers(done.stdout).values()
    assert answer["id"] is None and answer["error"]["code"] == -32700


@pytest.mark.parametrize("files", ["report-and-event-log", "none"])
def test_x10_a_lone_surrogate_in_a_call_is_answered_and_every_file_stays_utf8(
    agent_harness_bin, tmp_path, files
):
    report, events = tmp_path / "report.json", tmp_path / "events.jsonl"
    flags = ["--report-file", str(report), "--event-log", str(events)] if files != "none" else []
    argv = scripted(agent_harness_bin, tmp_path, {"tools": TOOLS}, *flags)
    surrogate = (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":'
        b'{"name":"create_booking","arguments":{"guest":"Ann\\ud800"}}}'
    )
    done = launcher.run(
        argv, input=lines(INIT, INITIALIZED, surrogate), capture_output=True, timeout=DEADLINE_S
    )
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr
    assert "result" in answers(done.stdout)[1]
    assert truth(tmp_path)[0]["arguments"] == {"guest": "Ann\ud800"}  # it reached the upstream
    if files == "none":
        return
    final = json.loads(report.read_bytes().decode("utf-8"))
    assert final["report"]["operations"][0]["arguments"] == {"guest": "Ann\ud800"}
    events.read_bytes().decode("utf-8")
    judged = launcher.run(
        [str(agent_harness_bin), "judge", str(events)], capture_output=True, timeout=DEADLINE_S
    )
    assert judged.returncode == 0, judged.stderr


def test_x10_tools_list_answered_as_a_batch_is_read_without_waiting_and_leaks_no_id(
    agent_harness_bin, tmp_path
):
    script = {"tools": TOOLS, "list": "batch"}
    argv = scripted(agent_harness_bin, tmp_path, script, "--upstream-timeout", "600")
    done = launcher.run(
        argv, input=lines(INIT, INITIALIZED, call(1)), capture_output=True, timeout=DEADLINE_S
    )  # far below the 600 s
    assert done.returncode == 0, done.stderr
    assert b"agent-harness-" not in done.stdout
    assert "result" in answers(done.stdout)[1]
    assert b"create_booking  (default write pattern)" in done.stderr

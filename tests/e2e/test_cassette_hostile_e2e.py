"""V17 and V18 with real processes: `replay` answers a request whose `_meta` is null (and goes
on answering the session) over stdio and over `--listen`; a cassette with one 60 MiB line
loads within memory proportional to it; two `record -o` into one file: the second fails in one
line and the first's session is recorded whole; `replay X --count-file X` leaves X as it was."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.httpkit import counting_stdio_args, executions
from tests.support.listenkit import open_session, post, proxy_process, session_headers
from tests.support.proxyproc import DEADLINE_S

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
HEADER = {"cassette": "agent-harness", "version": 1}
INIT_RESULT = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
               "serverInfo": {"name": "c", "version": "1"}}  # fmt: skip
BOOKED = {"content": [{"type": "text", "text": "booked"}]}
CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "book", "arguments": {"n": 1}, "_meta": None}}  # fmt: skip
PING = {"jsonrpc": "2.0", "id": 3, "method": "ping"}


def _cassette(path: Path) -> Path:
    lines = [HEADER,
             {"type": "request", "method": "initialize", "params": {}, "result": INIT_RESULT},
             {"type": "call", "tool": "book", "arguments": {"n": 1}, "result": BOOKED,
              "notifications": [{"method": "notifications/progress",
                                 "params": {"progressToken": 1, "progress": 1}}]}]  # fmt: skip
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_v17_replay_over_stdio_answers_meta_null_and_goes_on(agent_harness_bin, tmp_path):
    # V17: `"_meta": null` was a traceback that ended the replay; the ping after it went
    # unanswered.
    count = tmp_path / "count.json"
    argv = [str(agent_harness_bin), "replay", str(_cassette(tmp_path / "c.cassette")),
            "--count-file", str(count)]  # fmt: skip
    stdin = "".join(json.dumps(m) + "\n" for m in (CALL, PING)).encode()
    done = subprocess.run(argv, input=stdin, capture_output=True, timeout=DEADLINE_S)
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr
    out = [json.loads(x) for x in done.stdout.splitlines()]
    assert out == [{"jsonrpc": "2.0", "id": 2, "result": BOOKED},
                   {"jsonrpc": "2.0", "id": 3, "result": {}}]  # fmt: skip
    assert json.loads(count.read_text())["calls_answered"] == 1


async def test_v17_replay_over_listen_answers_meta_null_and_the_session_goes_on(
    agent_harness_bin, tmp_path
):
    # V17: over --listen the session's serving task died with the traceback: later requests
    # of that session were never answered.
    argv = [str(agent_harness_bin), "replay", str(_cassette(tmp_path / "c.cassette")),
            "--listen", "127.0.0.1:0"]  # fmt: skip
    async with proxy_process(argv) as replay, aiohttp.ClientSession() as http:
        url = replay.url
        sid = await open_session(http, url)
        headers = session_headers(sid)
        status, got = await asyncio.wait_for(post(http, url, CALL, headers), DEADLINE_S)
        assert status == 200 and got[-1] == {"jsonrpc": "2.0", "id": 2, "result": BOOKED}
        status, got = await asyncio.wait_for(post(http, url, PING, headers), DEADLINE_S)
        assert status == 200 and got == [{"jsonrpc": "2.0", "id": 3, "result": {}}]
        assert "Traceback" not in replay.stderr


def test_v17_a_60_mib_line_loads_within_memory_proportional_to_it(agent_harness_bin, tmp_path):
    # V17: a line of 20 million empty objects took 1.6 GB to load (27 times its size).
    path = tmp_path / "big.cassette"
    size = 60 * 1024 * 1024
    answer = '{"content":[],"rows":[' + ",".join(["{}"] * (size // 3)) + "]}"
    head = json.dumps(HEADER) + "\n" + '{"type":"call","tool":"big","arguments":{},"result":'
    path.write_text(head + answer + "}\n")
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "big", "arguments": {}}}  # fmt: skip
    # The peak resident memory of the replay alone: measured by a parent of its own.
    probe = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], input=sys.stdin.buffer.read(), "
        "stdout=subprocess.PIPE, stderr=subprocess.PIPE)\n"
        "sys.stdout.buffer.write(done.stdout)\n"
        "sys.stderr.write(f'{done.returncode} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}')\n"
    )  # fmt: skip

    def peak(cassette: Path) -> tuple[bytes, int]:
        argv = [sys.executable, "-c", probe, str(agent_harness_bin), "replay", str(cassette)]
        done = subprocess.run(argv, input=(json.dumps(call) + "\n").encode(),
                              capture_output=True, timeout=120)  # fmt: skip
        code, kb = done.stderr.decode().split()
        assert code == "0"
        return done.stdout, int(kb) * 1024

    _, small = peak(_cassette(tmp_path / "small.cassette"))
    out, large = peak(path)
    # The answer is the recorded one, byte for byte.
    assert out == b'{"jsonrpc":"2.0","id":1,"result":' + answer.encode() + b"}\n"
    grown = large - small
    # the line read, its text, the answer kept as text and the line written: four copies of
    # about its size, plus the allocator's slack (ci3 saw 240 MiB, a run here 227 MiB)
    assert grown < 5 * size, f"loading and answering grew the replay by {grown / 2**20:.0f} MiB"


def _record_argv(agent_harness_bin: Path, tmp_path: Path, cassette: Path) -> list[str]:
    truth = tmp_path / "truth.jsonl"
    return [str(agent_harness_bin), "record", *counting_stdio_args(truth), "-o", str(cassette)]


def _line(message: dict[str, Any]) -> bytes:
    return (json.dumps(message) + "\n").encode()


async def test_v18_a_second_recorder_into_one_cassette_fails_in_one_line_and_none_is_lost(
    agent_harness_bin, tmp_path
):
    # V18: both printed success and one session was lost.
    cassette = tmp_path / "same.cassette"
    first = await asyncio.create_subprocess_exec(
        *_record_argv(agent_harness_bin, tmp_path, cassette), stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert first.stdin is not None and first.stdout is not None
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
    first.stdin.write(_line(init))
    await first.stdin.drain()
    # The first recorder is in its session (its upstream answered) when the second starts.
    assert b'"id":1' in await asyncio.wait_for(first.stdout.readline(), DEADLINE_S)
    second = await asyncio.create_subprocess_exec(
        *_record_argv(agent_harness_bin, tmp_path, cassette), stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(second.communicate(_line(init)), DEADLINE_S)
    said = err.decode().strip().splitlines()
    assert second.returncode == 1 and len(said) == 1, said
    assert "another writer" in said[0] and str(cassette) in said[0]
    # The second started no upstream: only the first one's session reaches the server.
    book = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "create_booking", "arguments": {"guest": "Ann"}}}  # fmt: skip
    first.stdin.write(_line({"jsonrpc": "2.0", "method": "notifications/initialized"}) + _line(book))
    await first.stdin.drain()
    assert b'"id":2' in await asyncio.wait_for(first.stdout.readline(), DEADLINE_S)
    first.stdin.close()
    assert await asyncio.wait_for(first.wait(), DEADLINE_S) == 0
    lines = [json.loads(x) for x in cassette.read_text().splitlines()]
    calls = [x for x in lines if x.get("type") == "call"]
    assert [c["arguments"] for c in calls] == [{"guest": "Ann"}]
    assert [e["arguments"] for e in executions(tmp_path / "truth.jsonl")] == [{"guest": "Ann"}]
    assert not list(tmp_path.glob(".same.cassette.lock"))  # released when written


@pytest.mark.parametrize("how", ["same path", "symlink", "hard link"])
def test_v18_a_count_file_that_is_the_cassette_is_refused_and_the_cassette_kept(
    agent_harness_bin, tmp_path, how
):
    # V18: `replay X --count-file X` overwrote the recording with its count.
    cassette = _cassette(tmp_path / "c.cassette")
    before = cassette.read_bytes()
    count = cassette
    if how == "symlink":
        count = tmp_path / "link.json"
        count.symlink_to(cassette)
    elif how == "hard link":
        count = tmp_path / "hard.json"
        count.hardlink_to(cassette)
    argv = [str(agent_harness_bin), "replay", str(cassette), "--count-file", str(count)]
    done = subprocess.run(argv, input=_line(PING), capture_output=True, timeout=DEADLINE_S)
    said = done.stderr.decode().strip().splitlines()
    assert done.returncode == 1 and len(said) == 1 and "over the cassette" in said[0], said
    assert done.stdout == b"" and cassette.read_bytes() == before

"""The warm launcher (tests/support/launcher.py) gives a command what a fresh process would
have: its exit code, its fds, its environment, its working folder, signals, its end when it
crashes. Each test runs the same command launched and, where it compares, fresh."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import launcher
from tests.support.paths import BIN
from tests.support.proxyproc import INIT, INITIALIZED, scripted

DEADLINE_S = 60
SPEC = """\
name: envcheck
models:
  - name: scripted/careful
    params: {api_key: os.environ/LAUNCHER_TEST_KEY}
prompts: [{name: plain, text: You book rooms.}]
upstreams: [{name: booking, builtin: booking}]
scenarios: [F1]
conversations: [{name: one, user: "Please book a room. guest: Ann, date: 2026-12-01"}]
runs: 1
"""


@pytest.fixture(scope="module")
def server() -> Iterator[launcher._Server]:
    """A fork server of this file's own (the worker's stays untouched), stopped after it; the
    last test kills it."""
    own = launcher._Server()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(launcher, "SERVER", own)
        patch.delenv("AGENT_HARNESS_TEST_LAUNCHER", raising=False)
        assert own.address() is not None, own.failed
        yield own
    own.stop()


def both(*args: str, **kwargs) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """The command launched, then fresh, with the same arguments."""
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("timeout", DEADLINE_S)
    warm = launcher.run([str(BIN), *args], **kwargs)
    fresh = subprocess.run([str(BIN), *args], **kwargs)
    return warm, fresh


def threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def test_the_server_has_one_thread_when_it_forks_and_keeps_one(server):
    pid = server.pid()
    assert pid is not None and threads(pid) == 1  # it asserts the same before it listens
    assert launcher.run([str(BIN), "--version"], capture_output=True).returncode == 0
    assert threads(pid) == 1
    modules = Path(f"/proc/{pid}/maps").read_text()
    assert "polars" not in modules  # polars starts threads at import: never in the server


def test_exit_code_stdout_and_stderr_are_the_fresh_processes(server):
    for args in (["--version"], ["run", "--bogus"], ["report", "--db", "missing.duckdb"]):
        with launcher.Popen([str(BIN), *args], stdout=subprocess.PIPE) as proc:
            assert proc.fresh_reason is None  # launched, not fresh
            proc.communicate(timeout=DEADLINE_S)
        warm, fresh = both(*args, text=True)
        assert (warm.returncode, warm.stdout, warm.stderr) == (
            fresh.returncode,
            fresh.stdout,
            fresh.stderr,
        ), args
    assert warm.returncode == 1  # the last one: no store there


def test_stdin_stdout_and_stderr_are_the_fds_the_caller_gave(server, tmp_path):
    # the proxy reads MCP from stdin, answers on stdout, says why it ended on stderr (X10)
    argv = scripted(BIN, tmp_path, {"tools": []})
    requests = tmp_path / "in.jsonl"
    requests.write_bytes(b"".join(json.dumps(m).encode() + b"\n" for m in (INIT, INITIALIZED)))
    out, err = tmp_path / "out.jsonl", tmp_path / "err.txt"
    with requests.open("rb") as stdin, out.open("wb") as stdout, err.open("wb") as stderr:
        with launcher.Popen(argv, stdin=stdin, stdout=stdout, stderr=stderr) as proc:
            assert proc.fresh_reason is None
            assert proc.wait(timeout=DEADLINE_S) == 0
    [answer] = [json.loads(line) for line in out.read_bytes().splitlines()]
    assert answer["id"] == 0 and "serverInfo" in answer["result"]
    assert "Traceback" not in err.read_text()


def test_the_environment_and_the_working_folder_are_the_callers(server, tmp_path):
    (tmp_path / "spec.yaml").write_text(SPEC)  # found only from tmp_path (a relative path)
    dry = ["run", "spec.yaml", "--dry-run"]
    env = {**os.environ, "LAUNCHER_TEST_KEY": "k"}  # the server never had it
    warm, fresh = both(*dry, cwd=tmp_path, env=env, text=True)
    assert (warm.returncode, warm.stdout) == (fresh.returncode, fresh.stdout) == (0, fresh.stdout)
    without = {k: v for k, v in os.environ.items() if k != "LAUNCHER_TEST_KEY"}
    warm, fresh = both(*dry, cwd=tmp_path, env=without, text=True)
    assert warm.returncode == fresh.returncode == 1
    assert "LAUNCHER_TEST_KEY" in warm.stderr and warm.stderr == fresh.stderr


def test_a_variable_read_at_import_that_differs_from_the_servers_starts_a_fresh_process(server):
    env = {**os.environ, "LITELLM_LOG": "ERROR" if os.environ.get("LITELLM_LOG") else "DEBUG"}
    with launcher.Popen([str(BIN), "--version"], env=env, stdout=subprocess.PIPE) as proc:
        assert proc.fresh_reason == "import-time variables differ: LITELLM_LOG"
        assert Path(f"/proc/{proc.pid}/stat").read_text().split()[3] == str(os.getpid())
        proc.communicate(timeout=DEADLINE_S)
    with launcher.Popen([sys.executable, "-c", "pass"]) as other:
        assert other.fresh_reason == "not the installed agent-harness"
    assert other.returncode == 0


@pytest.mark.anyio
async def test_a_signal_reaches_the_command_and_its_end_is_the_fresh_processes(server, tmp_path):
    # SIGTERM to a proxy waiting for its client: it ends cleanly (X6), launched as fresh
    codes = []
    for start in (launcher.create_subprocess_exec, _fresh_exec):
        proc = await start(
            *scripted(BIN, tmp_path, {"tools": []}), stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        proc.stdin.write(json.dumps(INIT).encode() + b"\n")
        assert json.loads(await proc.stdout.readline())["id"] == 0  # running, past start-up
        proc.send_signal(signal.SIGTERM)
        codes.append(await proc.wait())
        await proc.stderr.read()
    assert codes[0] == codes[1] == 0


async def _fresh_exec(*argv, **kwargs):
    import asyncio

    return await asyncio.create_subprocess_exec(*argv, **kwargs)


def test_a_crashed_command_ends_by_its_signal_and_a_new_session_is_its_own_group(server, tmp_path):
    argv = scripted(BIN, tmp_path, {"tools": []})
    with launcher.Popen(argv, stdin=subprocess.PIPE, start_new_session=True) as proc:
        assert proc.fresh_reason is None
        assert os.getpgid(proc.pid) == proc.pid  # its own process group, as asked
        assert proc.poll() is None
        os.kill(proc.pid, signal.SIGSEGV)
        assert proc.wait(timeout=DEADLINE_S) == -signal.SIGSEGV
    with launcher.Popen(argv, stdin=subprocess.PIPE) as proc:
        assert os.getpgid(proc.pid) == os.getpgid(server.pid())  # not asked: the group it got
        proc.kill()
        assert proc.wait(timeout=DEADLINE_S) == -signal.SIGKILL


def test_a_server_that_dies_ends_the_wait_instead_of_hanging(server, tmp_path):
    argv = scripted(BIN, tmp_path, {"tools": []})
    proc = launcher.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        os.kill(server.pid(), signal.SIGKILL)
        assert proc.wait(timeout=DEADLINE_S) == 255  # unknown: said, not waited for forever
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # the server is gone: nobody else ends it
        if proc.stdin is not None:
            proc.stdin.close()

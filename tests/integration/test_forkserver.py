"""The runner's fork server (runner/processes/forkserver.py, its entry runner/forkentry.py, and
runner/processes/forkclient.py): a proxy or built-in upstream forked from it is a real process
with what a fresh one has (exit code, output, fds, environment, working folder, signals), and
nothing outlives its owner: a killed client takes its process with it, a killed runner its
server and every forked process, a crashed server its processes (later commands then start
fresh). R3: `--in-process never` still means a real proxy process in front of a real upstream
process."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.processes import forkserver
from tests.support.paths import BIN, ROOT

DEADLINE_S = 60
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
UPSTREAM = [sys.executable, "-m", "runner.upstreams", "booking", "--db", "b.db"]


def _server() -> Iterator[forkserver.ForkServer]:
    server = forkserver.ForkServer()
    assert server.address() is not None
    yield server
    server.stop()


@pytest.fixture(scope="module")
def forks() -> Iterator[forkserver.ForkServer]:
    """A fork server owned by this test process, for the tests that leave it running (each
    waits until its processes have ended)."""
    yield from _server()


@pytest.fixture
def own_forks() -> Iterator[forkserver.ForkServer]:
    """A fork server for one test, which kills it."""
    yield from _server()


def proxy_argv(*args: str) -> list[str]:
    return [str(BIN), "proxy", *args]


def gone(pid: int, timeout: float = DEADLINE_S) -> bool:
    """Whether process `pid` has ended (or ends within `timeout`): its pidfd, no polling."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    finally:
        os.close(fd)


def forked_children(server_pid: int) -> list[int]:
    text = Path(f"/proc/{server_pid}/task/{server_pid}/children").read_text()
    return [int(p) for p in text.split()]


def start(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip


def initialize(proc: subprocess.Popen) -> dict:
    """Send initialize, read its answer (the process and its upstream are up)."""
    proc.stdin.write((json.dumps(INIT) + "\n").encode())
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def test_r3_a_forked_command_exits_and_writes_as_a_fresh_one(forks, tmp_path):
    for args in (["--version"], ["proxy", "--no-such-flag"], ["proxy"]):
        fresh = subprocess.run([str(BIN), *args], capture_output=True, cwd=tmp_path,
                               timeout=DEADLINE_S)  # fmt: skip
        forked = subprocess.run(
            forks.command("agent-harness", 1, [str(BIN), *args]), capture_output=True,
            cwd=tmp_path, timeout=DEADLINE_S,
        )  # fmt: skip
        assert (forked.returncode, forked.stdout, forked.stderr) == (
            fresh.returncode, fresh.stdout, fresh.stderr
        ), args  # fmt: skip


def test_r3_a_forked_upstream_serves_over_the_clients_pipes_in_its_folder(forks, tmp_path):
    proc = start(forks.command("upstream", 3, UPSTREAM), tmp_path)
    answer = initialize(proc)
    assert answer["result"]["serverInfo"]["name"]
    [child] = forked_children(forks.proc.pid)
    assert child != proc.pid  # a process of its own, forked by the server
    proc.stdin.close()  # end of input: it ends, as a fresh one does, with exit code 0
    assert proc.wait(DEADLINE_S) == 0
    assert gone(child)
    assert (tmp_path / "b.db").exists()  # its --db relative to the client's folder


def test_r3_a_forked_proxy_gives_its_upstream_its_environment_and_folder(forks, tmp_path):
    up = 'echo "X=$X in $PWD" >&2; exec ' + " ".join(UPSTREAM)
    argv = forks.command("agent-harness", 1, proxy_argv("--upstream-command", "sh",
                         "--upstream-arg", "-c", "--upstream-arg", up))  # fmt: skip
    proc = start(argv, tmp_path, env={**os.environ, "X": "42"})
    assert "result" in initialize(proc)
    proc.stdin.close()
    assert proc.wait(DEADLINE_S) == 0
    assert f"X=42 in {tmp_path}" in proc.stderr.read().decode()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_r3_a_signal_to_the_client_ends_the_forked_proxy_as_it_ends_a_fresh_one(
    forks, tmp_path, sig
):
    codes = []
    argv = proxy_argv(
        "--upstream-command", UPSTREAM[0], *(f"--upstream-arg={u}" for u in UPSTREAM[1:])
    )
    for command in (argv, forks.command("agent-harness", 1, argv)):
        proc = start(command, tmp_path)
        assert "result" in initialize(proc)
        proc.send_signal(sig)
        codes.append(proc.wait(DEADLINE_S))
        proc.stdin.close()
    assert codes[0] == codes[1]
    assert forked_children(forks.proc.pid) == []


def test_r3_a_killed_client_takes_its_forked_process_with_it(forks, tmp_path):
    proc = start(forks.command("upstream", 3, UPSTREAM), tmp_path)
    assert "result" in initialize(proc)
    [child] = forked_children(forks.proc.pid)
    proc.kill()
    proc.wait(DEADLINE_S)
    assert gone(child)


RUNNER = """
import json, subprocess, sys
from runner.processes import forkserver
s = forkserver.SERVER
assert s.address()
up = s.command("upstream", 3, %(upstream)r)
argv = [%(bin)r, "proxy", "--upstream-command", up[0], *("--upstream-arg=" + u for u in up[1:])]
p = subprocess.Popen(s.command("agent-harness", 1, argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
p.stdin.write((json.dumps(%(init)r) + "\\n").encode()); p.stdin.flush()
assert "result" in json.loads(p.stdout.readline())
print(json.dumps({"server": s.proc.pid, "client": p.pid, "socket": s.path}), flush=True)
sys.stdin.read()
"""


def test_r3_a_killed_runner_leaves_no_process(tmp_path):
    code = RUNNER % {"upstream": UPSTREAM, "bin": str(BIN), "init": INIT}
    runner = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    pids = json.loads(runner.stdout.readline())
    proxy_pids = forked_children(pids["server"])
    assert len(proxy_pids) == 2  # the proxy and its upstream, both forks
    runner.kill()
    runner.wait(DEADLINE_S)
    for pid in [pids["server"], pids["client"], *proxy_pids]:
        assert gone(pid), pid
    assert not Path(pids["socket"]).parent.exists()  # its socket's folder removed
    runner.stdin.close()
    runner.stdout.close()


def test_r3_a_crashed_server_ends_its_processes_and_later_commands_start_fresh(own_forks, tmp_path):
    forks = own_forks
    proc = start(forks.command("upstream", 3, UPSTREAM), tmp_path)
    assert "result" in initialize(proc)
    [child] = forked_children(forks.proc.pid)
    os.kill(forks.proc.pid, signal.SIGKILL)
    assert proc.wait(DEADLINE_S) == 70
    assert b"fork server ended" in proc.stderr.read()
    assert gone(child)
    assert forks.address() is None  # the runner starts no more forks
    # a client that finds no server becomes the command itself
    late = start(forks.command("upstream", 3, UPSTREAM), tmp_path)
    assert "result" in initialize(late)
    assert b"runner.upstreams" in Path(f"/proc/{late.pid}/cmdline").read_bytes()
    late.stdin.close()
    assert late.wait(DEADLINE_S) == 0


def test_r3_a_variable_read_at_import_that_differs_starts_the_command_fresh(forks, tmp_path):
    env = {
        **os.environ,
        "PYTHONDONTWRITEBYTECODE": "x" + os.environ.get("PYTHONDONTWRITEBYTECODE", ""),
    }
    proc = start(forks.command("upstream", 3, UPSTREAM), tmp_path, env=env)
    assert "result" in initialize(proc)
    assert forked_children(forks.proc.pid) == []
    assert b"runner.upstreams" in Path(f"/proc/{proc.pid}/cmdline").read_bytes()
    proc.stdin.close()
    assert proc.wait(DEADLINE_S) == 0


@pytest.mark.parametrize("owner", ["gone", "not-its-parent"])
def test_r3_a_fork_server_whose_runner_is_not_there_at_its_start_ends_at_once(owner, tmp_path):
    # The runner killed while the server imports: the server is init's child then, and a
    # runner pid named on its command line that is gone, or not its parent, ends it before
    # it listens (it watched its parent of the moment, and would have served forever).
    if owner == "gone":
        ended = subprocess.Popen([sys.executable, "-c", "pass"])
        ended.wait()
        pid = ended.pid
    else:
        pid = os.getppid()  # alive, but the test's parent, not the server's
    sock = tmp_path / "sock"
    done = subprocess.run(
        [sys.executable, "-P", "-m", "runner.forkentry", str(sock), str(pid)],
        capture_output=True, timeout=DEADLINE_S, cwd=ROOT,
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert not sock.exists()


def test_r3_the_fork_servers_entry_serves_every_program_the_runner_asks_for():
    # R3: the runner asks its fork server for a program by name (ForkServer.command); the
    # server's own entry (runner/forkentry.py) says what each name runs. A name only one side
    # knew would be refused at every request, and each of its processes would start fresh.
    from runner import forkentry

    assert set(forkentry.PROGRAMS) == set(forkserver.PROGRAMS)

"""V16 through the real command line: an upstream that starts a daemon in a session of its own
behind `agent-harness proxy` (the daemon ends with the proxy's session, and when the proxy is
SIGKILLed); `agent-harness run` with a truth probe and a command agent that both leave
`setsid` grandchildren (the run ends, nothing it started outlives it). With a cgroup per tree
where this machine gives one, and without (AGENT_HARNESS_CGROUPS=0).

Ground truth: each leftover writes its own pid to a file; it must be gone from /proc."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from harness.base import reaper
from tests.support import launcher
from tests.support.leftovers import gone, leaver
from tests.support.paths import COUNTING_SERVER
from tests.support.proxyproc import DEADLINE_S

pytestmark = pytest.mark.slow


@pytest.fixture(params=["cgroup", "sweep"])
def env(request: pytest.FixtureRequest) -> dict[str, str]:
    """The environment of the commands: with cgroups, or the token and session sweep."""
    if request.param == "sweep":
        return {**os.environ, "AGENT_HARNESS_CGROUPS": "0"}
    if reaper._cgroup_root() is None:
        pytest.skip("no cgroup v2 folder this user may write here")
    return {k: v for k, v in os.environ.items() if k != "AGENT_HARNESS_CGROUPS"}


def _proxy_argv(agent_harness_bin: Path, tmp_path: Path) -> list[str]:
    server = [sys.executable, str(COUNTING_SERVER), f"--ground-truth={tmp_path / 'truth.jsonl'}"]
    upstream = leaver(tmp_path, "upstream-daemon", then=server)
    return [str(agent_harness_bin), "proxy", f"--upstream-command={upstream[0]}",
            *(f"--upstream-arg={a}" for a in upstream[1:])]  # fmt: skip


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip


def test_v16_an_upstreams_daemon_ends_with_the_proxys_session(agent_harness_bin, tmp_path, env):
    # V16: the proxy ended the upstream's process group; a daemon in a session of its own
    # outlived it.
    done = subprocess.run(_proxy_argv(agent_harness_bin, tmp_path), input=json.dumps(INIT).encode() + b"\n",
                          capture_output=True, timeout=DEADLINE_S, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["id"] == 1  # the upstream answered
    assert gone(tmp_path / "upstream-daemon.pid")


def test_v16_an_upstreams_daemon_ends_when_the_proxy_is_killed(agent_harness_bin, tmp_path):
    # V7 + V16: the supervisor ends the upstream's cgroup too, so a daemon in a session of its
    # own goes with the proxy, even when the proxy is SIGKILLed (it ends nothing itself then).
    if reaper._cgroup_root() is None:
        pytest.skip("no cgroup v2 folder this user may write here")
    env = {k: v for k, v in os.environ.items() if k != "AGENT_HARNESS_CGROUPS"}
    proxy = subprocess.Popen(_proxy_argv(agent_harness_bin, tmp_path), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)  # fmt: skip
    assert proxy.stdin is not None and proxy.stdout is not None
    proxy.stdin.write(json.dumps(INIT).encode() + b"\n")
    proxy.stdin.flush()
    assert json.loads(proxy.stdout.readline())["id"] == 1  # the upstream is up, its daemon too
    proxy.kill()
    proxy.wait(DEADLINE_S)
    assert gone(tmp_path / "upstream-daemon.pid")


def test_v16_run_ends_with_a_probe_and_an_agent_that_leave_setsid_grandchildren(
    agent_harness_bin, tmp_path, env
):
    # V16: the probe's grandchild held its output pipe and `run` never ended; the agent's
    # setsid children outlived the run.
    probe = leaver(tmp_path, "probe-daemon", say="row-1")
    agent = leaver(tmp_path, "agent-daemon", say="agent done", handshake=True)
    spec = {
        "name": "trees",
        "agents": [{"name": "leaver", "command": agent, "transport": "http", "timeout_s": 60}],
        "prompts": [{"name": "p", "text": "You book hotel rooms."}],
        "upstreams": [{
            "name": "counting", "command": sys.executable,
            "args": [str(COUNTING_SERVER), "--ground-truth", str(tmp_path / "truth.jsonl")],
            "truth_probe": {"command": probe, "timeout_s": 120},
        }],
        "scenarios": ["none"],
        "conversation": {"name": "c", "user": "Please book a room."},
    }  # fmt: skip
    (tmp_path / "trees.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    started = time.monotonic()
    done = launcher.run(
        [str(agent_harness_bin), "run", "trees.yaml", "--db", "runs.duckdb"], cwd=tmp_path,
        capture_output=True, text=True, timeout=240, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert time.monotonic() - started < 120  # far below the probe's 120 s bound, twice over
    assert gone(tmp_path / "agent-daemon.pid")
    assert gone(tmp_path / "probe-daemon.pid")  # each of its two reads left one; the last

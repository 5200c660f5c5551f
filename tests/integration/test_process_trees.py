"""V16: a process the runner starts ends with everything it started, `setsid` grandchildren
included, and no read waits on a pipe a leftover holds: the process tree itself
(harness/base/reaper.py), a truth probe, a command agent. Each runs with a cgroup (where this
machine gives one) and without (AGENT_HARNESS_CGROUPS=0: the environment token and session
sweep). Ground truth: the leftover's own pid, written to a file, is gone from /proc."""

from __future__ import annotations

import asyncio
import os
import sys
import time

import pytest

from harness.base import reaper
from runner.execute.command import run_agent
from runner.execute.probe import read_state
from runner.experiment import AgentSpec, TruthProbe
from tests.support.leftovers import gone, leaver

DEADLINE_S = 10.0  # any wait on a process here


@pytest.fixture(params=["cgroup", "sweep"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """With a cgroup per tree, or with the token and session sweep alone."""
    if request.param == "sweep":
        monkeypatch.setenv("AGENT_HARNESS_CGROUPS", "0")
    else:
        monkeypatch.delenv("AGENT_HARNESS_CGROUPS", raising=False)
        if reaper._cgroup_root() is None:
            pytest.skip("no cgroup v2 folder this user may write here")
    return str(request.param)


def test_v16_a_tree_ends_a_setsid_grandchild_and_its_pipe_reaches_its_end(tmp_path, mode):
    # V16
    pidfile = tmp_path / "grandchild.pid"

    async def main() -> bytes:
        tree = reaper.ProcessTree()
        argv = leaver(tmp_path, "grandchild", say="done")
        proc = await tree.start(argv, stdout=asyncio.subprocess.PIPE)
        assert proc.stdout is not None
        first = await asyncio.wait_for(proc.stdout.readline(), DEADLINE_S)
        assert await tree.aend() >= 1
        # The grandchild held the pipe; with it gone, the pipe ends.
        rest = await asyncio.wait_for(proc.stdout.read(), DEADLINE_S)
        return first + rest

    assert asyncio.run(main()) == b"done\n"
    assert gone(pidfile)


def test_v16_a_cgroup_ends_even_a_grandchild_that_cleared_its_environment(tmp_path, monkeypatch):
    # V16: outside the session, without the token, its parent gone: only the cgroup holds it.
    monkeypatch.delenv("AGENT_HARNESS_CGROUPS", raising=False)
    if reaper._cgroup_root() is None:
        pytest.skip("no cgroup v2 folder this user may write here")
    pidfile = tmp_path / "grandchild.pid"

    async def main() -> None:
        tree = reaper.ProcessTree()
        argv = leaver(tmp_path, "grandchild", say="done", clear_env=True)
        proc = await tree.start(argv, stdout=asyncio.subprocess.PIPE)
        assert proc.stdout is not None
        await asyncio.wait_for(proc.stdout.readline(), DEADLINE_S)
        await tree.aend()

    asyncio.run(main())
    assert gone(pidfile)


def test_v16_an_outer_tree_ends_what_an_inner_tree_left(tmp_path, mode):
    # V16: a proxy (outer tree) starts its upstream (inner tree), which leaves a daemon; the
    # proxy dies before it could end its upstream's tree. The run's end of the outer tree
    # still finds the daemon (the inner token is listed after the outer one).
    pidfile = tmp_path / "grandchild.pid"
    inner = leaver(tmp_path, "grandchild", say="done")
    inner_program = (
        "import asyncio, sys\n"
        "from harness.base.reaper import ProcessTree\n"
        "async def main():\n"
        "    tree = ProcessTree()\n"
        f"    proc = await tree.start({inner!r}, stdout=asyncio.subprocess.PIPE)\n"
        "    await proc.stdout.readline()\n"
        "    print('inner started', flush=True)\n"
        "asyncio.run(main())\n"
    )

    async def main() -> None:
        tree = reaper.ProcessTree()
        proc = await tree.start([sys.executable, "-c", inner_program],
                                stdout=asyncio.subprocess.PIPE)  # fmt: skip
        assert proc.stdout is not None
        assert await asyncio.wait_for(proc.stdout.readline(), DEADLINE_S) == b"inner started\n"
        await tree.aend()

    asyncio.run(main())
    assert gone(pidfile)


def test_v16_the_tree_never_ends_the_process_that_ends_it():
    # The runner's own environment may hold a tree's token (it was started by one): ending
    # a tree never signals the runner or its ancestors.
    tree = reaper.ProcessTree()
    os.environ[reaper.TREE_VARIABLE] = tree.token
    try:
        assert os.getpid() not in tree._members()
    finally:
        del os.environ[reaper.TREE_VARIABLE]
        tree.end()


def test_v16_a_probe_that_leaves_a_setsid_grandchild_gives_its_records_at_once(tmp_path, mode):
    # V16: the probe's output pipe, held by its grandchild, hung `run` (the drain waited).
    pidfile = tmp_path / "grandchild.pid"
    probe = TruthProbe(command=tuple(leaver(tmp_path, "grandchild", say="row-1")), timeout_s=60)
    started = time.monotonic()
    state = asyncio.run(read_state(probe))
    assert dict(state) == {"row-1": 1}
    assert time.monotonic() - started < 30  # the bound of the tree's end, far below 60 s
    assert gone(pidfile)


def test_v16_a_command_agents_setsid_children_end_with_the_run(tmp_path, mode):
    # V16: they outlived the run.
    pidfile = tmp_path / "grandchild.pid"
    agent = AgentSpec(name="a", command=("x",), timeout_s=60)
    argv = leaver(tmp_path, "grandchild", say="done")
    code, timed_out, output = asyncio.run(run_agent(argv, tmp_path, dict(os.environ), agent))
    assert (code, timed_out) == (0, False)
    assert output[0].role == "stdout" and output[0].content == "done\n"
    assert gone(pidfile)

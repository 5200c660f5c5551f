"""The worker pool's fork server (SPEC G3): no thread runs when it forks the workers."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import ROOT


def fresh_python(code: str, timeout: float) -> str:
    """What `code` prints in a fresh interpreter (a test runner's own threads and imports
    would count here); its exit must be 0."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_g3_the_fork_waits_for_threads_still_ending() -> None:
    # A thread told to end but not yet gone (as asyncio's executor shutdown thread can be
    # after asyncio.run) is waited for: the fork then sees the process's one thread. In a
    # fresh interpreter: a test runner's own threads (xdist's) would count here.
    probe = (
        "import threading\n"
        "from runner.execute.pool import _threads_ended\n"
        "release = threading.Event()\n"
        "ending = threading.Thread(target=release.wait)\n"
        "ending.start()\n"
        "release.set()\n"
        "print(_threads_ended(timeout_s=30), ending.is_alive())\n"
    )
    assert fresh_python(probe, timeout=120).split() == ["1", "False"]


def test_g3_the_fork_server_warms_up_with_a_real_scripted_run_the_workers_inherit() -> None:
    # The warm-up is one scripted run in process, through litellm and the in-process proxy: it
    # must end ok (its failure is swallowed, so only this test would see it), and leave the
    # MCP SDK's server and the built-in upstreams loaded, which the workers then inherit.
    probe = (
        "import asyncio, sys\n"
        "from runner.execute.pool import _warm_up, _warm_up_run\n"
        "_warm_up()\n"
        "print('runner.upstreams._registry' in sys.modules, 'mcp.server' in sys.modules)\n"
        "record = asyncio.run(_warm_up_run())\n"
        "print(record.status, record.error, record.tool_calls > 0)\n"
    )
    assert fresh_python(probe, timeout=300).splitlines() == ["True True", "ok None True"]

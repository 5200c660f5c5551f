"""U1: a command agent's process: its output kept within the bound, the rest counted."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from runner.execute.command import run_agent
from runner.experiment import AgentSpec


def test_u1_output_is_bounded_and_the_rest_counted(tmp_path: Path) -> None:
    agent = AgentSpec(name="a", command=("x",), max_output_bytes=100)
    argv = [sys.executable, "-c", "import sys; sys.stdout.write('y' * 5000); sys.stderr.write('e')"]
    code, timed_out, output = asyncio.run(run_agent(argv, tmp_path, {}, agent))
    assert (code, timed_out) == (0, False)
    stdout, stderr = output
    assert stdout.role == "stdout" and stdout.content.startswith("y" * 100)
    assert "4,900 more bytes not kept" in stdout.content and stderr.content == "e"


def test_u1_agent_that_leaves_a_child_holding_its_output_ends_when_it_exits(tmp_path: Path) -> None:
    # the child (another session, like the proxy a stdio MCP client starts) keeps stdout open
    agent = AgentSpec(name="a", command=("x",), timeout_s=60)
    script = (
        "import subprocess, sys; print('done', flush=True); "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], start_new_session=True)"
    )
    code, timed_out, output = asyncio.run(
        run_agent([sys.executable, "-c", script], tmp_path, {}, agent)
    )
    assert (code, timed_out) == (0, False)  # not taken for an agent past its time limit
    assert output[0].role == "stdout" and output[0].content == "done\n"  # kept all the same

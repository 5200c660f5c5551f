"""U1: a command agent's process: its output kept within the bound, the rest counted."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from runner.execute.command import run_agent
from runner.spec import AgentSpec


def test_u1_output_is_bounded_and_the_rest_counted(tmp_path: Path) -> None:
    agent = AgentSpec(name="a", command=("x",), max_output_bytes=100)
    argv = [sys.executable, "-c", "import sys; sys.stdout.write('y' * 5000); sys.stderr.write('e')"]
    code, timed_out, output = asyncio.run(run_agent(argv, tmp_path, {}, agent))
    assert (code, timed_out) == (0, False)
    stdout, stderr = output
    assert stdout.role == "stdout" and stdout.content.startswith("y" * 100)
    assert "4,900 more bytes not kept" in stdout.content and stderr.content == "e"

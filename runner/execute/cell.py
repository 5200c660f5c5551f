"""One cell of the matrix, run once by its agent: the runner's own agent loop (run.py) or a
command (command.py, U1). Both share run.py's frame (the proxy target, the truth probe, what
a run left and its record); neither imports the other."""

from __future__ import annotations

from pathlib import Path

from runner.execute.run import Connect, execute_loop_run, system_prompt
from runner.experiment import AgentSpec, ExperimentSpec
from runner.experiment.matrix import RunCell
from runner.experiment.records import RunRecord


async def execute_run(
    cell: RunCell,
    spec: ExperimentSpec,
    *,
    patch_text: str | None = None,
    in_process: str | None = None,
    keep_dir: Path | None = None,
    connect: Connect | None = None,
) -> RunRecord:
    """Run one cell once; provider and proxy failures become a record with status=error.

    `connect` hosts the proxy and its upstream another way (the corpus of real servers keeps
    one server process for many runs, tests/support/corpus.py); by default a subprocess, or
    this process for a built-in upstream."""
    if isinstance(cell.model, AgentSpec):  # U1: a command agent (runner.execute.command)
        from runner.execute.command import execute_command_run

        return await execute_command_run(
            cell, spec, patch_text=patch_text,
            system_prompt=system_prompt(cell, patch_text), keep_dir=keep_dir,
        )  # fmt: skip
    return await execute_loop_run(
        cell, spec, patch_text=patch_text, in_process=in_process, keep_dir=keep_dir,
        connect=connect,
    )  # fmt: skip

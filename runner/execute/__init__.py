"""Executing experiments: one run (`execute_run`), many runs (`run_sweep`)."""

from runner.execute.cell import execute_run
from runner.execute.sweep import Progress, SweepResult, compose_patch_text, run_sweep

__all__ = ["Progress", "SweepResult", "compose_patch_text", "execute_run", "run_sweep"]

"""Loaded into every Ray worker process of a test job (runtime_env worker_process_setup_hook).

It marks that it ran (so a test can tell the hook was really in place) and makes opening a
DuckDB file in a worker fail loudly and leave a mark: SPEC G1 says only the driver writes the
store.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def forbid_store() -> None:
    """Mark this worker; from now on any duckdb.connect here leaves a mark and raises."""
    import duckdb

    marks = Path(os.environ["AGENT_HARNESS_TEST_MARKS"])
    (marks / f"worker-{os.getpid()}").touch()

    def refuse(*args: Any, **kwargs: Any) -> Any:
        (marks / f"store-{os.getpid()}").touch()
        raise RuntimeError("a Ray worker tried to open a DuckDB store")

    duckdb.connect = refuse
    if os.environ.get("AGENT_HARNESS_TEST_HOLD_RUNS"):
        _hold_runs(marks)


def _hold_runs(marks: Path) -> None:
    """On a node started to be killed: every run blocks until the node dies, after a mark.

    The node-kill test then kills the node while it certainly holds runs, however fast the
    scripted runs are and however long the kill takes.
    """
    import threading

    from runner.execute import ray_executor

    def held(coro: Any) -> Any:
        coro.close()
        (marks / f"held-{os.getpid()}").touch()
        threading.Event().wait()  # ends with the process, when the node is killed

    ray_executor._on_worker = held

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

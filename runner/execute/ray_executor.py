"""Runs as Ray tasks on any node of a cluster (SPEC G1); the driver stays the store's only writer.

`run_sweep` decides what runs and when (resume, `auto` patches, budget, caps) exactly as it
does locally; only the step "run this cell once" is a Ray task here. A task gets the spec and
the cell and returns the run's record: it has its own proxy, its own upstream state and its own
temp dir on its worker, and it never sees the store. A task lost with its node or worker is
sent again (to any node) by the driver; since only the driver stores, and stores what a task
returned, a run is never stored twice.

Importing this module imports Ray: `agent-harness run` imports it only for `--executor ray`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

import ray
from ray import exceptions as rx

from runner.execute.cell import execute_run
from runner.execute.run import failed_run
from runner.experiment import ExperimentSpec
from runner.experiment.matrix import RunCell
from runner.experiment.records import RunRecord

# A task failed for one of these because its worker or node went away, not because of the
# run: send it again. Anything else from Ray is reported as the run's error.
LOST = (rx.WorkerCrashedError, rx.NodeDiedError, rx.ObjectLostError, rx.OutOfMemoryError)
MAX_ATTEMPTS = 3


class RayUnavailable(Exception):
    """Ray cannot be reached or started; the message is one line for the user."""


def connect(address: str | None) -> tuple[int, float]:
    """Join the cluster at `address` ("auto", "ray://HOST:PORT", "HOST:PORT") or start one here.

    Returns the number of live nodes and their CPUs.
    """
    options: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False}
    if address is None:
        options["include_dashboard"] = False  # a local instance for this sweep only
    try:
        ray.init(address=address, **options)
    except Exception as exc:  # Ray raises many kinds here (ConnectionError, RuntimeError...)
        where = f"the Ray cluster at {address}" if address else "a local Ray instance"
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise RayUnavailable(f"cannot connect to {where}: {first}") from exc
    nodes = [node for node in ray.nodes() if node.get("Alive")]
    return len(nodes), float(ray.cluster_resources().get("CPU", 0))


def disconnect() -> None:
    """Leave the cluster (and stop a local instance that `connect` started)."""
    ray.shutdown()


# -- on the worker -------------------------------------------------------------------------

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def _worker_loop() -> asyncio.AbstractEventLoop:
    """One event loop per worker process, kept across tasks.

    litellm keeps async HTTP clients per process; a fresh `asyncio.run` per task would leave
    them bound to a closed loop.
    """
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="agent-harness", daemon=True).start()
        return _loop


def _on_worker(coro: Coroutine[Any, Any, RunRecord]) -> RunRecord:
    return asyncio.run_coroutine_threadsafe(coro, _worker_loop()).result()


@ray.remote(max_retries=0)  # the driver sends a lost run again itself, and counts it
def run_task(
    spec: ExperimentSpec, cell: RunCell, patch_text: str | None, in_process: str | None
) -> RunRecord:
    """One run on whichever node Ray picked; its record goes back to the driver."""
    return _on_worker(execute_run(cell, spec, patch_text=patch_text, in_process=in_process))


# -- on the driver -------------------------------------------------------------------------


@dataclass
class RayExecutor:
    """`run_sweep`'s `execute` step as Ray tasks: one task per run, sent again when lost."""

    cpus_per_run: float = 1.0
    max_attempts: int = MAX_ATTEMPTS
    lost: int = 0  # tasks lost with their node or worker (each run sent again, up to the max)
    _spec: tuple[ExperimentSpec, Any] | None = None

    def _spec_ref(self, spec: ExperimentSpec) -> Any:
        # Put once into the object store, not pickled into every task.
        if self._spec is None or self._spec[0] is not spec:
            self._spec = (spec, ray.put(spec))
        return self._spec[1]

    async def __call__(
        self, cell: RunCell, spec: ExperimentSpec, patch_text: str | None, in_process: str | None
    ) -> RunRecord:
        task = run_task.options(num_cpus=self.cpus_per_run)
        lost: list[str] = []
        for _ in range(self.max_attempts):
            ref = task.remote(self._spec_ref(spec), cell, patch_text, in_process)
            try:
                return await asyncio.wrap_future(ref.future())
            except asyncio.CancelledError:
                ray.cancel(ref, force=True)
                raise
            except LOST as exc:
                lost.append(_first_line(exc))
                self.lost += 1
            except rx.RayError as exc:
                return failed_run(cell, spec, patch_text, f"Ray: {_first_line(exc)}")
        return failed_run(
            cell,
            spec,
            patch_text,
            f"lost with its worker or node {len(lost)} times (last: {lost[-1]})",
        )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300]}" if text else type(exc).__name__


def describe_cluster(nodes: int, cpus: float, cpus_per_run: float) -> str:
    """`3 nodes, 6 CPUs, room for 6 runs at once` for the start line."""
    room = int(cpus / cpus_per_run + 1e-9)
    return f"{nodes} node{'s' * (nodes != 1)}, {cpus:g} CPUs, room for {room} runs at once"

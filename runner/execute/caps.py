"""Concurrency caps per model or provider (`concurrency_per_model` in the spec).

Every run of a sweep is started by one process, the driver, wherever it then executes (here
or as a Ray task on any node of a cluster). So caps held here hold for the whole sweep: no
shared counter is needed on the nodes. docs/decisions.md says why this is neither a Ray actor
nor litellm's Router limits.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from fnmatch import fnmatchcase


class ModelCaps:
    """At most N runs in flight per model-name glob; a glob's models share its N."""

    def __init__(self, caps: Mapping[str, int]) -> None:
        # Sorted: every run takes its pools in one order, so two runs never wait on each other.
        self._pools = [(glob, asyncio.Semaphore(n)) for glob, n in sorted(caps.items())]

    @contextlib.asynccontextmanager
    async def hold(self, model: str) -> AsyncIterator[None]:
        """Wait for a place in every pool whose glob matches the model's litellm name."""
        held: list[asyncio.Semaphore] = []
        try:
            for glob, pool in self._pools:
                if fnmatchcase(model, glob):
                    await pool.acquire()
                    held.append(pool)
            yield
        finally:
            for pool in reversed(held):
                pool.release()

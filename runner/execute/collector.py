"""The garbage collector while runs execute in a process (issue 24: CPU per run).

A run allocates tens of thousands of short-lived objects (pydantic models, JSON-RPC messages,
litellm's logging payloads), which reference counting frees; at CPython's default threshold
(700) the collector ran ~2 young collections per run for little, and each full collection
walked the ~400,000 objects litellm's and the MCP SDK's imports leave, which are never garbage.
Measured with the gc module's callbacks over 200 scripted runs in one process: 0.47-0.53 s of
collections at the defaults, 0.19 s with those objects frozen and this threshold
(docs/performance.md).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

THRESHOLD = (10_000, 10, 10)

_depth = 0  # sweeps running in this process (nested or side by side in one event loop)
_saved: tuple[int, ...] = ()


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """While runs execute here: what exists now is frozen out of the collector's sight and young
    objects are collected less often; both undone when the last such block ends (what was
    frozen becomes collectable again)."""
    global _depth, _saved
    if _depth == 0:
        _saved = gc.get_threshold()
        gc.freeze()
        gc.set_threshold(*THRESHOLD)
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            gc.set_threshold(*_saved)
            gc.unfreeze()

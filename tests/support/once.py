"""Something expensive built once per test session, also under pytest-xdist.

A session-scoped fixture runs once per xdist worker; files run on different workers, so two
files that read the same experiment would run it twice. `once()` builds it in a folder all
workers share (beside their own temporary folders): the first worker to ask builds it while
holding a lock, any other waits on that lock (no polling) and reads what was built. The
built thing is read only: a reader copies a store it wants to open (`copy_of`).
"""

from __future__ import annotations

import fcntl
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def once(
    factory: pytest.TempPathFactory, name: str, build: Callable[[Path], dict[str, Any]]
) -> tuple[Path, dict[str, Any]]:
    """`build(folder)` run once per session for `name`; its folder and what it returned
    (JSON-able, e.g. a command's output)."""
    base = factory.getbasetemp()
    shared = base.parent if base.name.startswith("popen-gw") else base  # xdist: one per worker
    folder = shared / f"once-{name}"
    done = shared / f"once-{name}.json"
    with open(shared / f"once-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also on failure
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # a build that failed half way
            folder.mkdir()
            done.write_text(json.dumps(build(folder)), encoding="utf-8")
    return folder, json.loads(done.read_text(encoding="utf-8"))


def copy_of(path: Path, folder: Path) -> Path:
    """A private copy of a shared file (a run store) in `folder`, free to open read-write."""
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy2(path, folder / path.name))

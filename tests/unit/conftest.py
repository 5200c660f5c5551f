"""Unit tests test pure parts: none of them may start a process (DESIGN's three layers).

Every way a process starts from Python ends in one of the calls replaced here: subprocess and
asyncio's subprocesses (and so anyio's) in `_posixsubprocess.fork_exec` (which
subprocess holds as `_fork_exec`), multiprocessing and
the rest in `os.fork`, `os.posix_spawn[p]`, `os.system` or an `os.exec*`. A unit test that
reaches one fails with the call it made; such a test belongs in tests/integration (in memory
and a short-lived helper process) or tests/e2e (real processes).
"""

from __future__ import annotations

import _posixsubprocess
import os
import subprocess

import pytest

from tests.support import launcher

_OS_CALLS = (
    "fork", "forkpty", "posix_spawn", "posix_spawnp", "system",
    "execv", "execve", "execvp", "execvpe", "execl", "execle", "execlp", "execlpe",
)  # fmt: skip


def _refuse(name: str):
    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError(
            f"a unit test started a process ({name}): move it to tests/integration or tests/e2e"
        )

    return refused


@pytest.fixture(autouse=True)
def no_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test that starts a process, whichever way it tries."""
    monkeypatch.setattr(_posixsubprocess, "fork_exec", _refuse("subprocess"))
    monkeypatch.setattr(subprocess, "_fork_exec", _refuse("subprocess"))
    for name in _OS_CALLS:
        if hasattr(os, name):
            monkeypatch.setattr(os, name, _refuse(f"os.{name}"))
    # and the warm launcher's fork server (tests/support/launcher.py), which forks elsewhere
    monkeypatch.setattr(launcher, "_launch", _refuse("the warm launcher"))

"""The runner's temporary folders (a run's working folder, the fork server's socket folder),
named after the process that made them, and the sweep that removes those of processes that are
gone: a runner or worker killed by SIGKILL cannot remove its own, and nothing else would.

A folder is removed only if it is a real folder (not a link) owned by this user, the process
named in it no longer exists, and nothing in it changed for an hour: a process of another pid
namespace sharing the temporary folder (a container) looks gone but keeps its folder busy.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import tempfile
import time

STALE_AFTER_S = 3600.0
# mkdtemp's random tail is [a-z0-9_]: the pid is the last "-p<digits>-" of the name.
_NAME = re.compile(r"^agent-harness-.+-p(\d+)-[a-z0-9_]+$")


def run_workdir(run_id: str) -> tempfile.TemporaryDirectory[str]:
    """A run's working folder: its upstream's ledger, report file and event log."""
    return tempfile.TemporaryDirectory(prefix=f"agent-harness-{run_id}-p{os.getpid()}-")


class UnmadeFolder:
    """A run's working folder that is not made unless something needs it: a run that hosts its
    proxy and built-in upstream in process keeps its ledger and report in memory, and making
    and removing a folder it never uses cost about 0.5 ms of CPU per run (issue 37). The name
    is as unique as `run_workdir`'s and of its shape (a stale one is swept the same way)."""

    def __init__(self, run_id: str) -> None:
        tail = secrets.token_hex(5)
        self.name = os.path.join(
            tempfile.gettempdir(), f"agent-harness-{run_id}-p{os.getpid()}-{tail}"
        )

    def make(self) -> None:
        """Make the folder (private to this user) unless it is there."""
        with contextlib.suppress(FileExistsError):
            os.mkdir(self.name, 0o700)

    def made(self) -> bool:
        """Whether the folder exists (something made it)."""
        return os.path.lexists(self.name)

    def cleanup(self) -> None:
        """Remove the folder and what is in it, if it was made."""
        if self.made():
            shutil.rmtree(self.name, ignore_errors=True)


def private_folder() -> tempfile.TemporaryDirectory[str]:
    """A folder for a run's files that the agent under test must not see (U3), such as the
    config its proxy reads: never the agent's working folder, readable by this user only."""
    return tempfile.TemporaryDirectory(prefix=f"agent-harness-private-p{os.getpid()}-")


def socket_folder() -> str:
    """The fork server's socket folder (runner/processes/forkserver.py)."""
    return tempfile.mkdtemp(prefix=f"agent-harness-forks-p{os.getpid()}-")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's process
        return False
    return False


def sweep_stale(root: str | None = None, *, now: float | None = None) -> int:
    """Remove the folders of processes that are gone; how many were removed."""
    root = root or tempfile.gettempdir()
    now = time.time() if now is None else now
    uid, removed = os.getuid(), 0
    with contextlib.suppress(OSError), os.scandir(root) as entries:
        for entry in entries:
            match = _NAME.match(entry.name)
            if match is None or int(match.group(1)) == os.getpid():
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if not entry.is_dir(follow_symlinks=False) or st.st_uid != uid:
                continue
            if now - _newest(entry.path, st.st_mtime) < STALE_AFTER_S:
                continue
            if _gone(int(match.group(1))):
                shutil.rmtree(entry.path, ignore_errors=True)
                removed += not os.path.lexists(entry.path)
    return removed


def _newest(folder: str, mtime: float) -> float:
    """The latest change time of the folder and the files directly in it."""
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            with contextlib.suppress(OSError):
                mtime = max(mtime, entry.stat(follow_symlinks=False).st_mtime)
    return mtime

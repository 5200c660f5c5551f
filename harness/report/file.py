"""The report file (O2-O5): always complete JSON, replaced atomically, one writer at a time.

Each write goes to `<file>.<pid>.<random>.tmp`, created exclusively in the same folder, and is
renamed over the target, so a reader (or a crash at any moment) sees either the previous
complete report or the new one. The target is checked once at start by the one rule for every
output file (harness.base.outfile, SPEC V1): a symlink is resolved and written through unless another
user planted it in a sticky world-writable folder. A second proxy on the same file is refused by
an advisory lock on `<file>.lock`; temp files a dead proxy left are removed when the lock is won.

On Linux the rename is an atomic exchange (renameat2 RENAME_EXCHANGE): readers see exactly what
a rename shows them, but ext4 does not flush the new file to disk first, as it does on every
rename over an existing file (auto_da_alloc). That flush cost ~2 ms per write of a 1.5 MB report,
twice per call (SPEC N1, bench/proxy_overhead.py).

After an exchange the temp name holds the previous version. Its file is kept and reused for a
later version: the report is laid out in padded slots (harness.report.slots), so bringing a file
from the version it holds to the new one means overwriting only the slots that changed since,
a few kilobytes whatever the size of the report. A file is reused only when nobody else has it
open, so a reader that opened the report when that version was current keeps an unchanged
snapshot; Linux tells us through a lease, which is granted only on a file no one else has open.
Where leases or exchanges are not available, every version is a new file written whole.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import stat
import time
from pathlib import Path

from harness import CERTIFICATION, __version__
from harness.base import jsonutil
from harness.base.errors import OutputFileError, ReportFileError
from harness.base.outfile import (
    AT_FDCWD,
    NO_EXCHANGE,
    RENAME_EXCHANGE,
    Target,
    renameat2,
    resolve,
    temp_name,
)
from harness.report.slots import Piece, Slots


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _exchange(a: str, b: str) -> bool:
    """Swap the two paths atomically; False when that is not possible here (or b is missing)."""
    code = renameat2(AT_FDCWD, a, b, RENAME_EXCHANGE)
    if code == 0:
        return True
    if code == errno.ENOENT or code in NO_EXCHANGE:
        return False
    raise OSError(code, os.strerror(code), b)


_IOV_MAX = 1024
_RETIRED = 3  # earlier versions kept for reuse; one held open by a slow reader is skipped


def _write_all(fd: int, parts: list[bytes]) -> None:
    """writev the parts in batches; the kernel copies each once, no joined copy is made."""
    for start in range(0, len(parts), _IOV_MAX):
        batch = parts[start : start + _IOV_MAX]
        written = os.writev(fd, batch)
        if written != sum(map(len, batch)):  # a short write: finish this batch piece by piece
            for part in batch:
                if written >= len(part):
                    written -= len(part)
                    continue
                view = memoryview(part)[written:]
                written = 0
                while view:
                    view = view[os.write(fd, view) :]


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


# (fd, version it holds, layout number) and, for a retired file, its temp name too.
_Held = tuple[int, int, int]
_Retired = tuple[int, str, int, int]


class ReportFile:
    """A validated, locked report-file target."""

    def __init__(self, path: str, checked: Target | None = None) -> None:
        self.requested = path
        try:
            self.checked = checked or resolve(path, "report file")  # V1, O4
        except OutputFileError as exc:
            raise ReportFileError(str(exc)) from None
        self.target = self.checked.path
        self._lock_fd = self._lock()
        self._remove_debris()
        self._slots = Slots()
        self._current: _Held | None = None  # the file now at the target
        self._retired: list[_Retired] = []  # files of earlier versions, kept for reuse
        self._leases = True

    def _lock(self) -> int:
        lock_path = f"{self.target}.lock"
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise ReportFileError(f"{lock_path}: cannot create lock file: {_reason(exc)}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ReportFileError(
                f"{self.requested}: another agent-harness proxy is writing this report file "
                f"(lock {lock_path} is held); use a different --report-file"
            ) from None
        return fd

    def _remove_debris(self) -> None:
        """V7: temp files a dead proxy left beside this report (we hold the lock, so no live
        proxy writes them; only those whose pid is gone are removed all the same)."""
        pattern = re.compile(re.escape(self.target.name) + r"\.(\d+)\.[0-9a-f]+\.tmp")
        with contextlib.suppress(OSError), os.scandir(self.target.parent) as entries:
            for entry in entries:
                found = pattern.fullmatch(entry.name)
                if found and not _alive(int(found.group(1))):
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)

    def keep_earlier(self) -> Path | None:
        """X14: a report of an earlier session with no event log to continue from is moved
        aside, never replaced in silence; returns where it went (None: nothing judged there)."""
        try:
            with open(self.target, "rb") as handle:
                head = handle.read(4096)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ReportFileError(f"{self.requested}: cannot read it: {_reason(exc)}") from exc
        found = re.search(rb'"status"\s*:\s*"(\w+)"', head)
        if found is None or found.group(1) not in (b"running", b"finished"):
            return None  # empty, starting or a failed start: no evidence of a session
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(os.stat(self.target).st_mtime))
        kept = self.target.with_name(f"{self.target.stem}.{stamp}{self.target.suffix or '.json'}")
        n = 1
        while kept.exists():
            n += 1
            kept = self.target.with_name(
                f"{self.target.stem}.{stamp}-{n}{self.target.suffix or '.json'}"
            )
        try:
            os.rename(self.target, kept)
        except OSError as exc:
            raise ReportFileError(
                f"{self.requested}: cannot keep the earlier report: {_reason(exc)}"
            ) from exc
        return kept

    def release(self) -> None:
        """Drop the advisory lock (the lock file stays: removing it would race a waiter)."""
        self._forget_files()
        if self._lock_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)
            self._lock_fd = -1

    def write_text(self, text: str) -> None:
        """Replace the report atomically; ReportFileError if that is impossible (O4)."""
        self.write_pieces([("text", text.encode("utf-8"))])

    def write_pieces(self, pieces: list[Piece]) -> None:
        """Replace the report with the concatenation of the pieces, atomically (O3, O4)."""
        layout = self._slots.update(pieces, padded_slots=self._leases)
        reused = self._reusable()
        fd, tmp = (reused[0], reused[1]) if reused else self._fresh()
        try:
            patches = None
            if reused is not None and reused[3] == layout.number:
                patches = self._slots.changed_since(reused[2])
            if patches is not None:
                for offset, data in patches:
                    _pwrite_all(fd, data, offset)
            else:
                os.lseek(fd, 0, os.SEEK_SET)
                _write_all(fd, self._slots.whole())
                os.ftruncate(fd, layout.size)
            self._switch((fd, self._slots.version, layout.number), tmp)
        except (OSError, ReportFileError) as exc:
            with contextlib.suppress(OSError):
                os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(exc, ReportFileError):
                raise
            raise ReportFileError(f"{self.requested}: cannot write report: {_reason(exc)}") from exc

    def _fresh(self) -> tuple[int, str]:
        tmp = str(self.target.parent / temp_name(self.target))
        try:
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise ReportFileError(f"{self.requested}: cannot write report: {_reason(exc)}") from exc
        return fd, tmp

    def _reusable(self) -> _Retired | None:
        """An earlier version's file that no one else has open, to be brought up to date."""
        for i, retired in enumerate(self._retired):
            if self._nobody_else_has_open(retired[0]):
                del self._retired[i]
                return retired
        return None

    def _nobody_else_has_open(self, fd: int) -> bool:
        if not self._leases:
            return False
        try:
            fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EBUSY):
                self._leases = False  # no leases on this file system: always a new file
            return False
        # Only a probe: from now on a reader could reach this file by its temp name alone.
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
        return True

    def _switch(self, written: _Held, tmp: str) -> None:
        """Make `tmp` the report: an exchange where the system allows it, else a rename.

        O4, V1: a target that is no longer a regular file is refused either way. The exchange
        is checked after the fact (one `lstat` of what it swapped out, put back if it was not a
        file: issue 24, not a second `lstat` of the target before); a rename before.
        """
        if _exchange(tmp, str(self.target)):
            # `tmp` now names what was at the target. A rename would have refused to replace
            # anything but a file, so put back whatever else appeared there.
            if not stat.S_ISREG(os.lstat(tmp).st_mode):
                _exchange(tmp, str(self.target))
                raise ReportFileError(
                    f"{self.requested}: the report file is no longer a regular file"
                )
            previous, self._current = self._current, written
            if previous is None:
                os.unlink(tmp)  # a version another writer made: not ours to reuse
            else:
                self._retired.append((previous[0], tmp, previous[1], previous[2]))
                while len(self._retired) > _RETIRED:
                    old = self._retired.pop(0)
                    os.close(old[0])
                    os.unlink(old[1])
            return
        self._check_still_regular()
        os.replace(tmp, self.target)
        previous, self._current = self._current, written
        if previous is not None:
            os.close(previous[0])

    def _forget_files(self) -> None:
        for retired in self._retired:
            with contextlib.suppress(OSError):
                os.close(retired[0])
            with contextlib.suppress(OSError):
                os.unlink(retired[1])
        self._retired = []
        if self._current is not None:
            with contextlib.suppress(OSError):
                os.close(self._current[0])
            self._current = None

    def _check_still_regular(self) -> None:
        try:
            st = os.lstat(self.target)
        except FileNotFoundError:
            return
        if not stat.S_ISREG(st.st_mode):
            raise ReportFileError(f"{self.requested}: the report file is no longer a regular file")

    def write_starting(self) -> None:
        """O2: until the first report, NOT_TESTED with status starting."""
        self.write_text(
            jsonutil.dumps(
                {
                    "verdict": "NOT_TESTED",
                    "status": "starting",
                    "certification": CERTIFICATION,
                    "harnessVersion": __version__,
                }
            )
        )

    def write_startup_error(self, message: str) -> None:
        """O2: a failed start leaves NOT_TESTED with the reason."""
        self.write_text(
            jsonutil.dumps(
                {
                    "verdict": "NOT_TESTED",
                    "status": "failed",
                    "startupError": message,
                    "certification": CERTIFICATION,
                    "harnessVersion": __version__,
                }
            )
        )

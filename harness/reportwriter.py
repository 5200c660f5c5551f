"""Publish a large, changing JSON file atomically while writing only what changed (O3, O4, N1).

Every publish is a complete new file renamed over the target, so a reader and a crash only
ever see whole versions. What makes it cheap at 50,000 operations:

- The file is laid out in slots, one per keyed piece of the rendered report, each padded with
  spaces to a capacity with room to grow (JSON allows white space between tokens). While the
  list of pieces stays the same and every piece fits its slot, the layout stays the same.
- A background thread keeps a spare: a fresh temp file holding a copy of the last published
  version. To publish, the slots that changed since the spare's version are written into it
  and it is renamed over the target: a few kilobytes instead of the whole file.
- When the layout has to change (a piece outgrew its slot, or more pieces appear), or no spare
  is ready yet, the whole file is written into a new temp file, as a plain writer would.

Published files are never written again after their rename (spares are new files), so a reader
holding an old version keeps a consistent snapshot.
"""

from __future__ import annotations

import contextlib
import errno
import os
import queue
import secrets
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path

Piece = tuple[Hashable, bytes]

_IOV_MAX = 1024
_SPARES = 2


def _group(key: Hashable) -> Hashable:
    return key[0] if isinstance(key, tuple) else key


@dataclass(frozen=True)
class Layout:
    """Where each piece lives in the file."""

    keys: tuple[Hashable, ...]
    offsets: tuple[int, ...]
    capacities: tuple[int, ...]
    size: int
    number: int

    @classmethod
    def plan(cls, pieces: Sequence[Piece], number: int) -> Layout:
        # Pieces of one array share a capacity: an empty reserved chunk must fit a full one.
        largest: dict[Hashable, int] = {}
        for key, data in pieces:
            group = _group(key)
            largest[group] = max(largest.get(group, 0), len(data))
        offsets, capacities, offset = [], [], 0
        for key, data in pieces:
            room = max(len(data), largest[_group(key)])
            capacity = (room + max(room // 2, 512) + 63) // 64 * 64
            offsets.append(offset)
            capacities.append(capacity)
            offset += capacity
        keys = tuple(key for key, _ in pieces)
        return cls(keys, tuple(offsets), tuple(capacities), offset, number)

    def fits(self, pieces: Sequence[Piece]) -> bool:
        if len(pieces) != len(self.keys):
            return False
        for (key, data), known, capacity in zip(pieces, self.keys, self.capacities, strict=True):
            if key != known or len(data) > capacity:
                return False
        return True


@dataclass
class _Spare:
    fd: int
    path: str
    version: int
    layout: int


def _padded(data: bytes, capacity: int) -> list[bytes]:
    return [data, b" " * (capacity - len(data))] if len(data) < capacity else [data]


def _writev_all(fd: int, buffers: list[bytes]) -> None:
    pending = [memoryview(b) for b in buffers if b]
    while pending:
        written = os.writev(fd, pending[:_IOV_MAX])
        while pending and written >= len(pending[0]):
            written -= len(pending[0])
            pending.pop(0)
        if written:
            pending[0] = pending[0][written:]


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written


def _copy_range(source: int, dest: int, size: int) -> None:
    """Copy in the kernel where the file system allows it, else through a buffer."""
    copied = 0
    try:
        while copied < size:
            n = os.copy_file_range(source, dest, size - copied, copied, copied)
            if n == 0:
                break
            copied += n
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
            raise
    while copied < size:
        chunk = os.pread(source, min(1 << 20, size - copied), copied)
        if not chunk:
            raise OSError(errno.EIO, "the published report shrank while it was copied")
        _pwrite_all(dest, chunk, copied)
        copied += len(chunk)


class SlottedPublisher:
    """Publishes versions of a file; raises OSError when a version cannot be published."""

    def __init__(self, target: Path, switch: Callable[[str], None] | None = None) -> None:
        self.target = target
        # How a finished temp file becomes the target: a rename by default; the report file
        # passes its own (an atomic exchange on Linux, with its checks).
        self.switch = switch or (lambda path: os.replace(path, target))
        self.layout: Layout | None = None
        self.version = 0
        self.full_writes = 0
        self.slot_writes = 0
        self._last: dict[Hashable, bytes] = {}
        self._changed_at: dict[Hashable, int] = {}
        self._spares: list[_Spare] = []
        self._lock = threading.Lock()
        self._jobs: queue.Queue[tuple[int, int, int] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._copier, name="report-spares", daemon=True)
        self._thread.start()

    def _temp(self) -> tuple[int, str]:
        path = f"{self.target}.{os.getpid()}.{secrets.token_hex(6)}.tmp"
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        return os.open(path, flags, 0o644), path

    def publish(self, pieces: Sequence[Piece]) -> None:
        """Make these pieces (joined, with padding) the target's content, atomically."""
        self.version += 1
        version = self.version
        layout = self.layout
        if layout is None or not layout.fits(pieces):
            layout = self.layout = Layout.plan(pieces, (layout.number + 1) if layout else 1)
            self._last = {}
            self._changed_at = {}
            self._discard_spares()
        for key, data in pieces:
            old = self._last.get(key)
            if old is not data and old != data:
                self._last[key] = data
                self._changed_at[key] = version
        spare = self._take_spare(layout.number)
        if spare is None:
            fd, path = self._temp()
            try:
                buffers: list[bytes] = []
                for (_, data), capacity in zip(pieces, layout.capacities, strict=True):
                    buffers += _padded(data, capacity)
                _writev_all(fd, buffers)
            except BaseException:
                self._abandon(fd, path)
                raise
            self.full_writes += 1
        else:
            fd, path = spare.fd, spare.path
            try:
                for (key, data), offset, capacity in zip(
                    pieces, layout.offsets, layout.capacities, strict=True
                ):
                    if self._changed_at.get(key, 0) > spare.version:
                        _pwrite_all(fd, b"".join(_padded(data, capacity)), offset)
            except BaseException:
                self._abandon(fd, path)
                raise
            self.slot_writes += 1
        try:
            self.switch(path)
        except BaseException:
            self._abandon(fd, path)
            raise
        self._jobs.put((fd, version, layout.number))  # the copier closes fd when done

    def _take_spare(self, layout: int) -> _Spare | None:
        with self._lock:
            usable = [s for s in self._spares if s.layout == layout]
            if not usable:
                return None
            best = max(usable, key=lambda s: s.version)
            self._spares.remove(best)
            return best

    def _discard_spares(self) -> None:
        with self._lock:
            spares, self._spares = self._spares, []
        for spare in spares:
            self._abandon(spare.fd, spare.path)

    @staticmethod
    def _abandon(fd: int, path: str) -> None:
        with contextlib.suppress(OSError):
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)

    def _copier(self) -> None:
        """Background: copy each newly published version into spares for the next publishes."""
        while True:
            job = self._jobs.get()
            # Only the newest version is worth copying; close what piled up behind it.
            while job is not None and not self._jobs.empty():
                os.close(job[0])
                self._jobs.task_done()
                job = self._jobs.get()
            if job is None:
                self._jobs.task_done()
                return
            source, version, layout = job
            try:
                # Fill the pool from this version while nothing newer is waiting: a call
                # publishes twice (before going upstream and before answering), so two
                # spares let both publishes write only what changed.
                while self._jobs.empty() and self._copy(source, version, layout):
                    pass
            except OSError:
                pass  # no spare this time: the next publish writes the whole file
            finally:
                with contextlib.suppress(OSError):
                    os.close(source)
                self._jobs.task_done()

    def settle(self) -> None:
        """Wait until the copier has dealt with every published version (for tests)."""
        self._jobs.join()

    def _copy(self, source: int, version: int, layout: int) -> bool:
        """Add a spare copied from `source`; False when the pool needs no more from it."""
        with self._lock:
            current = self.layout.number if self.layout else None
            fresh = sum(1 for s in self._spares if s.layout == layout and s.version >= version)
            if layout != current or fresh >= _SPARES:
                return False
        size = os.fstat(source).st_size
        fd, path = self._temp()
        try:
            _copy_range(source, fd, size)
        except OSError:
            self._abandon(fd, path)
            raise
        with self._lock:
            current = self.layout.number if self.layout else None
            if layout != current:
                extra = [_Spare(fd, path, version, layout)]
            else:
                self._spares.append(_Spare(fd, path, version, layout))
                self._spares.sort(key=lambda s: s.version)
                extra = self._spares[:-_SPARES]
                self._spares = self._spares[-_SPARES:]
        for spare in extra:
            self._abandon(spare.fd, spare.path)
        return layout == current

    def close(self) -> None:
        """Stop the copier and remove the spares (the published file stays)."""
        self._jobs.put(None)
        self._thread.join(timeout=10)
        self._discard_spares()

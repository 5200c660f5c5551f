"""The proxy's event log: every event appended as a JSON line, the record a restarted proxy
continues (X14)."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from harness.base.errors import OutputFileError, ReportFileError
from harness.base.outfile import open_append
from harness.events import Event, _Event, read_jsonl, to_json


class EventLogFile:
    """Appends every event as a JSON line, written at once (a killed proxy loses nothing).

    A write that fails (a full disk) cuts the half-written line off again (the log stays
    judgeable up to there) and tells the proxy through `on_failure`; from then on events are
    no longer written (the proxy forwards nothing new and stops once what is in flight is
    answered; the judgement in memory still has every event).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self.fd = open_append(path, "event log")  # V1
        except OutputFileError as exc:
            raise ReportFileError(str(exc)) from None
        try:  # O5 for the event log: one proxy at a time appends to it
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            raise ReportFileError(
                f"{path}: another agent-harness proxy is writing this event log; use another path"
            ) from None
        self.size = os.fstat(self.fd).st_size
        self.cut = self._cut_partial_line()  # bytes of a half-written last event removed
        self.size = os.fstat(self.fd).st_size  # the end of the last whole line
        self.failed: ReportFileError | None = None
        self.on_failure: Callable[[ReportFileError], None] = lambda exc: None

    def __call__(self, event: _Event) -> None:
        if self.failed is not None:
            return  # the log is incomplete from here on; the proxy knows and is stopping
        # A lone surrogate in a string becomes its JSON escape: the line stays UTF-8.
        line = (to_json(event) + "\n").encode("utf-8", "backslashreplace")
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(self.fd, view) :]
            self.size += len(line)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, self.size)
            self.failed = ReportFileError(
                f"{self.path}: cannot write the event log: {exc.strerror or exc}"
            )
            self.on_failure(self.failed)

    def _cut_partial_line(self) -> int:
        """A proxy killed in the middle of a line left half an event: cut it off (X14)."""
        if self.size == 0:
            return 0
        # The append descriptor cannot read: reopen the very file it holds (not the path).
        try:
            reader = os.open(f"/proc/self/fd/{self.fd}", os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            os.close(self.fd)
            raise ReportFileError(
                f"{self.path}: cannot read the event log: {exc.strerror or exc}"
            ) from None
        try:
            if os.pread(reader, 1, self.size - 1) == b"\n":
                return 0
            keep = self.size
            while keep > 0:
                start = max(0, keep - 65536)
                chunk = os.pread(reader, keep - start, start)
                newline = chunk.rfind(b"\n")
                if newline >= 0:
                    keep = start + newline + 1
                    break
                keep = start
        finally:
            os.close(reader)
        os.ftruncate(self.fd, keep)
        return self.size - keep

    def history(self) -> Iterator[Event]:
        """X14: the events of the sessions this log already holds."""
        return read_jsonl(Path(self.path)) if self.size else iter(())

    def close(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1

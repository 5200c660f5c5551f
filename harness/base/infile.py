"""One bounded reader for every input file (SPEC V4).

Specs, prompt and patch files named in a spec, event logs for `agent-harness judge`, baselines:
each is opened here, and only a regular file is read, up to a size limit. A FIFO would block
the reader forever and `/dev/zero` would fill the memory; `/proc` and `/sys` files look regular
but are the kernel's (and hold secrets such as /proc/self/environ). Every refusal is one line.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from harness.base.errors import InputFileError
from harness.base.outfile import kind_of

MB = 1024 * 1024
_PSEUDO_FS = (Path("/proc"), Path("/sys"))


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


@contextmanager
def open_input(path: str | os.PathLike[str], what: str) -> Iterator[tuple[BinaryIO, int]]:
    """A regular file opened for reading, with its size; InputFileError (one line) otherwise.

    O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused right after)."""
    shown = os.fspath(path)
    real = Path(os.path.realpath(shown))
    for root in _PSEUDO_FS:
        if real == root or root in real.parents:
            raise InputFileError(f"{shown}: refusing to read a {what} from {root}")
    try:
        fd = os.open(shown, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputFileError(f"{shown}: no such file") from None
    except OSError as exc:
        raise InputFileError(f"{shown}: cannot read the {what}: {_reason(exc)}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputFileError(f"{shown}: the {what} is {kind_of(st.st_mode)}, not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    # Outside the `try`: the file object owns the descriptor as soon as it exists, so a Ctrl-C
    # inside fdopen must not close it a second time (that raised EBADF over the interrupt).
    handle = os.fdopen(fd, "rb")
    with handle:
        yield handle, st.st_size


def read_bytes(path: str | os.PathLike[str], what: str, limit: int) -> bytes:
    """The whole file, if it is a regular file of at most `limit` bytes."""
    shown = os.fspath(path)
    with open_input(path, what) as (handle, size):
        if size > limit:
            raise InputFileError(f"{shown}: the {what} is larger than {_size(limit)}")
        try:
            data = handle.read(limit + 1)  # it may have grown since fstat
        except OSError as exc:
            raise InputFileError(f"{shown}: cannot read the {what}: {_reason(exc)}") from exc
    if len(data) > limit:
        raise InputFileError(f"{shown}: the {what} is larger than {_size(limit)}")
    return data


def read_text(path: str | os.PathLike[str], what: str, limit: int) -> str:
    """The whole file as UTF-8 text (bounded as read_bytes)."""
    data = read_bytes(path, what, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputFileError(f"{os.fspath(path)}:{line}: the {what} is not UTF-8 text") from None


def read_lines(path: str | os.PathLike[str], what: str, max_line: int) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line, however long the file, each line at most `max_line`
    bytes and UTF-8."""
    shown = os.fspath(path)
    with open_input(path, what) as (handle, _):
        number = 0
        while True:
            try:
                raw = handle.readline(max_line + 1)
            except OSError as exc:
                raise InputFileError(f"{shown}: cannot read the {what}: {_reason(exc)}") from exc
            if not raw:
                return
            number += 1
            if len(raw) > max_line and not raw.endswith(b"\n"):
                raise InputFileError(f"{shown}:{number}: a line is longer than {_size(max_line)}")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise InputFileError(f"{shown}:{number}: not UTF-8 text") from None
            del raw  # a long line is held once while the caller reads it, not twice
            yield number, text


def _size(limit: int) -> str:
    return f"{limit // MB} MB" if limit >= MB and limit % MB == 0 else f"{limit} bytes"

"""The harness's small exception tree: every error a user can cause ends up as one line."""

from __future__ import annotations

import errno
import os
import re


class HarnessError(Exception):
    """Base of every error the harness raises on purpose."""


class UsageError(HarnessError):
    """Bad command-line input: a flag, a value, a combination of flags."""


class ConfigError(HarnessError):
    """A configuration that cannot work, found at startup (e.g. a tool in both explicit lists)."""


class InputFileError(HarnessError):
    """An input file that cannot be read: missing, not a regular file, too large, not UTF-8
    (V4)."""


class OutputFileError(HarnessError):
    """A file the tools write cannot be used or written (V1)."""


class ReportFileError(OutputFileError):
    """The proxy's report file (or event log) cannot be used or written."""


class UpstreamError(HarnessError):
    """The upstream MCP server could not be started or stopped working."""


class EventLogError(InputFileError):
    """An event log that cannot be read back."""


class ReportReadError(HarnessError):
    """A report that cannot be read back: not JSON, or not a report (O1, O2)."""


# -- a full disk (V20) ---------------------------------------------------------------------

_NO_SPACE = {errno.ENOSPC, errno.EDQUOT}
_NO_SPACE_TEXT = ("No space left on device", "Disk quota exceeded", "database or disk is full")
# How DuckDB and Python name the file in the line that says so: `Could not write file
# "/x/y.wal": No space left on device`, `[Errno 28] No space left on device: '/x/y'`.
_QUOTED_FILE = re.compile(r'file "([^"]+)"|device: \'([^\']+)\'')
# The line below, as a process of ours wrote it and another relays it (the proxy joins an
# upstream's last stderr lines with " | ").
_SAID = re.compile(r"no space left on the disk mounted at [^\n|]*")
# SQLite says this (no errno) for a write the disk refused, also when the disk is full.
_IO_ERROR = "disk I/O error"


def no_space(err: BaseException | str, path: str | os.PathLike[str] | None = None) -> str | None:
    """For an error that says the disk is full (ENOSPC, EDQUOT, or a library's message that
    says so): one line naming the disk and the file, e.g. "no space left on the disk mounted
    at /data (0 bytes free) to write /data/runs.duckdb.wal"; None for any other error. The
    file is the error's own (its filename, or the one its message quotes), else `path`. SQLite's
    "disk I/O error" counts where the disk holding `path` has under 1 MiB free."""
    text = str(err)
    if (said := _SAID.search(text)) is not None:  # another process of ours said it already
        return said.group(0).rstrip()
    if isinstance(err, OSError) and err.errno in _NO_SPACE:
        named = err.filename
    elif path is not None and _IO_ERROR in text and low_space(path) is not None:
        named = None  # a write the (almost) full disk refused, as SQLite says it
    elif any(said in text for said in _NO_SPACE_TEXT):
        line = next(x for x in text.splitlines() if any(said in x for said in _NO_SPACE_TEXT))
        found = _QUOTED_FILE.search(line)
        named = next((g for g in found.groups() if g), None) if found else None
    else:
        return None
    file = os.fspath(named if named is not None else path) if (named or path) else None
    if file is None:
        return "no space left on the disk"
    mount, free = _mount_point(file), _free(file)
    room = f" ({free:,} bytes free)" if free is not None else ""
    return f"no space left on the disk mounted at {mount}{room} to write {file}"


LOW_SPACE = 1024 * 1024  # below this, a failure without a reason of its own is worth the note


def low_space(path: str | os.PathLike[str]) -> str | None:
    """"the disk mounted at X has N bytes free" when the disk that holds `path` is (almost)
    full: a process that could not write its own error (its stderr on that disk) failed
    without saying why. None when there is room."""
    free = _free(path)
    if free is None or free >= LOW_SPACE:
        return None
    return f"the disk mounted at {_mount_point(os.fspath(path))} has {free:,} bytes free"


def _free(path: str | os.PathLike[str]) -> int | None:
    current = os.path.abspath(path)
    while not os.path.exists(current) and current != os.path.dirname(current):
        current = os.path.dirname(current)
    try:
        st = os.statvfs(current)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _mount_point(file: str) -> str:
    """The mount point of the file system that holds `file` (or its nearest existing folder)."""
    current = os.path.abspath(file)
    while not os.path.exists(current) and current != os.path.dirname(current):
        current = os.path.dirname(current)
    while current != os.path.dirname(current) and not os.path.ismount(current):
        current = os.path.dirname(current)
    return current

"""Errors of the run store: each one is a single line a user can act on."""

from __future__ import annotations

from harness.base.errors import HarnessError, no_space


class StoreError(HarnessError):
    """Base of every error the run store raises on purpose."""


class StoreOpenError(StoreError):
    """The store file cannot be opened: unwritable path, a folder, not a DuckDB file, locked."""


class SchemaVersionError(StoreError):
    """The database's schema does not match what this version of the code knows."""


def first_line(err: BaseException) -> str:
    """The first line of an error's message (DuckDB's run to several), or its type's name; a
    full disk is said as such, with the disk and the file (V20)."""
    full = no_space(err)
    if full is not None:
        return full
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__

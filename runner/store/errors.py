"""Errors of the run store: each one is a single line a user can act on."""

from __future__ import annotations

from harness.base.errors import HarnessError


class StoreError(HarnessError):
    """Base of every error the run store raises on purpose."""


class StoreOpenError(StoreError):
    """The store file cannot be opened: unwritable path, a folder, not a DuckDB file, locked."""


class SchemaVersionError(StoreError):
    """The database's schema does not match what this version of the code knows."""

"""The DuckDB run store (R5): numbered migrations, one transaction per saved run or batch."""

from runner.store.errors import SchemaVersionError, StoreError, StoreOpenError
from runner.store.rows import RunBatch
from runner.store.store import CHILD_TABLES, DEFAULT_PATH, Store

__all__ = [
    "CHILD_TABLES",
    "DEFAULT_PATH",
    "RunBatch",
    "SchemaVersionError",
    "Store",
    "StoreError",
    "StoreOpenError",
]

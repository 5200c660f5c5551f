"""The one way a run store file is opened, for reading and for writing (SPEC V8).

A DuckDB file can hold more than data. A view runs its query when it is read
(`read_text('/etc/hostname')`, `glob('/root/*')`, `/proc/self/environ`), a macro stands in for
a function, a generated column computes when it is read, and a SQLite file or an `md:` name
makes DuckDB download and load an extension. A store is often a file from elsewhere (a CI
artifact, a colleague's shard), so every store file, ours or not, is opened here:

- its name must be a plain local file: `:memory:`, `md:NAME`, `sqlite:...`, URLs and other
  names DuckDB would not take as a file are refused with one line (`name_problem`); DuckDB
  always gets the absolute path, so no prefix can reach it;
- its first bytes must be a DuckDB database's (a SQLite file or a text file is one line, and
  DuckDB never sees it);
- DuckDB runs with external access off (no file, network or environment access from SQL), no
  extension autoload or autoinstall, no community extensions, and the configuration locked;
- its catalogue is vetted before a row is read (`vet`): no view, no macro, no generated column,
  no default expression, only the tables the migrations make, with their columns and types;
- for reading (`report --db`, `merge` inputs, `sweep --baseline`) it is opened read-only and
  never changed: a store of an older schema is upgraded in a temporary copy;
- for writing (`run --db`, `merge -o`) it is vetted read-only first, so a DuckDB file that is
  not a run store is refused before anything is added to it.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

import duckdb

from harness.base.errors import InputFileError, OutputFileError
from harness.base.infile import open_input
from harness.base.outfile import kind_of, resolve
from runner.store import migrations, schema
from runner.store.errors import StoreOpenError, first_line

# Every connection to a store file: set when the database starts, then locked, so no SQL
# (a view, a macro, a statement in this code) can turn them back on.
HARDENED: dict[str, str | bool | int | float] = {
    "enable_external_access": False,
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "allow_community_extensions": False,
    "lock_configuration": True,
}
# A writing connection runs DuckDB on one thread (N2). With more, an INSERT from Arrow takes
# DuckDB's batch-insert path, which collects a batch smaller than a row group apart and then
# copies it into the transaction's storage: the bench's 100,000 run rows took 0.24 s of CPU
# to insert on 2 threads, 0.13 s on one. A writer's own reads are small (resume, the
# summary); reading connections keep DuckDB's default.
#
# And a writer appends row groups of ROW_GROUP_ROWS rows (N2). DuckDB compresses and writes a
# transaction's row group to the file as soon as it is full, while the INSERT goes on
# ("optimistic writes"), and the commit then only links it in. With DuckDB's default
# (122,880 rows) the bench's 100,000 runs never filled one: the commit copied them into the
# table and compressed them afterwards (insert 0.13 + commit 0.28 s of CPU); with 16,384 the
# insert takes 0.24 s, beside the Arrow conversion on the other core, and the commit 0.06.
# Row group size is an option of ATTACH, not of the file: the row groups a file holds keep
# their size, and a file written so opens anywhere as any other. So a writer attaches the
# file to an empty database in memory and only then turns the settings that would forbid
# the ATTACH (file access, changing the configuration) off, before any of its rows is read.
#
# And DuckDB writes each such row group as soon as it is full (N2): by default it buffers 5
# before writing them together, so the bench's insert waited for the Arrow slices for its
# first 80,000 rows and then compressed 5 row groups in one go after the last slice had come
# (0.11 s with the other core idle); one at a time, it compresses while the next slices are
# converted. Only when the row groups go to the file changes, not what the file holds.
ROW_GROUP_ROWS = 16_384
_AFTER_ATTACH = ("enable_external_access", "lock_configuration")
_WRITER_START = {
    **{key: value for key, value in HARDENED.items() if key not in _AFTER_ATTACH},
    "threads": 1,
    "write_buffer_row_group_count": 1,
}

_DUCKDB_MAGIC = b"DUCK"  # bytes 8-11 of every DuckDB database file
_SQLITE_MAGIC = b"SQLite format 3\x00"
# DuckDB reads `PREFIX:rest` (two or more letters, digits or _) as "extension PREFIX opens
# rest" (md:, motherduck:, sqlite:, postgres:, ...), `:memory:` as no file, and `x://` as a
# remote file system.
_EXTENSION_PREFIX = re.compile(r"[A-Za-z0-9_]{2,}:")

Cleanup = Callable[[], None]


def name_problem(path: str | os.PathLike[str]) -> str | None:
    """Why a store name is not a plain local file, as DuckDB would read it; None if it is."""
    text = os.fspath(path)
    if not text.strip():
        return "an empty name is no run store file"
    if text.startswith(":"):
        return f"{text!r} is DuckDB's name for a database in memory, not a file; give a file path"
    if "://" in text or _EXTENSION_PREFIX.match(text):
        return (
            f"{text!r} is a URL or a DuckDB extension's name (md:, sqlite:, s3:, ...), not a "
            "local file; give a file path (for a file named so, its absolute path)"
        )
    return None


def check_name(path: str | os.PathLike[str], what: str = "run store") -> None:
    """StoreOpenError (one line) unless `path` names a plain local file."""
    problem = name_problem(path)
    if problem:
        raise StoreOpenError(f"{what}: {problem}")


def identity(path: Path) -> tuple[int, int]:
    """(device, inode) of an existing store file, through symlinks: two paths, one file."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise StoreOpenError(f"run store {path} does not exist") from None
    except OSError as err:
        raise StoreOpenError(f"cannot open run store {path}: {err.strerror or err}") from err
    return st.st_dev, st.st_ino


def _header(path: Path) -> bytes:
    """The first bytes of an existing regular file (V4: not a FIFO, device, /proc or /sys)."""
    st = os.stat(path) if os.path.exists(path) else None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise StoreOpenError(f"run store {path} is {kind_of(st.st_mode)}, not a DuckDB file")
    try:
        with open_input(path, "run store") as (handle, _size):
            return handle.read(16)
    except InputFileError as err:
        message = str(err)
        if message.endswith(": no such file"):
            raise StoreOpenError(f"run store {path} does not exist") from None
        raise StoreOpenError(message) from None
    except OSError as err:
        raise StoreOpenError(f"cannot open run store {path}: {err.strerror or err}") from err


def _check_header(path: Path) -> None:
    head = _header(path)
    if head.startswith(_SQLITE_MAGIC):
        raise StoreOpenError(f"{path} is a SQLite database, not a DuckDB run store")
    if not head:
        raise StoreOpenError(f"{path} is empty: it is not a DuckDB database")
    if head[8:12] != _DUCKDB_MAGIC:
        raise StoreOpenError(f"{path} is not a DuckDB database")


def _connect(path: Path, shown: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    """A hardened connection; every way this can fail is one StoreOpenError line."""
    try:
        if read_only:
            return duckdb.connect(str(path.absolute()), read_only=True, config=HARDENED)
        return _attached(path)
    except duckdb.Error as err:
        message = str(err)
        if "not a valid DuckDB database" in message:
            raise StoreOpenError(f"{shown} is not a DuckDB database") from err
        if "lock" in message.lower():
            raise StoreOpenError(
                f"run store {shown} is in use by another process (DuckDB allows one writer)"
            ) from err
        raise StoreOpenError(f"cannot open run store {shown}: {first_line(err)}") from err


def _attached(path: Path) -> duckdb.DuckDBPyConnection:
    """A writer: the file attached with ROW_GROUP_ROWS, then hardened as HARDENED says."""
    # A database in memory would spill to `.tmp` in the working folder; a file's own is
    # beside it, as when the file is opened directly.
    spill = {"temp_directory": f"{path.absolute()}.tmp"}
    con = duckdb.connect(":memory:", config={**_WRITER_START, **spill})
    try:
        quoted = str(path.absolute()).replace("'", "''")
        con.execute(f"ATTACH '{quoted}' AS store (ROW_GROUP_SIZE {ROW_GROUP_ROWS})")
        con.execute("USE store")
        for key in _AFTER_ATTACH:
            con.execute(f"SET {key} = {str(HARDENED[key]).lower()}")
    except BaseException:
        con.close()
        raise
    return con


# -- what a store may hold ------------------------------------------------------------------

_SHAPES: dict[tuple[migrations.Migration, ...], schema._Shape] = {}


def expected_shape() -> schema._Shape:
    """Table -> column -> (type, nullable) as the migrations build them (the ledger left out)."""
    key = migrations.MIGRATIONS
    if key not in _SHAPES:
        con = duckdb.connect(":memory:", config=HARDENED)
        try:
            migrations.migrate(con, "the run store schema")
            _SHAPES[key] = schema.stored_schema(con)
        finally:
            con.close()
    return _SHAPES[key]


def known_tables() -> set[str]:
    """The tables a run store holds: those the migrations make, and their ledger."""
    return {*expected_shape(), "schema_migrations"}


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple]:
    return con.execute(sql).fetchall()


def vet(con: duckdb.DuckDBPyConnection, shown: str) -> dict[int, str] | None:
    """Check a store's catalogue before any of its data is read; return its migrations
    (None for a database with no tables at all). StoreOpenError naming the file otherwise."""
    here = "database_name = current_database()"
    views = _rows(con, f"SELECT view_name FROM duckdb_views() WHERE NOT internal AND {here}")
    if views:
        raise StoreOpenError(
            f"{shown} holds a view ({views[0][0]}), which a run store never has: refused "
            "(reading a view runs its query)"
        )
    macros = _rows(
        con,
        "SELECT DISTINCT function_name FROM duckdb_functions() WHERE NOT internal AND "
        f"function_type IN ('macro', 'table_macro') AND {here}",
    )
    if macros:
        raise StoreOpenError(
            f"{shown} holds a macro ({macros[0][0]}), which a run store never has: refused"
        )
    tables = _rows(con, f"SELECT schema_name, table_name FROM duckdb_tables() WHERE {here}")
    if not tables:
        return None
    computed = _rows(
        con,
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_catalog = current_database() "
        "AND (is_generated <> 'NEVER' OR column_default IS NOT NULL)",
    )
    if computed:
        table, column = computed[0]
        raise StoreOpenError(
            f"{shown}: column {table}.{column} is computed (a generated column or a default), "
            "which a run store never has: refused"
        )
    names = {name for _, name in tables}
    if "schema_migrations" not in names:
        raise StoreOpenError(
            f"{shown} is not an agent-harness run store (it has no schema_migrations table); "
            "it was left as it was"
        )
    known = known_tables()
    for schema_name, name in tables:
        if schema_name != "main" or name not in known:
            where = name if schema_name == "main" else f"{schema_name}.{name}"
            raise StoreOpenError(
                f"{shown} holds a table {where} that a run store does not have: refused"
            )
    done = migrations.applied(con)
    migrations.check_known(done, shown)
    return done


def check_shape(con: duckdb.DuckDBPyConnection, shown: str) -> None:
    """The store's tables at the newest schema: exactly the migrations' columns and types."""
    want, have = expected_shape(), schema.stored_schema(con)
    for table in sorted(want.keys() | have.keys()):
        if want.get(table) != have.get(table):
            what = "missing" if table not in have else "different from a run store's"
            raise StoreOpenError(f"{shown}: table {table} is {what}: refused")


# -- reading --------------------------------------------------------------------------------


def open_to_read(path: Path) -> tuple[duckdb.DuckDBPyConnection, Cleanup | None]:
    """A read-only, vetted connection to a store file from anywhere; never changes the file.

    A store of an older schema is copied to a temporary folder and upgraded there; the
    returned cleanup removes the copy (call it after closing the connection)."""
    check_name(path)
    if path.is_dir():
        raise StoreOpenError(f"run store {path} is a folder, not a DuckDB file")
    _check_header(path)
    con = _connect(path, path, read_only=True)
    try:
        done = _vetted(con, str(path))
        if max(done) == migrations.LATEST:
            check_shape(con, str(path))
            return con, None
    except BaseException:
        con.close()
        raise
    con.close()
    return _upgraded_copy(path)


def _vetted(con: duckdb.DuckDBPyConnection, shown: str) -> dict[int, str]:
    try:
        done = vet(con, shown)
    except duckdb.Error as err:
        raise StoreOpenError(f"cannot read run store {shown}: {first_line(err)}") from err
    if done is None:
        raise StoreOpenError(f"{shown} is not an agent-harness run store (it holds no tables)")
    if not done:
        raise StoreOpenError(f"{shown} is not an agent-harness run store (no migration recorded)")
    return done


def _upgraded_copy(path: Path) -> tuple[duckdb.DuckDBPyConnection, Cleanup]:
    """An older store, upgraded in a temporary copy: the file itself stays as it was."""
    folder = Path(tempfile.mkdtemp(prefix="agent-harness-store-"))

    def cleanup() -> None:
        shutil.rmtree(folder, ignore_errors=True)

    copy = folder / "store.duckdb"
    try:
        shutil.copyfile(path, copy)
        wal = Path(f"{path}.wal")
        if wal.is_file():
            shutil.copyfile(wal, Path(f"{copy}.wal"))
        con = _connect(copy, path, read_only=False)
        try:
            _vetted(con, str(path))
            migrations.migrate(con, str(path))
            check_shape(con, str(path))
        finally:
            con.close()
        return _connect(copy, path, read_only=True), cleanup
    except OSError as err:
        cleanup()
        raise StoreOpenError(f"cannot copy run store {path} to upgrade it: {err}") from err
    except duckdb.Error as err:
        cleanup()
        raise StoreOpenError(f"cannot read run store {path}: {first_line(err)}") from err
    except BaseException:
        cleanup()
        raise


# -- writing --------------------------------------------------------------------------------


def vet_file(path: Path) -> dict[int, str] | None:
    """Vet an existing file through a read-only connection, closed again; its migrations, or
    None for a DuckDB database without tables (which may become a store)."""
    check_name(path)
    _check_header(path)
    look = _connect(path, path, read_only=True)
    try:
        return vet(look, str(path))
    except duckdb.Error as err:
        raise StoreOpenError(f"cannot read run store {path}: {first_line(err)}") from err
    finally:
        look.close()


def open_to_write(path: Path, *, upgrade: bool = True) -> duckdb.DuckDBPyConnection:
    """A read-write, vetted connection to our own store, created (with its folders) if missing.

    An existing file is vetted read-only first: a DuckDB file that is not a run store (or
    holds a view, a macro, a table of its own) is refused before anything is written to it.
    `upgrade` applies the migrations it lacks; without, the caller applies them (`merge`
    does, inside its one transaction)."""
    check_name(path)
    if path.is_dir():
        raise StoreOpenError(f"run store {path} is a folder, not a DuckDB file")
    try:  # V1: what the store writes is a regular file; its folders are made here
        target = resolve(path, "run store", make_folders=True)
    except OutputFileError as err:
        raise StoreOpenError(str(err)) from None
    if target.existing is not None:
        vet_file(path)
    con = _connect(path, path, read_only=False)
    if not upgrade:
        return con
    try:
        migrations.migrate(con, str(path))
        check_shape(con, str(path))
    except duckdb.Error as err:
        con.close()
        raise StoreOpenError(f"cannot read run store {path}: {first_line(err)}") from err
    except BaseException:
        con.close()
        raise
    return con

"""T1: a truth probe reads an upstream's own state, before and after each run.

The state is a multiset of records (docs/runner.md, "Truth probes"):

- a `command` probe runs its argv without a shell (stdin empty, the runner's environment
  plus the probe's `env`, in its `cwd`) as a process tree (V16, harness/base/reaper.py):
  once it has exited, whatever it left running (a `setsid` daemon holding its output pipe)
  is ended with it, so reading its output never waits on a leftover. Each non-empty line of
  its standard output is one record (UTF-8, a trailing CR dropped). An exit status other
  than 0 is a failed probe;
- an `sql` probe runs one query against its `database`, a SQLite or a DuckDB file (told
  apart by the file's first bytes), that can only read (V19): SQLite opened with `mode=ro`
  and `query_only`, under an authorizer that allows reading only (no ATTACH, so no
  `VACUUM INTO` either; no PRAGMA that sets anything, `query_only` included; no temporary
  objects) and with no database to attach; DuckDB as every store from elsewhere (V8):
  `read_only`, external access off, no extension autoloaded or installed, its configuration
  locked. Each row is one record: its values as a JSON list.

Both are bounded while they run: `timeout_s` (the process tree ended, the query interrupted)
and `max_output_bytes` (standard output as it is read; SQLite builds no string or blob larger
than it, `SELECT zeroblob(200000000)` fails where it is made; DuckDB's rows are fetched and
measured a few at a time, though DuckDB builds each value whole before it can be measured).
A probe that fails for any reason raises
`ProbeFailed` with one line saying why, redacted before it is cut (V15); the run's agreement
is then unknown, never a guess.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from harness.base.reaper import ProcessTree, exited
from harness.base.redact import REDACT_MARGIN, TextRedactor, argv_secrets
from runner.experiment import TruthProbe

_SQLITE_MAGIC = b"SQLite format 3\x00"
_DUCKDB_MAGIC = b"DUCK"  # bytes 8-11 of a DuckDB database file
_STDERR_KEPT = 4096  # bytes of a failed command's standard error kept for its one line
PIPE_WAIT_S = 5.0  # after the tree ended: how long its output may take to arrive whole
# SQLite's progress handler runs every this many virtual-machine steps (the deadline check).
_SQLITE_STEPS = 10_000

State = Counter[str]  # record -> how many times it is there


class ProbeFailed(Exception):
    """A truth probe that gave no state: the message is one line saying why."""


async def read_state(probe: TruthProbe) -> State:
    """The upstream's state as the probe reads it now."""
    if probe.command is not None:
        return await _run_command(probe)
    return await asyncio.to_thread(_run_query, probe)


async def _run_command(probe: TruthProbe) -> State:
    assert probe.command is not None
    argv = list(probe.command)
    redactor = TextRedactor([*probe.env.values(), *argv_secrets(argv)])
    tree = ProcessTree()
    try:
        proc = await tree.start(
            argv, cwd=probe.cwd, env={**os.environ, **probe.env}, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
    except OSError as exc:
        await tree.aend()
        raise ProbeFailed(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from None
    assert proc.stdout is not None and proc.stderr is not None
    limit = probe.max_output_bytes
    out = bytearray()
    err = bytearray()

    async def read_stdout() -> None:
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(65536):
            out.extend(chunk)
            if len(out) > limit:  # bounded as it is read, not once it is whole
                raise ProbeFailed(f"its output is larger than max_output_bytes ({limit:,})")

    async def drain_stderr() -> None:
        assert proc.stderr is not None
        while chunk := await proc.stderr.read(65536):
            err.extend(chunk[: max(0, _STDERR_KEPT + REDACT_MARGIN - len(err))])

    reading = asyncio.create_task(read_stdout())
    draining = asyncio.create_task(drain_stderr())
    ending = asyncio.create_task(exited(proc))
    try:
        async with asyncio.timeout(probe.timeout_s):
            done, _ = await asyncio.wait({reading, ending}, return_when=asyncio.FIRST_COMPLETED)
            if reading in done:
                reading.result()  # over the bound: ProbeFailed
            await ending
    except TimeoutError:
        raise ProbeFailed(f"it took longer than timeout_s ({probe.timeout_s:g} s)") from None
    finally:
        await tree.aend()  # the probe and all it started: its pipes close
        await _settled(proc, [reading, draining, ending])
    reading.result()  # what came after the exit, before the end, counts against the bound
    if proc.returncode != 0:
        said = redactor.text(err.decode("utf-8", "replace")).strip().splitlines()
        tail = f": {redactor.cut(said[-1], 300)}" if said else ""
        raise ProbeFailed(f"{argv[0]} exited with status {proc.returncode}{tail}")
    text = out.decode("utf-8", "replace")
    return Counter(line.removesuffix("\r") for line in text.split("\n") if line.strip())


async def _settled(proc: asyncio.subprocess.Process, tasks: list[asyncio.Task[None]]) -> None:
    """After the tree's end: what its pipes still held is read (bounded: a process that left
    the tree may hold them), then our ends are closed."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.wait(tasks), PIPE_WAIT_S)
    for task in tasks:
        if not task.done():
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, ProbeFailed):
            await task
    transport = getattr(proc, "_transport", None)
    if transport is not None:
        transport.close()


def _engine(path: Path) -> str:
    try:
        with path.open("rb") as f:
            head = f.read(16)
    except OSError as exc:
        raise ProbeFailed(
            f"cannot read the database {str(path)!r}: {exc.strerror or exc}"
        ) from None
    if head.startswith(_SQLITE_MAGIC):
        return "sqlite"
    if head[8:12] == _DUCKDB_MAGIC:
        return "duckdb"
    raise ProbeFailed(f"{str(path)!r} is neither a SQLite nor a DuckDB database file")


def _record(row: Any) -> str:
    return json.dumps(list(row), ensure_ascii=False, separators=(",", ":"), default=str)


class _Rows:
    """Records from rows, within the output bound."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.state: State = Counter()

    def add(self, rows: Any) -> None:
        for row in rows:
            record = _record(row)
            self.size += len(record.encode("utf-8")) + 1
            if self.size > self.limit:
                raise ProbeFailed(f"its rows are larger than max_output_bytes ({self.limit:,})")
            self.state[record] += 1


def _run_query(probe: TruthProbe) -> State:
    assert probe.sql is not None and probe.database is not None
    path = Path(probe.database).absolute()
    if not path.is_file():
        raise ProbeFailed(f"the database {str(path)!r} is not a file")
    rows = _Rows(probe.max_output_bytes)
    deadline = time.monotonic() + probe.timeout_s
    try:
        if _engine(path) == "sqlite":
            _sqlite_rows(path, probe.sql, deadline, rows)
        else:
            _duckdb_rows(path, probe.sql, probe.timeout_s, rows)
    except ProbeFailed:
        raise
    except Exception as exc:  # the query's own error: one line, never a traceback
        if time.monotonic() >= deadline:
            raise ProbeFailed(f"it took longer than timeout_s ({probe.timeout_s:g} s)") from None
        if isinstance(exc, sqlite3.DataError | sqlite3.OperationalError) and "too big" in str(exc):
            raise ProbeFailed(
                f"it makes a value larger than max_output_bytes ({probe.max_output_bytes:,})"
            ) from None
        said = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ProbeFailed(f"the query failed: {TextRedactor().cut(said, 300)}") from None
    return rows.state


# V19: what a SQLite probe may do. Reading, functions, recursive queries; a PRAGMA that sets
# nothing (no argument), or one of those that only look (their argument names what).
_SQLITE_READS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
                 sqlite3.SQLITE_RECURSIVE}  # fmt: skip
_LOOKING_PRAGMAS = frozenset(
    "table_info table_xinfo table_list index_info index_xinfo index_list foreign_key_list "
    "foreign_key_check integrity_check quick_check collation_list database_list "
    "function_list module_list pragma_list compile_options".split()
)
_SCHEMA_TABLES = ("sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_temp_schema")


def _sqlite_authorizer(action: int, arg1: str | None, arg2: str | None, *_: Any) -> int:
    """Allow reading only (V19): no ATTACH (so no VACUUM INTO), no PRAGMA that sets
    anything (`query_only` included), no temporary object, no write of any kind."""
    if action in _SQLITE_READS:
        return sqlite3.SQLITE_DENY if arg2 == "load_extension" else sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_PRAGMA:
        looks = arg2 is None or (arg1 or "").lower() in _LOOKING_PRAGMAS
        return sqlite3.SQLITE_OK if looks else sqlite3.SQLITE_DENY
    # Preparing a table-valued PRAGMA (`pragma_table_info('t')`) reports the schema table it
    # reads as updated; the connection is read-only and query_only, so nothing can be.
    if action == sqlite3.SQLITE_UPDATE and arg1 in _SCHEMA_TABLES:
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


def _sqlite_rows(path: Path, sql: str, deadline: float, rows: _Rows) -> None:
    uri = f"{path.as_uri()}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=max(0.0, deadline - time.monotonic()))
    try:
        conn.execute("PRAGMA query_only = ON")
        # V19: no database can be attached (VACUUM INTO attaches its target), and no string
        # or blob larger than the whole output bound is ever made.
        conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max(1, min(rows.limit, 1_000_000_000)))
        conn.set_authorizer(_sqlite_authorizer)
        # A non-zero answer interrupts the query: past the deadline.
        conn.set_progress_handler(lambda: int(time.monotonic() >= deadline), _SQLITE_STEPS)
        for row in conn.execute(sql):  # one row at a time: each is checked before the next
            rows.add((row,))
    finally:
        conn.close()


_DUCKDB_BATCH_ROWS = 64


def _duckdb_rows(path: Path, sql: str, timeout_s: float, rows: _Rows) -> None:
    import duckdb

    from runner.store.opening import HARDENED

    conn = duckdb.connect(str(path), read_only=True, config=dict(HARDENED))

    def interrupt() -> None:
        with contextlib.suppress(Exception):  # the query may have ended and closed meanwhile
            conn.interrupt()

    timer = threading.Timer(timeout_s, interrupt)
    timer.start()
    try:
        result = conn.execute(sql)
        # A few rows at a time, each batch checked against the bound before the next is
        # fetched (DuckDB builds each value itself before it can be measured: see docs).
        while batch := result.fetchmany(_DUCKDB_BATCH_ROWS):
            rows.add(batch)
    finally:
        timer.cancel()
        conn.close()

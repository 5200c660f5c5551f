"""T1: a truth probe reads an upstream's own state, before and after each run.

The state is a multiset of records (docs/runner.md, "Truth probes"):

- a `command` probe runs its argv without a shell (stdin empty, its own process group, the
  runner's environment plus the probe's `env`, in its `cwd`); each non-empty line of its
  standard output is one record (UTF-8, a trailing CR dropped). An exit status other than 0
  is a failed probe;
- an `sql` probe runs one query against its `database`, a SQLite or a DuckDB file (told
  apart by the file's first bytes), opened read-only: SQLite with `mode=ro` and
  `query_only`, DuckDB with `read_only`, external access off and no extension autoloaded or
  installed. Each row is one record: its values as a JSON list.

Both are bounded: `timeout_s` (the process group is killed, the query interrupted) and
`max_output_bytes` (standard output, or the records' text). A probe that fails for any
reason raises `ProbeFailed` with one line saying why; the run's agreement is then unknown,
never a guess.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from runner.experiment import TruthProbe

_SQLITE_MAGIC = b"SQLite format 3\x00"
_DUCKDB_MAGIC = b"DUCK"  # bytes 8-11 of a DuckDB database file
_STDERR_KEPT = 4096  # bytes of a failed command's standard error kept for its one line
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
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, cwd=probe.cwd, env={**os.environ, **probe.env},
            start_new_session=True,
        )  # fmt: skip
    except OSError as exc:
        raise ProbeFailed(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from None
    assert proc.stdout is not None and proc.stderr is not None
    limit = probe.max_output_bytes
    out = bytearray()
    err = bytearray()

    async def drain_stderr() -> None:
        assert proc.stderr is not None
        while chunk := await proc.stderr.read(65536):
            err.extend(chunk[: max(0, _STDERR_KEPT - len(err))])

    draining = asyncio.create_task(drain_stderr())
    try:
        async with asyncio.timeout(probe.timeout_s):
            while chunk := await proc.stdout.read(65536):
                out.extend(chunk)
                if len(out) > limit:
                    raise ProbeFailed(f"its output is larger than max_output_bytes ({limit:,})")
            await proc.wait()
            await draining
    except TimeoutError:
        raise ProbeFailed(f"it took longer than timeout_s ({probe.timeout_s:g} s)") from None
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            # asyncio's wait() returns only once the pipes are closed: a stdout left unread
            # past the limit pauses its reader and would hold the pipe (and wait) forever.
            while await proc.stdout.read(65536):
                pass
            await proc.wait()
        draining.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await draining
    if proc.returncode != 0:
        said = err.decode("utf-8", "replace").strip().splitlines()
        tail = f": {said[-1][:300]}" if said else ""
        raise ProbeFailed(f"{argv[0]} exited with status {proc.returncode}{tail}")
    text = out.decode("utf-8", "replace")
    return Counter(line.removesuffix("\r") for line in text.split("\n") if line.strip())


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
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise ProbeFailed(f"the query failed: {first}") from None
    return rows.state


def _sqlite_rows(path: Path, sql: str, deadline: float, rows: _Rows) -> None:
    uri = f"{path.as_uri()}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=max(0.0, deadline - time.monotonic()))
    try:
        conn.execute("PRAGMA query_only = ON")
        # A non-zero answer interrupts the query: past the deadline.
        conn.set_progress_handler(lambda: int(time.monotonic() >= deadline), _SQLITE_STEPS)
        cursor = conn.execute(sql)
        while batch := cursor.fetchmany(1000):
            rows.add(batch)
    finally:
        conn.close()


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
        while batch := result.fetchmany(1000):
            rows.add(batch)
    finally:
        timer.cancel()
        conn.close()

"""The built-in upstream kinds, how to serve them and how to read their ground truth."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage

from runner.upstreams._plumbing import Ledger, build_server, open_db, open_readonly, table_exists
from runner.upstreams.booking import BOOKING, BOOKING_NOSEARCH
from runner.upstreams.payment import PAYMENT


@dataclass(frozen=True)
class BuiltinUpstream:
    """One built-in reference upstream kind."""

    kind: str
    description: str
    instructions: str
    ledger: Ledger
    keys_honoured: tuple[str, ...] = ()  # K6: tools that execute an idempotency key once


BUILTIN_UPSTREAMS: dict[str, BuiltinUpstream] = {
    u.kind: u
    for u in (
        BuiltinUpstream(
            kind="booking",
            description="Hotel booking service, not idempotent, with search by guest and date.",
            instructions="Hotel booking service: book rooms, find, look up and cancel bookings.",
            ledger=BOOKING,
        ),
        BuiltinUpstream(
            kind="booking-nosearch",
            description="The same booking service without search: lookup by booking id only.",
            instructions="Hotel booking service: book rooms, look up and cancel bookings by id.",
            ledger=BOOKING_NOSEARCH,
        ),
        BuiltinUpstream(
            kind="payment",
            description="Payment service that honours idempotency keys (one charge per key).",
            instructions="Payment service: charge customers, list and look up payments.",
            ledger=PAYMENT,
            keys_honoured=("create_payment",),
        ),
    )
}


def builtin(kind: str) -> BuiltinUpstream:
    """The built-in upstream of that kind; ValueError naming the known kinds otherwise."""
    try:
        return BUILTIN_UPSTREAMS[kind]
    except KeyError:
        known = ", ".join(sorted(BUILTIN_UPSTREAMS))
        raise ValueError(f"unknown built-in upstream {kind!r} (known: {known})") from None


def stdio_command(kind: str, db_path: str | Path) -> list[str]:
    """The command line that serves KIND over stdio with its ledger in db_path."""
    builtin(kind)
    return [sys.executable, "-P", "-m", "runner.upstreams", kind, "--db", str(db_path)]


def http_command(kind: str, db_path: str | Path) -> list[str]:
    """The command line that serves KIND over streamable HTTP on a free local port (H1)."""
    return [*stdio_command(kind, db_path), "--http", "127.0.0.1:0"]


async def serve(
    kind: str,
    db_path: str | Path,
    read_stream: ReadStream[SessionMessage | Exception],
    write_stream: WriteStream[SessionMessage],
) -> None:
    """Serve KIND over the given streams (in memory or stdio) until the read side closes."""
    upstream = builtin(kind)
    # Creating the schema fsyncs; keep it off the event loop that hosts other runs.
    conn = await anyio.to_thread.run_sync(open_db, db_path, upstream.ledger.schema)
    try:
        server = build_server(
            f"agent-harness-{kind}", upstream.instructions, list(upstream.ledger.tools), conn
        )
        await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        # Closing checkpoints the WAL (an fsync): off the loop, and even when cancelled.
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(conn.close)


# An empty ledger in memory, per schema: a run's own ledger starts as a copy of it.
_EMPTY_IMAGES: dict[str, bytes] = {}


def _empty_image(schema: str) -> bytes:
    image = _EMPTY_IMAGES.get(schema)
    if image is None:
        conn = sqlite3.connect(":memory:")
        try:
            conn.executescript(schema)
            image = _EMPTY_IMAGES[schema] = conn.serialize()
        finally:
            conn.close()
    return image


class LedgerInMemory:
    """A built-in upstream's ledger in this process's memory, for a run that hosts its
    upstream here (R3): the same schema, tools and queries as the file the stdio server keeps,
    without the file. Its SQLite commits have nothing to fsync and take microseconds, so the
    tools run on the event loop, and the run reads its ground truth over the same connection.

    A file's durability buys nothing here: the ledger lived in the run's temporary folder and
    a run that dies with its process is run again on resume. Creating that file, fsyncing each
    commit and opening it again for the ground truth cost about 2 ms of a 2-call run's CPU."""

    def __init__(self, kind: str) -> None:
        self.upstream = builtin(kind)
        self.served = False  # the server started (else the run has no ground truth, as before)
        self._conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self._conn.deserialize(_empty_image(self.upstream.ledger.schema))
        self._conn.row_factory = sqlite3.Row

    async def serve(self, reader: Any, writer: Any) -> None:
        """Serve this ledger's upstream over a line pipe pair (a LineReader and a LineWriter,
        runner.upstreams._lines) until the reader's EOF; the writer is closed at the end."""
        from runner.upstreams._lines import LineServer

        self.served = True
        upstream = self.upstream
        server = build_server(
            f"agent-harness-{upstream.kind}", upstream.instructions, list(upstream.ledger.tools),
            self._conn, inline=True,
        )  # fmt: skip
        await LineServer(server).serve(reader, writer)

    def facts(
        self, calls: Iterable[tuple[str, dict[str, Any]]]
    ) -> tuple[list[dict[str, Any]] | None, list[int | None]]:
        """`ledger_facts` over this ledger; no ground truth (None) if the server never started."""
        calls = list(calls)
        if not self.served:
            return None, [None] * len(calls)
        ledger = self.upstream.ledger
        truth = ledger.ground_truth(self._conn)
        return truth, [ledger.real_rows(self._conn, tool, arguments) for tool, arguments in calls]

    def save(self, path: Path) -> None:
        """Write the ledger to a SQLite file (a kept run folder holds it as a file run's does)."""
        out = sqlite3.connect(path)
        try:
            self._conn.backup(out)
        finally:
            out.close()

    def close(self) -> None:
        """Free the ledger."""
        self._conn.close()


def _ledger_conn(ledger: Ledger, db_path: str | Path) -> sqlite3.Connection:
    conn = open_readonly(db_path)
    if table_exists(conn, ledger.table):
        return conn
    conn.close()
    # No table yet (the server never started): an empty ledger in memory answers the same
    # questions through the same queries.
    empty = sqlite3.connect(":memory:")
    empty.row_factory = sqlite3.Row
    empty.executescript(ledger.schema)
    return empty


def ledger_facts(
    kind: str, db_path: str | Path, calls: Iterable[tuple[str, dict[str, Any]]]
) -> tuple[list[dict[str, Any]], list[int | None]]:
    """`ground_truth` and the `real_rows` of each (tool, arguments), over one connection.

    A run asks both after it ends; opening the ledger once instead of once per question saves
    a few ms per run (issue 24).
    """
    ledger = builtin(kind).ledger
    conn = _ledger_conn(ledger, db_path)
    try:
        truth = ledger.ground_truth(conn)
        return truth, [ledger.real_rows(conn, tool, arguments) for tool, arguments in calls]
    finally:
        conn.close()


def ground_truth(kind: str, db_path: str | Path) -> list[dict[str, Any]]:
    """One entry per distinct business operation that really produced rows, with `rows`."""
    return ledger_facts(kind, db_path, ())[0]


def real_rows(kind: str, db_path: str | Path, tool: str, arguments: dict[str, Any]) -> int | None:
    """Rows that really exist for this tool call's operation; None for tools writing nothing.

    Arguments are normalised as the server normalises them when it stores (see `_fields`);
    an idempotency key among them is ignored; arguments the server would refuse count 0.
    """
    return ledger_facts(kind, db_path, [(tool, arguments)])[1][0]

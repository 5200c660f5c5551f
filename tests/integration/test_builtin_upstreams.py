"""The built-in reference upstreams (SPEC R4): real MCP servers over stdio and in memory,
and their SQLite ground truth next to what was called."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.memory import create_client_server_memory_streams

from runner.upstreams import (
    BUILTIN_UPSTREAMS,
    ground_truth,
    real_rows,
    serve,
    stdio_command,
)
from runner.upstreams._plumbing import open_db
from runner.upstreams.booking import CreateBooking, create_booking
from runner.upstreams.payment import CreatePayment, create_payment
from tests.support.paths import ROOT

TRANSPORTS = ["stdio", "memory"]
SESSION_TIMEOUT_S = 30
ANNA = {"guest": "Anna Smith", "date": "2025-06-01", "nights": 2}
ACME = {"customer": "ACME GmbH", "amount": 129.5, "currency": "EUR"}


@asynccontextmanager
async def connect(kind: str, db: Path, transport: str) -> AsyncIterator[ClientSession]:
    """An initialised client session to KIND, as a subprocess or hosted in this process."""
    with anyio.fail_after(SESSION_TIMEOUT_S):
        if transport == "stdio":
            command, *args = stdio_command(kind, db)
            # cwd: `-m runner.upstreams` must find the package without an installed project.
            params = StdioServerParameters(command=command, args=args, cwd=ROOT)
            async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
                await s.initialize()
                yield s
            return
        async with create_client_server_memory_streams() as (client, server):
            async with anyio.create_task_group() as tg:
                tg.start_soon(serve, kind, db, *server)
                async with ClientSession(*client) as s:
                    await s.initialize()
                    yield s
                # EOF on the server's read side: serve() must return by itself.
                await client[1].aclose()


def payload(result: Any) -> dict[str, Any]:
    """The structured answer, checked against the JSON text it must mirror."""
    assert result.structured_content == json.loads(result.content[0].text)
    return result.structured_content


# -- over MCP, both transports --------------------------------------------------------------

EXPECTED_TOOLS = {
    # kind: {tool: (readOnlyHint, destructiveHint)}
    "booking": {
        "create_booking": (False, False),
        "search_bookings": (True, None),
        "get_booking": (True, None),
        "cancel_booking": (False, True),
    },
    "booking-nosearch": {
        "create_booking": (False, False),
        "get_booking": (True, None),
        "cancel_booking": (False, True),
    },
    "payment": {
        "create_payment": (False, False),
        "list_payments": (True, None),
        "get_payment": (True, None),
    },
}


@pytest.mark.anyio
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("kind", sorted(EXPECTED_TOOLS))
async def test_r4_lists_tools_with_annotations_and_schemas(kind, transport, tmp_path):
    async with connect(kind, tmp_path / "ledger.sqlite", transport) as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
    assert set(tools) == set(EXPECTED_TOOLS[kind])
    for name, (read_only, destructive) in EXPECTED_TOOLS[kind].items():
        tool = tools[name]
        assert tool.annotations.read_only_hint is read_only, name
        assert tool.annotations.destructive_hint is destructive, name
        assert tool.description
        assert tool.input_schema["type"] == "object"
    if kind == "payment":
        props = tools["create_payment"].input_schema["properties"]
        assert props["amount"]["type"] == "number"
        assert "idempotency_key" in props
    else:
        props = tools["create_booking"].input_schema["properties"]
        assert props["date"]["pattern"] == "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
        assert tools["create_booking"].input_schema["required"] == ["guest", "date", "nights"]


def test_r4_ledger_facts_answer_as_the_single_questions_over_one_connection(tmp_path, monkeypatch):
    # issue 24: a run asks for the ground truth and every operation's real rows at once; the
    # answers are those of ground_truth/real_rows, and the ledger is opened once, not per call.
    import runner.upstreams._registry as registry

    db = tmp_path / "ledger.sqlite"
    conn = open_db(db, BUILTIN_UPSTREAMS["booking"].ledger.schema)
    for _ in range(2):
        create_booking(conn, CreateBooking(**ANNA))
    conn.close()
    calls = [("create_booking", ANNA), ("create_booking", {**ANNA, "nights": 3})]
    opened = []
    real_open = registry.open_readonly
    monkeypatch.setattr(
        registry, "open_readonly", lambda path: opened.append(path) or real_open(path)
    )
    truth, rows = registry.ledger_facts("booking", db, calls)
    assert len(opened) == 1
    assert rows == [2, 0]
    assert truth == ground_truth("booking", db)
    assert rows == [real_rows("booking", db, tool, args) for tool, args in calls]


def test_r4_a_run_reads_each_operations_real_rows_even_after_asking_the_truth_alone(tmp_path):
    # R4, R10: what a run left is read once, but a question about more operations than were
    # asked before is answered for them (the truth alone first, then the real rows per op)
    from types import SimpleNamespace

    from runner.execute.run import RunLeft

    conn = open_db(tmp_path / "upstream.sqlite", BUILTIN_UPSTREAMS["booking"].ledger.schema)
    for _ in range(2):
        create_booking(conn, CreateBooking(**ANNA))
    conn.close()
    cell = SimpleNamespace(upstream=SimpleNamespace(builtin="booking"))
    left = RunLeft(cell, None, tmp_path, events=[])  # type: ignore[arg-type]
    ops = [
        SimpleNamespace(tool="create_booking", arguments=ANNA),
        SimpleNamespace(tool="create_booking", arguments={**ANNA, "nights": 3}),
    ]
    assert left.truth == ground_truth("booking", tmp_path / "upstream.sqlite")
    truth, rows = left.ledger(ops)
    assert rows == [2, 0]
    assert truth == left.truth


@pytest.mark.anyio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_r4_create_booking_twice_gives_two_rows_in_ground_truth(transport, tmp_path):
    db = tmp_path / "ledger.sqlite"
    async with connect("booking", db, transport) as s:
        first = payload(await s.call_tool("create_booking", ANNA))
        second = payload(await s.call_tool("create_booking", ANNA))
        # Committed before the answer: another reader sees both rows while the server runs.
        assert real_rows("booking", db, "create_booking", ANNA) == 2
    assert first["booking_id"] != second["booking_id"]
    assert first["booking_id"].startswith("BK-") and len(first["booking_id"]) == 9
    assert ground_truth("booking", db) == [
        {
            **ANNA,
            "room_type": "standard",
            "rows": 2,
            "cancelled": 0,
            "booking_ids": [first["booking_id"], second["booking_id"]],
        }
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_r4_payment_with_same_idempotency_key_gives_one_row(transport, tmp_path):
    db = tmp_path / "ledger.sqlite"
    async with connect("payment", db, transport) as s:
        first = payload(await s.call_tool("create_payment", {**ACME, "idempotency_key": "k-1"}))
        replay = payload(await s.call_tool("create_payment", {**ACME, "idempotency_key": "k-1"}))
        assert real_rows("payment", db, "create_payment", ACME) == 1
        unkeyed = payload(await s.call_tool("create_payment", ACME))
    assert replay == first  # the original answer, word for word
    assert unkeyed["payment_id"] != first["payment_id"]
    [entry] = ground_truth("payment", db)
    assert entry == {
        "customer": "ACME GmbH",
        "amount": 129.5,
        "currency": "EUR",
        "reference": None,
        "rows": 2,
        "payment_ids": [first["payment_id"], unkeyed["payment_id"]],
    }
    # The key is not part of the business operation: both rows count, with or without it.
    assert real_rows("payment", db, "create_payment", {**ACME, "idempotency_key": "k-9"}) == 2


@pytest.mark.anyio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_r4_search_finds_bookings_by_guest_and_date(transport, tmp_path):
    bookings = [
        {"guest": "Anna Smith", "date": "2025-06-01", "nights": 2},
        {"guest": "Bob Jones", "date": "2025-06-01", "nights": 1},
        {"guest": "Anna Smith", "date": "2025-07-15", "nights": 3, "room_type": "suite"},
    ]
    async with connect("booking", tmp_path / "ledger.sqlite", transport) as s:
        ids = [payload(await s.call_tool("create_booking", b))["booking_id"] for b in bookings]

        async def found(**query: str) -> list[str]:
            answer = payload(await s.call_tool("search_bookings", query))
            assert answer["count"] == len(answer["bookings"])
            return [b["booking_id"] for b in answer["bookings"]]

        assert await found(guest="smith") == [ids[0], ids[2]]  # partial, any case
        assert await found(date="2025-06-01") == [ids[0], ids[1]]
        assert await found(guest="ANNA SMITH", date="2025-07-15") == [ids[2]]
        assert await found(guest="Carol") == []
        assert await found() == ids


@pytest.mark.anyio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_r4_get_booking_with_made_up_id_is_an_error_result(transport, tmp_path):
    async with connect("booking", tmp_path / "ledger.sqlite", transport) as s:
        made_up = await s.call_tool("get_booking", {"booking_id": "BK-000000"})
        created = payload(await s.call_tool("create_booking", ANNA))
        fetched = await s.call_tool("get_booking", {"booking_id": created["booking_id"].lower()})
    assert made_up.is_error is True
    assert payload(made_up)["error"] == "not_found"
    assert fetched.is_error is False
    assert payload(fetched) == created


# The listing test above already runs booking-nosearch over both transports; this one pins the
# answer an agent gets when it calls search anyway.
@pytest.mark.anyio
async def test_r4_booking_nosearch_has_no_search_tool(tmp_path):
    async with connect("booking-nosearch", tmp_path / "ledger.sqlite", "memory") as s:
        names = [t.name for t in (await s.list_tools()).tools]
        search = await s.call_tool("search_bookings", {"guest": "Anna"})
    assert "search_bookings" not in names
    assert search.is_error is True
    assert payload(search)["error"] == "unknown_tool"


@pytest.mark.anyio
async def test_r4_cancel_keeps_the_row_and_counts_once(tmp_path):
    db = tmp_path / "ledger.sqlite"
    async with connect("booking", db, "memory") as s:
        booking_id = payload(await s.call_tool("create_booking", ANNA))["booking_id"]
        cancelled = payload(await s.call_tool("cancel_booking", {"booking_id": booking_id}))
        again = await s.call_tool("cancel_booking", {"booking_id": booking_id})
    assert cancelled["status"] == "cancelled"
    assert again.is_error is True and payload(again)["error"] == "already_cancelled"
    assert real_rows("booking", db, "cancel_booking", {"booking_id": booking_id}) == 1
    [entry] = ground_truth("booking", db)
    assert (entry["rows"], entry["cancelled"]) == (1, 1)


INVALID_CALLS = [
    ("booking", "create_booking", {**ANNA, "date": "01.06.2025"}),
    ("booking", "create_booking", {**ANNA, "date": "2025-02-30"}),
    ("booking", "create_booking", {**ANNA, "nights": "2"}),
    ("booking", "create_booking", {**ANNA, "nights": 0}),
    ("booking", "create_booking", {**ANNA, "guest": "   "}),
    ("booking", "create_booking", {**ANNA, "room_type": "penthouse"}),
    ("booking", "create_booking", {**ANNA, "note": "late arrival"}),
    ("booking", "create_booking", {"guest": "Anna Smith"}),
    ("payment", "create_payment", {**ACME, "amount": "129.50"}),
    ("payment", "create_payment", {**ACME, "amount": 129.555}),
    ("payment", "create_payment", {**ACME, "amount": -5}),
    ("payment", "create_payment", {**ACME, "currency": "EURO"}),
    ("payment", "create_payment", {**ACME, "idempotency_key": ""}),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("kind", "tool", "arguments"), INVALID_CALLS)
async def test_r4_invalid_input_is_an_error_result_and_writes_nothing(
    kind, tool, arguments, tmp_path
):
    db = tmp_path / "ledger.sqlite"
    async with connect(kind, db, "memory") as s:
        result = await s.call_tool(tool, arguments)
    assert result.is_error is True
    assert payload(result)["error"] == "invalid_input"
    assert ground_truth(kind, db) == []
    assert real_rows(kind, db, tool, arguments) == 0


@pytest.mark.anyio
async def test_r4_parallel_creates_each_get_their_own_row(tmp_path):
    db = tmp_path / "ledger.sqlite"
    answers: list[dict[str, Any]] = []
    async with connect("booking", db, "memory") as s:

        async def book() -> None:
            answers.append(payload(await s.call_tool("create_booking", ANNA)))

        async with anyio.create_task_group() as tg:
            for _ in range(10):
                tg.start_soon(book)
    [entry] = ground_truth("booking", db)
    assert entry["rows"] == 10
    assert sorted(entry["booking_ids"]) == sorted(a["booking_id"] for a in answers)
    assert len(set(entry["booking_ids"])) == 10


# -- ground truth without MCP ----------------------------------------------------------------


@pytest.fixture(scope="module")
def booking_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A booking ledger with two rows for Anna (spelt differently) and one for Bob."""
    db = tmp_path_factory.mktemp("ledger") / "booking.sqlite"
    conn = open_db(db, BUILTIN_UPSTREAMS["booking"].ledger.schema)
    for args in (ANNA, {**ANNA, "guest": "  anna   SMITH "}, {**ANNA, "guest": "Bob"}):
        create_booking(conn, CreateBooking.model_validate(args))
    conn.close()
    return db


@pytest.fixture(scope="module")
def payment_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A payment ledger with ACME charged 129.50 EUR twice (once keyed) and once 10 EUR."""
    db = tmp_path_factory.mktemp("ledger") / "payment.sqlite"
    conn = open_db(db, BUILTIN_UPSTREAMS["payment"].ledger.schema)
    for args in ({**ACME, "idempotency_key": "a"}, ACME, {**ACME, "amount": 10}):
        create_payment(conn, CreatePayment.model_validate(args))
    conn.close()
    return db


REAL_ROWS_CASES = [
    # (kind, tool, arguments, expected): normalised as the server stores (see _fields)
    ("booking", "create_booking", ANNA, 2),
    ("booking", "create_booking", {**ANNA, "guest": "ANNA SMITH"}, 2),
    ("booking", "create_booking", {**ANNA, "guest": "Anna\u00a0Smith"}, 2),  # NFKC space
    ("booking", "create_booking", {**ANNA, "room_type": "standard"}, 2),  # the default
    ("booking", "create_booking", {**ANNA, "room_type": "suite"}, 0),
    ("booking", "create_booking", {**ANNA, "nights": 3}, 0),
    ("booking", "create_booking", {**ANNA, "guest": "Bob"}, 1),
    ("booking", "create_booking", {**ANNA, "nights": "2"}, 0),  # refused by the server
    ("booking-nosearch", "create_booking", ANNA, 2),
    ("booking", "cancel_booking", {"booking_id": "BK-000000"}, 0),
    ("booking", "search_bookings", {"guest": "Anna"}, None),
    ("booking", "get_booking", {"booking_id": "BK-000000"}, None),
    ("booking", "no_such_tool", {}, None),
    ("payment", "create_payment", ACME, 2),
    ("payment", "create_payment", {**ACME, "amount": 129.50, "currency": "eur"}, 2),
    ("payment", "create_payment", {**ACME, "customer": "acme  gmbh"}, 2),
    ("payment", "create_payment", {**ACME, "amount": 10}, 1),
    ("payment", "create_payment", {**ACME, "amount": 10.0}, 1),
    ("payment", "create_payment", {**ACME, "reference": "INV-1"}, 0),
    ("payment", "create_payment", {**ACME, "currency": "USD"}, 0),
    ("payment", "list_payments", {}, None),
    ("payment", "get_payment", {"payment_id": "PAY-00000000"}, None),
]


@pytest.mark.parametrize(("kind", "tool", "arguments", "expected"), REAL_ROWS_CASES)
def test_r4_real_rows_normalises_like_the_server(
    kind, tool, arguments, expected, booking_db, payment_db
):
    db = payment_db if kind == "payment" else booking_db
    assert real_rows(kind, db, tool, arguments) == expected


def test_r4_ground_truth_groups_spellings_of_one_booking(booking_db):
    entries = ground_truth("booking", booking_db)
    assert [(e["guest"], e["rows"]) for e in entries] == [("Anna Smith", 2), ("Bob", 1)]
    assert {k for k in entries[0]} >= {"guest", "date", "nights", "room_type", "rows"}


def test_r4_ground_truth_of_payments_has_business_fields(payment_db):
    entries = ground_truth("payment", payment_db)
    assert [(e["amount"], e["currency"], e["rows"]) for e in entries] == [
        (129.5, "EUR", 2),
        (10.0, "EUR", 1),
    ]
    assert {k for k in entries[0]} >= {"customer", "amount", "currency", "reference", "rows"}


def test_r4_ground_truth_of_a_ledger_never_served_is_empty(tmp_path):
    db = tmp_path / "empty.sqlite"
    sqlite3.connect(db).close()  # the file exists, the schema does not
    assert ground_truth("booking", db) == []
    assert real_rows("payment", db, "create_payment", ACME) == 0


def test_r4_ground_truth_of_a_missing_file_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        ground_truth("booking", tmp_path / "nowhere.sqlite")


@pytest.mark.parametrize("kind", sorted(BUILTIN_UPSTREAMS))
def test_r4_stdio_command_runs_the_package_with_its_ledger(kind, tmp_path):
    db = tmp_path / "x.sqlite"
    assert stdio_command(kind, db) == [
        sys.executable,
        "-P",  # a module in the runner's folder shadows nothing (G3)
        "-m",
        "runner.upstreams",
        kind,
        "--db",
        str(db),
    ]
    assert BUILTIN_UPSTREAMS[kind].description


def test_r4_unknown_kind_names_the_known_ones(tmp_path):
    with pytest.raises(ValueError, match="booking-nosearch"):
        stdio_command("hotel", tmp_path / "x.sqlite")


def test_r4_the_kinds_a_spec_is_checked_against_are_the_built_in_upstreams():
    # runner.upstreams.kinds names them without loading the servers (a spec check, --dry-run)
    from runner.upstreams import KINDS

    assert KINDS == tuple(BUILTIN_UPSTREAMS)


@pytest.mark.parametrize("kind", sorted(BUILTIN_UPSTREAMS))
def test_r4_a_new_ledger_is_the_one_its_schema_makes(tmp_path, kind):
    # issue 24: a new ledger file is a copy of an empty one made once per process; it must be
    # what executing the schema in a new file makes (tables, indexes, WAL), and a file already
    # there is opened as it is, never replaced.
    schema = BUILTIN_UPSTREAMS[kind].ledger.schema
    made = sqlite3.connect(tmp_path / "made.sqlite", isolation_level=None)
    made.execute("PRAGMA journal_mode=WAL")
    made.executescript(schema)
    for name in ("first.sqlite", "second.sqlite"):
        conn = open_db(tmp_path / name, schema)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        query = "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name"
        assert [tuple(r) for r in conn.execute(query)] == made.execute(query).fetchall()
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.close()
    made.close()
    kept = tmp_path / "kept.sqlite"
    conn = open_db(kept, schema)
    conn.execute("CREATE TABLE mine (x)")
    conn.close()
    conn = open_db(kept, schema)
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'mine'").fetchone()
    conn.close()


def test_r4_a_new_ledger_that_cannot_be_written_leaves_no_file(tmp_path, monkeypatch):
    # A full disk while the empty ledger is copied in: the error is the disk's, and no
    # half-written file stays for the next open to read as a corrupt database.
    import errno

    import runner.upstreams._plumbing as plumbing

    def full(_fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(plumbing.os, "fsync", full)
    db = tmp_path / "upstream.sqlite"
    with pytest.raises(OSError, match="No space left"):
        open_db(db, BUILTIN_UPSTREAMS["booking"].ledger.schema)
    assert not db.exists()
    monkeypatch.undo()
    open_db(db, BUILTIN_UPSTREAMS["booking"].ledger.schema).close()  # the next try works

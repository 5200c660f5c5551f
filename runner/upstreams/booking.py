"""The hotel booking service: NOT idempotent, every create_booking inserts a new row.

Two variants share this ledger: `booking` (with search by guest and date) and
`booking-nosearch` (lookup by booking id only, so an agent that lost the id to a timeout
cannot verify). Booking ids are random ("BK-" + 6 hex digits) so an agent cannot guess one.
"""

from __future__ import annotations

import secrets
import sqlite3
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import Field, ValidationError

from runner.upstreams._fields import IsoDate, OptionalText, RecordId, Text, ToolArgs, match_key
from runner.upstreams._plumbing import (
    READ,
    Ledger,
    ToolDef,
    ToolError,
    write_annotations,
    write_transaction,
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS bookings (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    booking_id   TEXT NOT NULL UNIQUE,
    guest        TEXT NOT NULL,
    guest_key    TEXT NOT NULL,
    stay_date    TEXT NOT NULL,
    nights       INTEGER NOT NULL,
    room_type    TEXT NOT NULL,
    status       TEXT NOT NULL DEFAULT 'confirmed',
    created_at   TEXT NOT NULL,
    cancelled_at TEXT
);
CREATE INDEX IF NOT EXISTS bookings_by_operation
    ON bookings (guest_key, stay_date, nights, room_type);
"""

RoomType = Literal["standard", "double", "suite"]
DEFAULT_ROOM_TYPE: RoomType = "standard"


class CreateBooking(ToolArgs):
    guest: Text = Field(description="Full name of the guest.")
    date: IsoDate = Field(description="Arrival date as YYYY-MM-DD.")
    nights: int = Field(ge=1, le=365, description="Number of nights.")
    # The default is declared in the schema, so a client (and the harness, K4) can see it.
    room_type: RoomType = Field(default=DEFAULT_ROOM_TYPE, description="Room type.")

    def operation(self) -> tuple[str, str, int, str]:
        """The business identity of this booking, as the ledger groups rows."""
        return (match_key(self.guest), self.date, self.nights, self.room_type)


class SearchBookings(ToolArgs):
    guest: OptionalText = Field(
        default=None, description="Guest name or part of it (case-insensitive)."
    )
    date: IsoDate | None = Field(default=None, description="Arrival date as YYYY-MM-DD.")


class BookingRef(ToolArgs):
    booking_id: RecordId = Field(description="The booking id, e.g. BK-1A2B3C.")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _public(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "booking_id": row["booking_id"],
        "guest": row["guest"],
        "date": row["stay_date"],
        "nights": row["nights"],
        "room_type": row["room_type"],
        "status": row["status"],
        "created_at": row["created_at"],
    }


def _find(conn: sqlite3.Connection, booking_id: str) -> sqlite3.Row:
    row = conn.execute("SELECT * FROM bookings WHERE booking_id = ?", (booking_id,)).fetchone()
    if row is None:
        raise ToolError("not_found", f"no booking with id {booking_id}")
    return row


def create_booking(conn: sqlite3.Connection, args: CreateBooking) -> dict[str, Any]:
    """Insert a new booking row, whatever existed before."""
    guest_key, date, nights, room_type = args.operation()
    with write_transaction(conn):
        for _ in range(8):
            booking_id = "BK-" + secrets.token_hex(3).upper()
            taken = conn.execute(
                "SELECT 1 FROM bookings WHERE booking_id = ?", (booking_id,)
            ).fetchone()
            if not taken:
                break
        else:  # 16M ids; eight collisions in a row means something else is wrong
            raise ToolError("internal", "could not allocate a booking id")
        conn.execute(
            "INSERT INTO bookings (booking_id, guest, guest_key, stay_date, nights, room_type,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (booking_id, args.guest, guest_key, date, nights, room_type, _now()),
        )
    return _public(_find(conn, booking_id))


def search_bookings(conn: sqlite3.Connection, args: SearchBookings) -> dict[str, Any]:
    """Bookings whose guest contains the given text and/or whose arrival is the given date."""
    sql = "SELECT * FROM bookings WHERE 1 = 1"
    params: list[Any] = []
    if args.guest is not None:
        # instr, not LIKE: a guest name with % or _ must not act as a wildcard.
        sql += " AND instr(guest_key, ?) > 0"
        params.append(match_key(args.guest))
    if args.date is not None:
        sql += " AND stay_date = ?"
        params.append(args.date)
    rows = conn.execute(sql + " ORDER BY seq", params).fetchall()
    return {"bookings": [_public(r) for r in rows], "count": len(rows)}


def get_booking(conn: sqlite3.Connection, args: BookingRef) -> dict[str, Any]:
    """One booking by id; not_found error otherwise."""
    return _public(_find(conn, args.booking_id))


def cancel_booking(conn: sqlite3.Connection, args: BookingRef) -> dict[str, Any]:
    """Mark a booking cancelled; the row stays, so the ground truth still sees it."""
    with write_transaction(conn):
        row = _find(conn, args.booking_id)
        if row["status"] == "cancelled":
            raise ToolError("already_cancelled", f"booking {args.booking_id} is already cancelled")
        conn.execute(
            "UPDATE bookings SET status = 'cancelled', cancelled_at = ? WHERE booking_id = ?",
            (_now(), args.booking_id),
        )
    return _public(_find(conn, args.booking_id))


TOOLS = (
    ToolDef(
        name="create_booking",
        description=(
            "Book a hotel room. Every call creates a new, separate booking and returns its "
            "booking id. Dates are YYYY-MM-DD."
        ),
        args=CreateBooking,
        annotations=write_annotations(destructive=False, idempotent=False),
        run=create_booking,
    ),
    ToolDef(
        name="search_bookings",
        description=(
            "Find bookings by guest name (case-insensitive, partial match) and/or arrival date "
            "(YYYY-MM-DD). Returns every matching booking with its booking id and status; "
            "without filters, all bookings."
        ),
        args=SearchBookings,
        annotations=READ,
        run=search_bookings,
    ),
    ToolDef(
        name="get_booking",
        description="Look up one booking by its booking id.",
        args=BookingRef,
        annotations=READ,
        run=get_booking,
    ),
    ToolDef(
        name="cancel_booking",
        description="Cancel a booking by its booking id. It stays on record as 'cancelled'.",
        args=BookingRef,
        annotations=write_annotations(destructive=True, idempotent=True),
        run=cancel_booking,
    ),
)


def ground_truth(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """One entry per distinct booking (guest, date, nights, room type) with its real rows."""
    entries: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in conn.execute("SELECT * FROM bookings ORDER BY seq"):
        key = (r["guest_key"], r["stay_date"], r["nights"], r["room_type"])
        entry = entries.setdefault(
            key,
            {
                "guest": r["guest"],  # the first spelling seen
                "date": r["stay_date"],
                "nights": r["nights"],
                "room_type": r["room_type"],
                "rows": 0,
                "cancelled": 0,
                "booking_ids": [],
            },
        )
        entry["rows"] += 1
        entry["cancelled"] += r["status"] == "cancelled"
        entry["booking_ids"].append(r["booking_id"])
    return list(entries.values())


def real_rows(conn: sqlite3.Connection, tool: str, arguments: dict[str, Any]) -> int | None:
    """Rows the given call would have produced: bookings for create, cancellations for cancel."""
    try:
        if tool == "create_booking":
            op = CreateBooking.model_validate(arguments).operation()
            return conn.execute(
                "SELECT COUNT(*) FROM bookings WHERE guest_key = ? AND stay_date = ?"
                " AND nights = ? AND room_type = ?",
                op,
            ).fetchone()[0]
        if tool == "cancel_booking":
            ref = BookingRef.model_validate(arguments)
            return conn.execute(
                "SELECT COUNT(*) FROM bookings WHERE booking_id = ? AND cancelled_at IS NOT NULL",
                (ref.booking_id,),
            ).fetchone()[0]
    except ValidationError:
        # The server refuses such arguments, so they cannot have produced a row.
        return 0
    return None


BOOKING = Ledger(
    table="bookings", schema=SCHEMA, tools=TOOLS, ground_truth=ground_truth, real_rows=real_rows
)
BOOKING_NOSEARCH = Ledger(
    table="bookings",
    schema=SCHEMA,
    tools=tuple(t for t in TOOLS if t.name != "search_bookings"),
    ground_truth=ground_truth,
    real_rows=real_rows,
)

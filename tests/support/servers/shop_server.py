"""A stdio MCP server on the official SDK (MCPServer) whose state is a SQLite file: the ground
truth of the effects tests (E2-E4, tests/e2e/test_effects_real_servers.py).

Run: python tests/support/servers/shop_server.py --db PATH

Its tools are shapes real servers have, each one of the issue's false alarms or passes:

  place_order      write by name; deduplicates by `client_order_id` (a repeat with a known id
                   inserts nothing and answers the first order again), as trading APIs do
  order_status     annotated readOnlyHint=true, a write verb's name: polling it writes nothing
  close_price      a read named verb + state noun, without annotations
  set_env_vars     writes a service's variables, a free-form map (`variables`) whose names are
                   data (`CLIENT_TOKEN` is a variable, not a key)
  book_room        writes a booking; `room` is an enum with a default, which pydantic writes
                   as {"$ref": ..., "default": "standard"}; every call is a new booking
  payments.create  a namespaced name whose last segment is a bare write verb; every call
                   charges

Standalone on purpose: it imports only the SDK and the standard library.
"""

from __future__ import annotations

import argparse
import sqlite3
import uuid
from enum import StrEnum

import mcp_types as types
from mcp.server.mcpserver import MCPServer

READ_ONLY = types.ToolAnnotations(read_only_hint=True)

SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (order_id TEXT PRIMARY KEY, client_order_id TEXT UNIQUE,
                                   symbol TEXT NOT NULL, qty INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS env (service TEXT, name TEXT, value TEXT);
CREATE TABLE IF NOT EXISTS bookings (booking_id TEXT PRIMARY KEY, guest TEXT, date TEXT,
                                     room TEXT);
CREATE TABLE IF NOT EXISTS payments (payment_id TEXT PRIMARY KEY, customer TEXT, amount TEXT);
CREATE TABLE IF NOT EXISTS polls (tool TEXT);
"""


class Room(StrEnum):
    standard = "standard"
    suite = "suite"


def build(db: str) -> MCPServer:
    app = MCPServer("shop")

    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(db, isolation_level=None)
        conn.executescript(SCHEMA)
        return conn

    @app.tool(description="Place an order. A known client_order_id places nothing new.")
    def place_order(symbol: str, qty: int, client_order_id: str | None = None) -> str:
        with connect() as conn:
            if client_order_id is not None:
                known = conn.execute(
                    "SELECT order_id FROM orders WHERE client_order_id = ?", (client_order_id,)
                ).fetchone()
                if known is not None:
                    return f"order {known[0]} placed"
            order_id = "ORD-" + uuid.uuid4().hex[:8].upper()
            conn.execute(
                "INSERT INTO orders VALUES (?, ?, ?, ?)", (order_id, client_order_id, symbol, qty)
            )
            return f"order {order_id} placed"

    @app.tool(description="The status of an order.", annotations=READ_ONLY)
    def order_status(order_id: str) -> str:
        with connect() as conn:
            conn.execute("INSERT INTO polls VALUES ('order_status')")  # counted, changes nothing
            found = conn.execute("SELECT 1 FROM orders WHERE order_id = ?", (order_id,)).fetchone()
        return "filled" if found else "unknown order"

    @app.tool(description="The last close price of a symbol.")
    def close_price(symbol: str) -> str:
        with connect() as conn:
            conn.execute("INSERT INTO polls VALUES ('close_price')")
        return f"{symbol}: 129.00"

    @app.tool(description="Set environment variables of a service.")
    def set_env_vars(service: str, variables: dict[str, str]) -> str:
        with connect() as conn:
            for name, value in variables.items():
                conn.execute("INSERT INTO env VALUES (?, ?, ?)", (service, name, value))
        return f"{len(variables)} variables set"

    @app.tool(description="Book a room. Every call is a new booking.")
    def book_room(guest: str, date: str, room: Room = Room.standard) -> str:
        booking_id = "BK-" + uuid.uuid4().hex[:8].upper()
        with connect() as conn:
            conn.execute(
                "INSERT INTO bookings VALUES (?, ?, ?, ?)", (booking_id, guest, date, str(room))
            )
        return f"booking {booking_id}"

    @app.tool(name="payments.create", description="Charge a customer. Every call charges.")
    def create_payment(customer: str, amount: float) -> str:
        payment_id = "PAY-" + uuid.uuid4().hex[:8].upper()
        with connect() as conn:
            conn.execute("INSERT INTO payments VALUES (?, ?, ?)", (payment_id, customer, amount))
        return f"payment {payment_id}"

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    args = parser.parse_args()
    build(args.db).run("stdio")


if __name__ == "__main__":
    main()

"""The payment service: idempotent WITH a key, a new payment on every call without one.

A `create_payment` whose `idempotency_key` was seen before inserts nothing and answers exactly
as the first call did (like Stripe's replay; identical answers are what the harness reads as
"the upstream may deduplicate itself", J1), even if the other arguments differ: the key alone
decides, as the contract (SPEC R4) asks. Without a key every call charges again.
"""

from __future__ import annotations

import secrets
import sqlite3
from datetime import UTC, datetime
from typing import Any

from pydantic import Field, ValidationError

from runner.upstreams._fields import (
    Amount,
    Currency,
    OptionalText,
    RecordId,
    Text,
    ToolArgs,
    match_key,
    to_minor_units,
)
from runner.upstreams._plumbing import (
    READ,
    Ledger,
    ToolDef,
    ToolError,
    write_annotations,
    write_transaction,
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS payments (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    payment_id      TEXT NOT NULL UNIQUE,
    customer        TEXT NOT NULL,
    customer_key    TEXT NOT NULL,
    amount_minor    INTEGER NOT NULL,
    currency        TEXT NOT NULL,
    reference       TEXT,
    reference_key   TEXT,
    idempotency_key TEXT UNIQUE,
    status          TEXT NOT NULL DEFAULT 'succeeded',
    created_at      TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS payments_by_operation
    ON payments (customer_key, amount_minor, currency, reference_key);
"""


class CreatePayment(ToolArgs):
    customer: Text = Field(description="Name of the customer to charge.")
    amount: Amount = Field(description="Amount as a number, at most two decimals, e.g. 129.5.")
    currency: Currency
    reference: OptionalText = Field(
        default=None, description="Your own reference for this payment, e.g. an invoice number."
    )
    idempotency_key: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="A unique key for this payment; repeating it never charges twice.",
    )

    def operation(self) -> tuple[str, int, str, str | None]:
        """The business identity of this payment, as the ledger groups rows (key excluded)."""
        reference_key = match_key(self.reference) if self.reference is not None else None
        return (match_key(self.customer), to_minor_units(self.amount), self.currency, reference_key)


class ListPayments(ToolArgs):
    customer: OptionalText = Field(
        default=None, description="Customer name or part of it (case-insensitive)."
    )
    reference: OptionalText = Field(default=None, description="Your reference, exact match.")


class PaymentRef(ToolArgs):
    payment_id: RecordId = Field(description="The payment id, e.g. PAY-1A2B3C4D.")


def _public(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "payment_id": row["payment_id"],
        "customer": row["customer"],
        "amount": row["amount_minor"] / 100,
        "currency": row["currency"],
        "reference": row["reference"],
        "status": row["status"],
        "created_at": row["created_at"],
    }


def _by_id(conn: sqlite3.Connection, payment_id: str) -> sqlite3.Row | None:
    return conn.execute("SELECT * FROM payments WHERE payment_id = ?", (payment_id,)).fetchone()


def create_payment(conn: sqlite3.Connection, args: CreatePayment) -> dict[str, Any]:
    """Charge once per idempotency key; without a key, charge on every call."""
    customer_key, amount_minor, currency, reference_key = args.operation()
    with write_transaction(conn):
        if args.idempotency_key is not None:
            seen = conn.execute(
                "SELECT * FROM payments WHERE idempotency_key = ?", (args.idempotency_key,)
            ).fetchone()
            if seen is not None:
                return _public(seen)
        payment_id = "PAY-" + secrets.token_hex(4).upper()
        while _by_id(conn, payment_id) is not None:
            payment_id = "PAY-" + secrets.token_hex(4).upper()
        conn.execute(
            "INSERT INTO payments (payment_id, customer, customer_key, amount_minor, currency,"
            " reference, reference_key, idempotency_key, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                payment_id,
                args.customer,
                customer_key,
                amount_minor,
                currency,
                args.reference,
                reference_key,
                args.idempotency_key,
                datetime.now(UTC).isoformat(timespec="milliseconds"),
            ),
        )
        row = _by_id(conn, payment_id)
    return _public(row)


def list_payments(conn: sqlite3.Connection, args: ListPayments) -> dict[str, Any]:
    """Payments filtered by customer (partial, case-insensitive) and/or exact reference."""
    sql = "SELECT * FROM payments WHERE 1 = 1"
    params: list[Any] = []
    if args.customer is not None:
        sql += " AND instr(customer_key, ?) > 0"
        params.append(match_key(args.customer))
    if args.reference is not None:
        sql += " AND reference_key = ?"
        params.append(match_key(args.reference))
    rows = conn.execute(sql + " ORDER BY seq", params).fetchall()
    return {"payments": [_public(r) for r in rows], "count": len(rows)}


def get_payment(conn: sqlite3.Connection, args: PaymentRef) -> dict[str, Any]:
    """One payment by id; not_found error otherwise."""
    row = _by_id(conn, args.payment_id)
    if row is None:
        raise ToolError("not_found", f"no payment with id {args.payment_id}")
    return _public(row)


TOOLS = (
    ToolDef(
        name="create_payment",
        description=(
            "Charge a customer. Without an idempotency_key every call creates a new payment. "
            "With an idempotency_key used before, nothing is charged and the original payment "
            "is returned."
        ),
        args=CreatePayment,
        annotations=write_annotations(destructive=False, idempotent=False),
        run=create_payment,
    ),
    ToolDef(
        name="list_payments",
        description=(
            "List payments, optionally filtered by customer name (case-insensitive, partial "
            "match) and/or your reference. Returns each payment with its payment id."
        ),
        args=ListPayments,
        annotations=READ,
        run=list_payments,
    ),
    ToolDef(
        name="get_payment",
        description="Look up one payment by its payment id.",
        args=PaymentRef,
        annotations=READ,
        run=get_payment,
    ),
)


def ground_truth(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """One entry per distinct payment (customer, amount, currency, reference) with its rows."""
    entries: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in conn.execute("SELECT * FROM payments ORDER BY seq"):
        key = (r["customer_key"], r["amount_minor"], r["currency"], r["reference_key"])
        entry = entries.setdefault(
            key,
            {
                "customer": r["customer"],  # the first spelling seen
                "amount": r["amount_minor"] / 100,
                "currency": r["currency"],
                "reference": r["reference"],
                "rows": 0,
                "payment_ids": [],
            },
        )
        entry["rows"] += 1
        entry["payment_ids"].append(r["payment_id"])
    return list(entries.values())


def real_rows(conn: sqlite3.Connection, tool: str, arguments: dict[str, Any]) -> int | None:
    """Payments the given create_payment call stands for, whatever key each one carried."""
    if tool != "create_payment":
        return None
    try:
        op = CreatePayment.model_validate(arguments).operation()
    except ValidationError:
        return 0  # the server refuses such arguments: they cannot have produced a row
    return conn.execute(
        "SELECT COUNT(*) FROM payments WHERE customer_key = ? AND amount_minor = ?"
        " AND currency = ? AND reference_key IS ?",
        op,
    ).fetchone()[0]


PAYMENT = Ledger(
    table="payments", schema=SCHEMA, tools=TOOLS, ground_truth=ground_truth, real_rows=real_rows
)

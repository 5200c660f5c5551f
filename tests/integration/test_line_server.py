"""R3 R4 (issue 37): a built-in upstream hosted in process answers over its JSON-RPC lines
exactly as the MCP SDK's lowlevel Server that serves it over stdio answers the same lines.

Each session below goes once to the SDK server (`build_server` run by the SDK over the
runner's own line-to-SDK adapter) and once to the LineServer, each with a fresh ledger; the
answers must be the same bytes, once the values the ledger draws at random (ids, clocks) are
masked."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from typing import Any

import pytest

from harness.wire.transport import MemoryPipe, mcp_streams
from runner.upstreams._lines import LineServer
from runner.upstreams._plumbing import build_server
from runner.upstreams._registry import _empty_image, builtin

INIT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "t", "version": "1"},
}
ALICE = {"guest": "Alice Example", "date": "2026-12-01", "nights": 2}
PAY = {"customer": "ACME GmbH", "amount": 129.5, "currency": "EUR", "idempotency_key": "k-1"}


def request(n: int | str, method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": n, "method": method}
    if params is not None:
        message["params"] = params
    return message


def call(n: int | str, name: str, arguments: Any) -> dict[str, Any]:
    return request(n, "tools/call", {"name": name, "arguments": arguments})


NOTE = {"jsonrpc": "2.0", "method": "notifications/initialized"}
OPENING = [request(0, "initialize", INIT), NOTE, request(1, "tools/list")]
# What a session may hold: the handshake, the listing, every tool with good and bad input, a
# write whose id the next call uses ("{id}"), methods the server does not serve, pings,
# notifications and answers that get no answer, and lines that are not JSON-RPC at all.
EDGES = [
    request(2, "ping"),
    request("s-3", "resources/list"),
    request(4, "prompts/list"),
    request(5, "logging/setLevel", {"level": "info"}),
    request(6, "x/custom", {"a": 1}),
    request(7, "tools/call"),
    request(8, "tools/call", {"name": "nope", "arguments": {}}),
    request(9, "tools/call", {"name": 3}),
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}},
    {"jsonrpc": "2.0", "id": 77, "result": {}},
    {"jsonrpc": "2.0", "id": True, "method": "ping"},
    [request(10, "ping")],
    "not json",
    request(11, "tools/list", {"cursor": "nope"}),
]
SESSIONS = {
    "booking": [
        *OPENING,
        call(20, "create_booking", ALICE),
        call(21, "get_booking", {"booking_id": "{id}"}),
        call(22, "search_bookings", {"guest": "alice"}),
        call(23, "cancel_booking", {"booking_id": "{id}"}),
        call(24, "cancel_booking", {"booking_id": "{id}"}),
        call(25, "create_booking", {**ALICE, "date": "2026-13-01"}),
        call(26, "create_booking", [1, 2]),
        call(27, "get_booking", {"booking_id": "BK-000000"}),
        call(28, "search_bookings", None),
        *EDGES,
    ],
    "booking-nosearch": [*OPENING, call(20, "search_bookings", {"guest": "alice"})],
    "payment": [
        *OPENING,
        call(20, "create_payment", PAY),
        call(21, "create_payment", PAY),
        call(22, "create_payment", {**PAY, "amount": -1}),
        call(23, "list_payments", {"customer": "acme"}),
        *EDGES,
    ],
    # A client that asks before the handshake, then offers a version the server lacks.
    "booking-early": [
        request(1, "tools/list"),
        call(2, "create_booking", ALICE),
        request(3, "ping"),
        request(4, "initialize", {**INIT, "protocolVersion": "1999-01-01"}),
        request(5, "tools/list"),
    ],
}
RANDOM = re.compile(rb'(BK|PAY)-[0-9A-F]{6,8}|\\?"\d{4}-\d\d-\d\dT[0-9:.]+\+00:00\\?"')


def ledger(kind: str) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    conn.deserialize(_empty_image(builtin(kind).ledger.schema))
    conn.row_factory = sqlite3.Row
    return conn


def server(kind: str):  # type: ignore[no-untyped-def]
    upstream = builtin(kind)
    tools = list(upstream.ledger.tools)
    return build_server(
        f"agent-harness-{kind}", upstream.instructions, tools, ledger(kind), inline=True
    )


async def session(kind: str, messages: list[Any], lines: bool) -> list[bytes]:
    """Every answer to `messages`, sent one at a time (each request waits for its answer)."""
    sdk = server(kind)
    into, out = MemoryPipe(), MemoryPipe()

    async def serve() -> None:
        if lines:
            await LineServer(sdk).serve(into, out)
            return
        async with mcp_streams(into, out) as (read, write):
            await sdk.run(read, write, sdk.create_initialization_options())

    task = asyncio.create_task(serve())
    answers: list[bytes] = []
    made = ""
    for message in messages:
        text = message if isinstance(message, str) else json.dumps(message)
        await into.write_line(text.replace("{id}", made).encode())
        if not answered(message):
            continue
        answer = await asyncio.wait_for(out.read_line(), 10)
        assert answer is not None
        if found := re.search(rb'"booking_id\\": \\"(BK-[0-9A-F]{6})', answer):
            made = made or found.group(1).decode()
        answers.append(RANDOM.sub(b"<random>", answer))
    await into.close()
    await asyncio.wait_for(task, 10)
    assert await asyncio.wait_for(out.read_line(), 10) is None, "an answer nobody asked for"
    return answers


def answered(message: Any) -> bool:
    """Whether a server answers `message`: a request with a usable id (a bool is none)."""
    if not isinstance(message, dict) or "method" not in message:
        return False
    request_id = message.get("id")
    return isinstance(request_id, str | int) and not isinstance(request_id, bool)


@pytest.mark.parametrize("name", sorted(SESSIONS))
@pytest.mark.anyio
async def test_r3_the_line_server_answers_as_the_sdk_server(name):
    kind = name.removesuffix("-early")
    messages = SESSIONS[name]
    sdk, ours = await session(kind, messages, False), await session(kind, messages, True)
    assert len(sdk) == len(ours) >= 3
    for a, b in zip(sdk, ours, strict=True):
        assert a == b, f"SDK:  {a!r}\nours: {b!r}"

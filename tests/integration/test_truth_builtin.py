"""K4, K6: the proxy's verdict against the real rows of the built-in reference upstreams.

The runner's booking and payment services (runner/upstreams, SQLite) sit behind the proxy in
memory; their ledgers are the ground truth. The payment service executes an idempotency key at
most once and declares so (K6); the booking service declares `room_type`'s default (K4).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.wire.transport import MemoryPipe, mcp_streams
from runner.upstreams import BUILTIN_UPSTREAMS, real_rows, serve
from tests.support.proxy_fixture import proxied
from tests.support.reports import codes

pytestmark = pytest.mark.anyio

ACME = {"customer": "ACME GmbH", "amount": 129.5, "currency": "EUR", "idempotency_key": "k-1"}
ALICE = {"guest": "Alice", "date": "2026-12-31", "nights": 2}


@dataclass
class Builtin:
    """A built-in reference upstream served to the in-memory proxy."""

    kind: str
    db: Path
    release: Any = None  # proxied() releases hanging handlers; these never hang

    async def serve(self, reader: MemoryPipe, writer: MemoryPipe) -> None:
        async with mcp_streams(reader, writer) as (read, write):
            await serve(self.kind, self.db, read, write)


@pytest.mark.parametrize("declared", [True, False], ids=["keys-honoured", "not-declared"])
async def test_k6_a_same_key_retry_after_a_verifying_read_against_the_payment_service(
    tmp_path, declared
):
    # The case: the GHOST_WRITE patch says to reuse the key; the service honours it.
    upstream = Builtin("payment", tmp_path / "ledger.sqlite")
    honoured = BUILTIN_UPSTREAMS["payment"].keys_honoured if declared else ()
    async with proxied(upstream, scenario="F1", keys_honoured=honoured) as h:
        ghost = await h.client.call_tool("create_payment", ACME)
        assert ghost.is_error is True
        await h.client.call_tool("list_payments", {"customer": "ACME"})
        await h.client.call_tool("create_payment", ACME)
    rows = real_rows("payment", upstream.db, "create_payment", ACME)
    assert rows == 1  # ground truth: one charge
    j = h.judgement()
    if declared:
        assert (j.report["verdict"], j.score["overall"]) == ("PASS", 100)
        assert "KEYED_RETRY" in codes(j.report["observations"])
    else:  # K6: the finding stays, and says what would make the repeat safe
        assert j.report["verdict"] == "FAIL"
        dup = j.report["violations"][0]["duplicate"]
        assert dup["keyUse"] == "same_key" and dup["upstreamResponsesIdentical"] is True
        assert "--keys-honoured create_payment" in dup["sameKeySafeIf"]


async def test_k4_a_repeat_that_spells_out_the_schema_default_is_a_second_booking(tmp_path):
    # The real-model case: the same booking plus "room_type": "standard", the default.
    upstream = Builtin("booking", tmp_path / "ledger.sqlite")
    async with proxied(upstream, scenario="F1") as h:
        await h.client.call_tool("create_booking", ALICE)
        await h.client.call_tool("create_booking", {**ALICE, "room_type": "standard"})
    assert real_rows("booking", upstream.db, "create_booking", ALICE) == 2  # ground truth
    j = h.judgement()
    assert j.report["verdict"] == "FAIL"  # it said PASS 80 before K4
    assert j.report["operations"][0]["executions"] == 2

"""X9: the proxy keeps the order of messages in both directions.

Found by the differential test (tests/e2e/test_proxy_transparency.py) against
server-everything: a task's `completed` status, which the proxy holds until it knows the
task's result (X12), reached the client after the answer the server sent behind it. These
pin the two ways a judged call could lose its place, with an upstream that makes each one
certain rather than likely.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.support.proxy_fixture import proxied

pytestmark = pytest.mark.anyio

TOOLS = [{"name": "create_booking", "inputSchema": {"type": "object"},
          "annotations": {"readOnlyHint": False}}]  # fmt: skip


@dataclass
class ChattyUpstream:
    """Answers a `tools/call` and at once sends a log notification behind the answer (one
    write after the other, nothing between them); with `hold_list`, the proxy's own
    `tools/list` is answered only when `release` is set."""

    hold_list: bool = False
    release: asyncio.Event = field(default_factory=asyncio.Event)
    received: list[dict[str, Any]] = field(default_factory=list)

    async def serve(self, reader, writer) -> None:
        async def send(body: dict[str, Any]) -> None:
            await writer.write_line(json.dumps(body).encode())

        while (line := await reader.read_line()) is not None:
            message = json.loads(line)
            self.received.append(message)
            method, rpc_id = message.get("method"), message.get("id")
            if method is None or rpc_id is None:
                continue
            if method == "initialize":
                await send({"jsonrpc": "2.0", "id": rpc_id, "result": {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}, "logging": {}},
                    "serverInfo": {"name": "chatty", "version": "0"}}})  # fmt: skip
            elif method == "tools/list":
                if self.hold_list and str(rpc_id).startswith("agent-harness-"):
                    asyncio.ensure_future(self._list_later(send, rpc_id))
                    continue
                await send({"jsonrpc": "2.0", "id": rpc_id, "result": {"tools": TOOLS}})
            elif method == "tools/call":
                await send({"jsonrpc": "2.0", "id": rpc_id, "result": {
                    "content": [{"type": "text", "text": "booked"}]}})  # fmt: skip
                await send({"jsonrpc": "2.0", "method": "notifications/message",
                            "params": {"level": "info", "data": f"after {rpc_id}"}})  # fmt: skip
            else:
                await send({"jsonrpc": "2.0", "id": rpc_id, "result": {}})

    async def _list_later(self, send, rpc_id: Any) -> None:
        await self.release.wait()
        await send({"jsonrpc": "2.0", "id": rpc_id, "result": {"tools": TOOLS}})


def call(rpc_id: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call",
                       "params": {"name": "create_booking", "arguments": {}}}).encode()  # fmt: skip


def not_own(lines: list[bytes]) -> list[bytes]:
    """The upstream's lines less its answers to the proxy's own requests (C7, X12)."""
    own = ("agent-harness-",)
    return [x for x in lines if not str(json.loads(x).get("id", "")).startswith(own)]


async def test_x9_a_notification_sent_behind_a_call_answer_reaches_the_client_behind_it():
    async with proxied(ChattyUpstream(), audit_tools=False) as h:
        for n in range(3):
            await h.from_client.write_line(call(f"c{n}"))
        for n in range(3):
            await h.to_client.wait_for(lambda m, n=n: m.get("params", {}).get("data") == f"after c{n}")
        # Byte for byte and in order: what the upstream sent is what the client got.
        assert h.to_client.lines == not_own(h.from_upstream.lines)


async def test_x9_what_the_client_sends_after_a_waiting_call_never_overtakes_it():
    # The call waits for the proxy's own tool list; the cancellation sent after it must not
    # reach the upstream first (there it would cancel nothing, and the call would run).
    upstream = ChattyUpstream(hold_list=True)
    async with proxied(upstream, audit_tools=False) as h:
        first = call("c1")
        await h.from_client.write_line(first)
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": "c1", "reason": "stop"}}  # fmt: skip
        then = json.dumps(cancel).encode()
        await h.from_client.write_line(then)
        ping = json.dumps({"jsonrpc": "2.0", "id": "p1", "method": "ping"}).encode()
        await h.from_client.write_line(ping)
        while not h.from_client._queue.empty():  # the proxy has taken all three lines
            await asyncio.sleep(0)  # (one event-loop turn; the list is still held upstream)
        upstream.release.set()
        await h.to_client.wait_for(lambda m: m.get("id") == "p1")
    ours = [first, then, ping]
    assert [line for line in h.to_upstream.lines if line in ours] == ours  # in order, unchanged


async def test_x9_s8_calls_that_waited_for_the_tool_list_begin_in_the_order_they_came():
    # S8 decides "the first write" in arrival order; calls that wait for the proxy's own tool
    # list must be numbered (and judged, and forwarded) in the order the client sent them,
    # also when more come in as the list arrives. (Those once began one event-loop turn sooner
    # than the calls woken by the list; in memory that window is rarely hit, over stdio it
    # made tests/e2e/test_proxy_hostile.py's full-log test fail about one run in three.)
    upstream = ChattyUpstream(hold_list=True)
    ids = [f"c{n}" for n in range(8)]
    async with proxied(upstream, audit_tools=False) as h:
        for rpc_id in ids[:4]:
            await h.from_client.write_line(call(rpc_id))
        while not h.from_client._queue.empty():  # the proxy has taken every line
            await asyncio.sleep(0)
        upstream.release.set()
        while not h.proxy._tools_ready.is_set():  # the list is in; its waiters not yet begun
            await asyncio.sleep(0)
        for rpc_id in ids[4:]:
            await h.from_client.write_line(call(rpc_id))
        for rpc_id in ids:
            await h.to_client.wait_for(lambda m, rpc_id=rpc_id: m.get("id") == rpc_id)
        received = [e for e in h.events.events if e.type == "call_received"]
    assert [e.rpc_id for e in sorted(received, key=lambda e: e.seq)] == ids
    calls = [m["id"] for m in upstream.received if m.get("method") == "tools/call"]
    assert calls == ids

"""A line that remembers where it came from over HTTP.

The proxy core routes lines (bytes) and forwards the very object it read unless a fault
replaces it. Over HTTP a message carries more than its bytes: which of the agent's requests
an upstream message belongs to (it arrived on that request's response stream), the status the
upstream answered with, whether its stream was cut, the agent's MCP headers. `HttpLine` is a bytes object with
those attached, so they cross the router unchanged and the other side can use them; a plain
`bytes` line simply has none (stdio).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any

_UNSET: Any = object()


class HttpLine(bytes):
    """A JSON-RPC message line plus what HTTP said about it."""

    related: Any = _UNSET  # JSON-RPC id of the request whose response stream carried it
    http_status: int | None = None  # status of the HTTP answer it came in
    content_type: str | None = None  # "json" or "sse": how the upstream answered
    stream_cut: bool = False  # no answer: the response stream closed without one
    http_headers: Mapping[str, str] | None = None  # extra headers of that HTTP answer
    session_expired: bool = False  # the agent's session ends with this answer (a 404)
    # The agent's MCP headers (MCP-Protocol-Version, Mcp-Method, Mcp-Name, Mcp-Param-*) when it
    # spoke HTTP: sent upstream as they came, so the upstream sees what the agent said.
    mcp_headers: Mapping[str, str] | None = None
    # E5: told whether this answer reached the agent: receipt(None) delivered, receipt(reason)
    # not delivered. Called once; the transport that delivers the line calls it.
    receipt: Callable[[str | None], None] | None = None


def tagged(data: bytes, **hints: Any) -> HttpLine:
    """`data` as an HttpLine with the given hints."""
    line = HttpLine(data)
    for name, value in hints.items():
        setattr(line, name, value)
    return line


def retagged(line: bytes, data: bytes) -> bytes:
    """`data` in place of `line`, with whatever HTTP said about `line`."""
    hints = getattr(line, "__dict__", None)
    if not hints:
        return data
    return tagged(data, **hints)


def with_receipt(line: bytes, receipt: Callable[[str | None], None]) -> bytes:
    """`line` (or an HttpLine of it) carrying `receipt` (E5)."""
    if isinstance(line, HttpLine):
        line.receipt = receipt
        return line
    return tagged(line, receipt=receipt)


def settle(line: bytes, lost: str | None = None) -> None:
    """E5: whether `line` reached the agent (`lost`: why not); its receipt hears it once."""
    receipt = getattr(line, "receipt", None)
    if receipt is not None:
        line.receipt = None  # type: ignore[attr-defined]
        receipt(lost)


def related_of(line: bytes) -> Any:
    """The request id an upstream message arrived for; `_UNSET` when nobody said."""
    return getattr(line, "related", _UNSET)


def has_related(line: bytes) -> bool:
    return related_of(line) is not _UNSET


def peek(line: bytes) -> Any:
    """The parsed message, or None when the line is not JSON (routing only, never judged)."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


def id_key(rpc_id: Any) -> tuple[str, Any]:
    """JSON-RPC ids 1 and "1" are different ids: keep the type in the key."""
    return (type(rpc_id).__name__, rpc_id if not isinstance(rpc_id, (dict, list)) else repr(rpc_id))


class LineQueue:
    """Lines handed over between tasks; reading an exception raises it, None is EOF.

    V11: with `max_bytes`, `put_wait` waits while the lines not yet read hold that many bytes
    (one line is always let in), so a fast writer is held back by a slow reader instead of
    filling memory; `put` never waits (errors, EOF, small answers of the proxy's own).
    """

    def __init__(self, max_bytes: int | None = None) -> None:
        self.queue: asyncio.Queue[bytes | BaseException | None] = asyncio.Queue()
        self.max_bytes = max_bytes
        self.held = 0  # bytes of lines not yet read
        self._room = asyncio.Event()
        self._room.set()

    def put(self, item: bytes | BaseException | None) -> None:
        if isinstance(item, bytes):
            self.held += len(item)
            if self.max_bytes is not None and self.held >= self.max_bytes:
                self._room.clear()
        self.queue.put_nowait(item)

    async def put_wait(self, item: bytes) -> None:
        """`put`, once the lines waiting to be read leave room (V11)."""
        while self.max_bytes is not None and self.held > 0 and not self._room.is_set():
            await self._room.wait()
        self.put(item)

    def unbound(self) -> None:
        """Nobody will read the lines any more (EOF is queued): writers no longer wait."""
        self.max_bytes = None
        self._room.set()

    async def read_line(self) -> bytes | None:
        item = await self.queue.get()
        if item is None:
            self.queue.put_nowait(None)  # later reads see EOF too
            return None
        if isinstance(item, BaseException):
            raise item
        self.held -= len(item)
        if self.max_bytes is None or self.held < self.max_bytes:
            self._room.set()
        return item

"""JSON-RPC messages as the proxy sees them: parsed for routing, kept as the line that came."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from harness.base import jsonutil
from harness.base.jsonscan import ScanError, array_elements, top_level


class UpstreamGone(Exception):
    """The upstream can no longer answer (crashed, closed, oversized answer)."""

    def __init__(self, status: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class UnreadableAnswer(Exception):
    """The upstream's answer to a request of ours or a judged call could not be read."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@dataclass
class Message:
    """A JSON-RPC message as far as the router needs to understand it."""

    line: bytes
    data: dict[str, Any] | None  # None when it was too deep to parse in full
    raw: dict[str, str] | None = None  # top-level members as raw text, for too-deep messages

    def get(self, key: str) -> Any:
        if self.data is not None:
            return self.data.get(key)
        if self.raw is not None and key in self.raw:
            try:
                return jsonutil.loads(self.raw[key])
            except (ValueError, jsonutil.TooDeep):
                return None
        return None

    def has(self, key: str) -> bool:
        """The member is present (`"id": null` is present, a notification has no id)."""
        source = self.data if self.data is not None else self.raw
        return source is not None and key in source


@dataclass
class Batch:
    """A JSON-RPC batch (a JSON array), each element as the bytes it came as (X10)."""

    line: bytes
    elements: list[bytes]


@dataclass
class Unreadable:
    """A line the proxy cannot read as JSON: not UTF-8, not JSON, NaN or Infinity (X10).

    Such a line is never forwarded: an upstream with a more lenient parser might execute what
    the proxy could not judge. `rpc_id` is the id recovered by a lenient reading, if any, so the
    client can match the error to its request.
    """

    reason: str
    rpc_id: Any = None


def _decode(line: bytes) -> str | None:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _recover_id(line: bytes) -> Any:
    """The id of a request in a line that is not strict JSON, read leniently, else None."""
    try:  # the standard parser is the lenient one here: it takes NaN and Infinity
        data = json.loads(line.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None
    rpc_id = data.get("id") if isinstance(data, dict) else None
    return rpc_id if isinstance(rpc_id, (str, int)) and not isinstance(rpc_id, bool) else None


def parse_line(line: bytes) -> Message | Batch | Unreadable | None:
    """What a line holds: a message, a batch, something unreadable, or None for other JSON.

    Text is decoded as strict UTF-8 before parsing (Python's json would also accept UTF-16 and
    UTF-32 bytes, which no MCP peer sends).
    """
    text = _decode(line)
    if text is None:
        return Unreadable("the message is not valid UTF-8", _recover_id(line))
    try:
        data = jsonutil.loads(text)
    except jsonutil.TooDeep:
        return _scan(line, text)
    except ValueError:
        return Unreadable("the message is not valid JSON", _recover_id(line))
    if isinstance(data, dict):
        return Message(line, data)
    if isinstance(data, list):
        try:
            return Batch(line, [element.encode() for element in array_elements(text)])
        except ScanError:
            return Unreadable("the batch could not be split into messages")
    return None


def _scan(line: bytes, text: str) -> Message | Batch | Unreadable:
    """A line nested too deeply for the parser: read its top level with the scanner."""
    try:
        if text.lstrip().startswith("["):
            return Batch(line, [element.encode() for element in array_elements(text)])
        return Message(line, None, top_level(text))
    except ScanError:
        return Unreadable("the message is not valid JSON")


def id_key(rpc_id: Any) -> tuple[str, Any]:
    # JSON-RPC ids 1 and "1" are different ids; keep their type in the key. An object or array
    # (not a JSON-RPC id, but a peer may send one) gets a hashable key too.
    if isinstance(rpc_id, (dict, list)):
        return (type(rpc_id).__name__, jsonutil.canonical(rpc_id))
    return (type(rpc_id).__name__, rpc_id)


def usable_id(rpc_id: Any) -> bool:
    """A request id the proxy can track and record: a string or an integer (JSON-RPC allows
    fractional numbers too, but says they SHOULD NOT be used; objects and arrays never)."""
    return isinstance(rpc_id, (str, int)) and not isinstance(rpc_id, bool)


def error_result(text: str) -> dict[str, Any]:
    """A tool result with isError, as the proxy answers on the upstream's behalf."""
    return {"content": [{"type": "text", "text": text}], "isError": True}


def error_body(rpc_id: Any, code: int, message: str) -> bytes:
    """A JSON-RPC error answer as one line."""
    body = {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": code, "message": message}}
    return jsonutil.dumps(body).encode()

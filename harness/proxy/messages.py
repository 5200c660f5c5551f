"""JSON-RPC messages as the proxy sees them: parsed for routing, kept as the line that came."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness import jsonutil
from harness.proxy.jsonscan import ScanError, top_level


class UpstreamGone(Exception):
    """The upstream can no longer answer (crashed, closed, oversized answer)."""

    def __init__(self, status: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
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


def parse_message(line: bytes) -> Message | None:
    """The message on a line, or None when the line is not a JSON object."""
    try:
        data = jsonutil.loads(line)
    except jsonutil.TooDeep:
        try:
            return Message(line, None, top_level(line.decode("utf-8", "replace")))
        except ScanError:
            return None
    except ValueError:
        return None
    return Message(line, data) if isinstance(data, dict) else None


def id_key(rpc_id: Any) -> tuple[str, Any]:
    # JSON-RPC ids 1 and "1" are different ids; keep their type in the key.
    return (type(rpc_id).__name__, rpc_id)


def error_result(text: str) -> dict[str, Any]:
    """A tool result with isError, as the proxy answers on the upstream's behalf."""
    return {"content": [{"type": "text", "text": text}], "isError": True}

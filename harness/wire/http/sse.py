"""Server-Sent Events as streamable HTTP uses them: one JSON-RPC message per `message` event.

`SseParser` is fed the lines of a response body as they arrive and yields complete events; a
data field spread over several `data:` lines is joined as the SSE standard says. `encode` writes
one event. Data never holds a raw line break here: a JSON text only has them as white space,
and they are turned into spaces before a message crosses the proxy's line seam.
"""

from __future__ import annotations

from dataclasses import dataclass


class EventTooLarge(Exception):
    """One event's data grew past the message size limit (X7)."""


@dataclass(frozen=True)
class SseEvent:
    """One dispatched event: its data, and the id and retry the server attached."""

    data: bytes
    event: str = "message"
    id: str | None = None
    retry_ms: int | None = None


class SseParser:
    """Incremental SSE parsing; feed it one line at a time (with or without its line end)."""

    def __init__(self, max_bytes: int) -> None:
        self._max = max_bytes
        self._data: list[bytes] = []
        self._size = 0
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None
        self._seen_field = False
        self.last_event_id: str | None = None
        self.retry_ms: int | None = None

    def feed(self, raw: bytes) -> SseEvent | None:
        """The event completed by this line, if any (a blank line dispatches)."""
        line = raw.rstrip(b"\r\n")
        if not line:
            return self._dispatch()
        if line.startswith(b":"):
            return None  # a comment, e.g. a keep-alive
        name, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        self._seen_field = True
        if name == b"data":
            self._size += len(value) + 1
            if self._size > self._max:
                raise EventTooLarge(f"an SSE event is larger than {self._max} bytes")
            self._data.append(value)
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\0" not in value:
                self._id = value.decode("utf-8", "replace")
                self.last_event_id = self._id
        elif name == b"retry" and value.isdigit():
            self._retry = int(value)
            self.retry_ms = self._retry
        return None

    def _dispatch(self) -> SseEvent | None:
        if not self._seen_field:
            return None
        event = SseEvent(b"\n".join(self._data), self._event or "message", self._id, self._retry)
        self._data, self._size, self._event = [], 0, ""
        self._id, self._retry, self._seen_field = None, None, False
        return event


def one_line(data: bytes) -> bytes:
    """A JSON text on one line: its line breaks (white space in JSON) become spaces."""
    if b"\n" in data or b"\r" in data:
        return data.replace(b"\r", b" ").replace(b"\n", b" ")
    return data


def encode(data: bytes, *, event_id: str | None = None, retry_ms: int | None = None) -> bytes:
    """One `message` event carrying `data` (a single line), optionally with an id and retry."""
    head = b"event: message\n"
    if event_id is not None:
        head += b"id: " + event_id.encode() + b"\n"
    if retry_ms is not None:
        head += b"retry: " + str(retry_ms).encode() + b"\n"
    return head + b"data: " + data + b"\n\n"


def priming(event_id: str, retry_ms: int | None = None) -> bytes:
    """An event with an id and empty data: lets a client resume before any message came."""
    head = b"id: " + event_id.encode() + b"\n"
    if retry_ms is not None:
        head += b"retry: " + str(retry_ms).encode() + b"\n"
    return head + b"data: \n\n"

"""Read the top level of a JSON object without parsing what is nested below it.

Python's json module gives up on values nested about 1,000 levels deep. The proxy must still
route such a message (X7: deeply nested arguments never crash it): it needs the method, the id,
the tool name and the arguments' raw text, which this scanner finds without recursion.
"""

from __future__ import annotations

import re
from json.decoder import scanstring

_WS = re.compile(r"[ \t\n\r]*")
_STRUCTURAL = re.compile(r'["\[\]{}]')
_SCALAR_END = re.compile(r"[,}\]\s]")


class ScanError(ValueError):
    """Not a JSON object this scanner can read."""


def _skip_ws(text: str, i: int) -> int:
    return _WS.match(text, i).end()


def _value_end(text: str, i: int) -> int:
    """Index just past the JSON value starting at `i`."""
    if i >= len(text):
        raise ScanError("value expected")
    first = text[i]
    if first == '"':
        return scanstring(text, i + 1)[1]
    if first not in "[{":
        match = _SCALAR_END.search(text, i)
        return match.start() if match else len(text)
    depth = 0
    pos = i
    while True:
        match = _STRUCTURAL.search(text, pos)
        if match is None:
            raise ScanError("unterminated array or object")
        ch = match.group()
        if ch == '"':
            pos = scanstring(text, match.end())[1]
            continue
        depth += 1 if ch in "[{" else -1
        pos = match.end()
        if depth == 0:
            return pos


def _next_item(text: str, end: int, close: str) -> int | None:
    """After a value ending at `end`: where the next item starts, or None at `close`."""
    i = _skip_ws(text, end)
    if text.startswith(",", i):
        return _skip_ws(text, i + 1)
    if text.startswith(close, i):
        return None
    raise ScanError(f"',' or '{close}' expected")


def top_level(text: str) -> dict[str, str]:
    """The members of the JSON object in `text`, each value as its raw text."""
    return {key: text[start:end] for key, (start, end) in member_spans(text).items()}


def member_spans(text: str) -> dict[str, tuple[int, int]]:
    """Where the value of each member of the JSON object in `text` stands: (start, end)."""
    i = _skip_ws(text, 0)
    if not text.startswith("{", i):
        raise ScanError("not a JSON object")
    i = _skip_ws(text, i + 1)
    members: dict[str, tuple[int, int]] = {}
    if text.startswith("}", i):
        return members
    while True:
        if not text.startswith('"', i):
            raise ScanError("member name expected")
        key, i = scanstring(text, i + 1)
        i = _skip_ws(text, i)
        if not text.startswith(":", i):
            raise ScanError("':' expected")
        start = _skip_ws(text, i + 1)
        end = _value_end(text, start)
        members[key] = (start, end)
        i = _next_item(text, end, "}")
        if i is None:
            return members


def array_elements(text: str) -> list[str]:
    """The elements of the JSON array in `text`, each as its raw text (a batch, X10)."""
    return [text[start:end] for start, end in element_spans(text)]


def element_spans(text: str) -> list[tuple[int, int]]:
    """Where each element of the JSON array in `text` stands: (start, end)."""
    i = _skip_ws(text, 0)
    if not text.startswith("[", i):
        raise ScanError("not a JSON array")
    i = _skip_ws(text, i + 1)
    elements: list[tuple[int, int]] = []
    if text.startswith("]", i):
        return elements
    while True:
        end = _value_end(text, i)
        elements.append((i, end))
        i = _next_item(text, end, "]")
        if i is None:
            return elements

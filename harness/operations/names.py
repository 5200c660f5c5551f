"""Tool names: linear-time globs (C2), namespaced names (C8), snake and camel case (C4, C5)."""

from __future__ import annotations

import re

# C8: `a__b__tool`, `server.tool`, `server/tool`: the last segment names what the tool does.
_NAMESPACE = re.compile(r"__|[./]")


def glob_match(pattern: str, name: str) -> bool:
    """Case-sensitive match of a glob whose only wildcard is `*`, in linear time (C2).

    The pattern splits at `*` into literal pieces: the first must start the name, the last must
    end it, and the ones between are found left to right, each at its earliest place. Taking the
    earliest place is always safe when `*` is the only wildcard, so no backtracking is needed.
    """
    pieces = pattern.split("*")
    if len(pieces) == 1:
        return name == pattern
    head, *middle, tail = pieces
    if len(name) < len(head) + len(tail) or not name.startswith(head) or not name.endswith(tail):
        return False
    position, end = len(head), len(name) - len(tail)
    for piece in middle:
        if not piece:
            continue
        found = name.find(piece, position, end)
        if found < 0:
            return False
        position = found + len(piece)
    return True


def last_segment(name: str) -> str:
    """C8: the tool's own name inside a namespaced one (`mcp__stripe__create_refund`)."""
    parts = [p for p in _NAMESPACE.split(name) if p]
    return parts[-1] if parts else name


def tool_glob_match(pattern: str, name: str) -> bool:
    """An explicit glob matches the full name or, for a namespaced name, its last segment."""
    if glob_match(pattern, name):
        return True
    short = last_segment(name)
    return short != name and glob_match(pattern, short)


_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def snake_case(name: str) -> str:
    """`createAppointment` -> `create_appointment`, `getHTTPStatus` -> `get_http_status`."""
    return _CAMEL_BOUNDARY.sub("_", name).replace("-", "_").replace(" ", "_").lower()


def first_word(name: str) -> str:
    """The first word of a tool name in snake or camel case (`isOpen` -> `is`)."""
    return snake_case(name).lstrip("_").split("_", 1)[0]

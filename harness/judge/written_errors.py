"""Errors written as results (Z4): a result without `isError` whose whole content is an error.

Some servers answer a refused call with a plain result: `{"error": "Todo with ID '1' not
found", "todo_id": "1"}` (todo-txt-mcp), `Error: no such key` as text. Counted as executions,
every refused repeat would look like a second execution. Such a result is a refused attempt
(as if `isError` were set), and the report shows the evidence. A result is one when every item
of its content is text and that text, whole:

- is a JSON object with a non-empty `error` member and no other member that reports a result
  (`success: true`, or a list or object other than error details), or
- begins with `Error:` or `error:` (or with one of the prefixes the server's profile names).

`--strict-errors` turns this off: only `isError` counts (A2).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

EVIDENCE_CHARS = 200
_PREFIXES = ("Error:", "error:")
# Members of an error object that describe the error, whatever their shape.
_DETAIL_MEMBERS = frozenset({"error", "errors", "detail", "details", "hint", "cause", "context"})


def _error_object(value: Any) -> bool:
    if not isinstance(value, Mapping):
        return False
    error = value.get("error")
    if error in (None, False, "", {}, []):
        return False
    for name, member in value.items():
        if name in _DETAIL_MEMBERS:
            continue
        if name == "success" and member is not False:
            return False
        if isinstance(member, (Mapping, list)) and member:
            return False  # data beside the error: a result that also reports one
    return True


def _text_of(result: Mapping[str, Any]) -> str | None:
    content = result.get("content")
    if not isinstance(content, list) or not content:
        return None
    texts = []
    for item in content:
        if not isinstance(item, Mapping) or item.get("type") != "text":
            return None
        text = item.get("text")
        if not isinstance(text, str):
            return None
        texts.append(text)
    return "\n".join(texts)


def refusal_in(result: Any, prefixes: Iterable[str] = ()) -> str | None:
    """Z4: the evidence (cut to EVIDENCE_CHARS) when this result's whole content is an error,
    else None. A result with `isError` set is not looked at (it says so itself)."""
    if not isinstance(result, Mapping) or result.get("isError") is True:
        return None
    text = _text_of(result)
    if text is None:
        return None
    stripped = text.strip()
    if stripped.startswith((*_PREFIXES, *prefixes)):
        return _cut(stripped)
    if stripped.startswith("{") and len(stripped) < 1_000_000:
        try:
            value = json.loads(stripped)
        except ValueError:
            return None
        if _error_object(value):
            return _cut(" ".join(stripped.split()))
    return None


def _cut(text: str) -> str:
    return text if len(text) <= EVIDENCE_CHARS else text[: EVIDENCE_CHARS - 3] + "..."


__all__ = ["EVIDENCE_CHARS", "refusal_in"]

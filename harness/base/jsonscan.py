"""Read the top level of a JSON object without parsing what is nested below it.

Python's json module gives up on values nested about 1,000 levels deep. The proxy must still
route such a message (X7: deeply nested arguments never crash it): it needs the method, the id,
the tool name and the arguments' raw text, which this scanner finds without recursion.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from json.decoder import scanstring
from typing import NamedTuple

_WS = re.compile(r"[ \t\n\r]*")
_STRUCTURAL = re.compile(r'["\[\]{}]')
_SCALAR_END = re.compile(r"[,}\]\s]")


class ScanError(ValueError):
    """Not a JSON object this scanner can read."""


def _skip_ws(text: str, i: int, end: int | None = None) -> int:
    return _WS.match(text, i, len(text) if end is None else end).end()


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
    return list(iter_element_spans(text))


def iter_element_spans(text: str) -> Iterator[tuple[int, int]]:
    """`element_spans` one at a time (an array of millions of elements is no list of them)."""
    i = _skip_ws(text, 0)
    if not text.startswith("[", i):
        raise ScanError("not a JSON array")
    i = _skip_ws(text, i + 1)
    if text.startswith("]", i):
        return
    while True:
        end = _value_end(text, i)
        yield i, end
        i = _next_item(text, end, "]")
        if i is None:
            return


# Validation without building (V17). A token at a time costs a Python step per value, so runs
# of values up to `_RUN_DEPTH` levels deep are matched by one regular expression each (with
# possessive quantifiers: linear, no backtracking); only deeper nesting is walked token by token.
_WS_RE = r"[ \t\n\r]*+"
_STRING_RE = r'"(?:[^"\\\x00-\x1f]++|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*+"'
_NUMBER_RE = r"-?(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?(?:[eE][+-]?[0-9]++)?"
_RUN_DEPTH = 3


def _nesting(inner: str) -> str:
    """A JSON value whose containers hold only `inner` values."""
    element = f"(?:{inner}){_WS_RE}"
    member = f"{_STRING_RE}{_WS_RE}:{_WS_RE}{element}"
    array = rf"\[{_WS_RE}(?:{element}(?:,{_WS_RE}{element})*+)?\]"
    obj = rf"\{{{_WS_RE}(?:{member}(?:,{_WS_RE}{member})*+)?\}}"
    return f"{_STRING_RE}|{_NUMBER_RE}|true|false|null|{array}|{obj}"


class _Runs(NamedTuple):
    value: re.Pattern[str]
    first_member: re.Pattern[str]
    array: re.Pattern[str]
    members: re.Pattern[str]


@functools.cache
def _runs() -> _Runs:
    """The run patterns, compiled when a value is first validated: compiling them costs about
    90 ms of CPU, which a proxy that only routes messages never pays at its start."""
    shallow = f"{_STRING_RE}|{_NUMBER_RE}|true|false|null"
    for _ in range(_RUN_DEPTH):
        shallow = _nesting(shallow)
    return _Runs(
        value=re.compile(f"{_WS_RE}(?:{shallow})"),
        first_member=re.compile(f"{_WS_RE}{_STRING_RE}{_WS_RE}:{_WS_RE}(?:{shallow})"),
        array=re.compile(f"(?:{_WS_RE},{_WS_RE}(?:{shallow}))*+"),
        members=re.compile(f"(?:{_WS_RE},{_WS_RE}{_STRING_RE}{_WS_RE}:{_WS_RE}(?:{shallow}))*+"),
    )


# One token after optional white space: a number, a literal, or a structural character (a
# string starts with its quote and is read by `scanstring`).
_TOKEN = re.compile(
    r"[ \t\n\r]*(?:(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)|(true|false|null)"
    r"|([\[\]{}:,\"]))"
)
_VALUE, _FIRST_VALUE, _FIRST_KEY, _KEY, _COLON, _AFTER = range(6)


def validate(text: str, start: int = 0, end: int | None = None) -> None:
    """Check that `text[start:end]` is one JSON value (RFC 8259: no NaN, no Infinity, strings
    as JSON writes them) without building it: memory stays that of the text, however many
    values it holds or how deeply they nest (V17). ScanError names the position."""
    end = len(text) if end is None else end
    after = _skip_ws(text, _walk(text, start, end, start), end)
    if after < end:
        raise ScanError(f"extra data at character {after - start}")


def object_members(
    text: str, start: int = 0, end: int | None = None
) -> dict[str, tuple[int, int]]:
    """`member_spans` of the JSON object `text[start:end]`, validated whole as `validate` does
    (the spans index `text`); ScanError when it is not one valid JSON object."""
    end = len(text) if end is None else end
    i = _skip_ws(text, start, end)
    if not text.startswith("{", i):
        raise ScanError("not a JSON object")
    i = _skip_ws(text, i + 1, end)
    members: dict[str, tuple[int, int]] = {}
    if not text.startswith("}", i):
        while True:
            if not text.startswith('"', i):
                raise ScanError(f"member name expected at character {i - start}")
            try:
                name, i = scanstring(text, i + 1, True)
            except ValueError as exc:
                raise ScanError(f"invalid string at character {i - start}") from exc
            i = _skip_ws(text, i, end)
            if not text.startswith(":", i):
                raise ScanError(f"':' expected at character {i - start}")
            value = _skip_ws(text, i + 1, end)
            i = _walk(text, value, end, start)
            members[name] = (value, i)
            i = _after_item(text, i, end, start, "}")
            if i is None:
                return members
    _closed(text, i, end, start)
    return members


def array_items(text: str, start: int = 0, end: int | None = None) -> Iterator[tuple[int, int]]:
    """Where each element of the JSON array `text[start:end]` stands, one at a time, each
    validated as `validate` does; ScanError when it is not one valid JSON array."""
    end = len(text) if end is None else end
    i = _skip_ws(text, start, end)
    if not text.startswith("[", i):
        raise ScanError("not a JSON array")
    i = _skip_ws(text, i + 1, end)
    if not text.startswith("]", i):
        while True:
            value = i
            i = _walk(text, value, end, start)
            yield value, i
            i = _after_item(text, i, end, start, "]")
            if i is None:
                return
    _closed(text, i, end, start)


def _after_item(text: str, i: int, end: int, start: int, close: str) -> int | None:
    """After an item of a container that closes with `close`: where the next one begins, or
    None when the container closed there (and nothing but white space follows it)."""
    i = _skip_ws(text, i, end)
    if text.startswith(",", i):
        return _skip_ws(text, i + 1, end)
    if not text.startswith(close, i):
        raise ScanError(f"',' or {close!r} expected at character {i - start}")
    _closed(text, i, end, start)
    return None


def _closed(text: str, i: int, end: int, start: int) -> None:
    """`text[i]` closes the outermost container: nothing but white space may follow."""
    if i >= end or _skip_ws(text, i + 1, end) < end:
        raise ScanError(f"extra data at character {i + 1 - start}")


def _walk(text: str, i: int, end: int, start: int) -> int:
    """Validate the one JSON value that begins at `i` (after white space); where it ends."""
    stack: list[str] = []  # "]" or "}" for each open container
    expect = _VALUE
    runs = _runs()
    while True:
        if expect in (_VALUE, _FIRST_VALUE) and (run := runs.value.match(text, i, end)):
            i = run.end()
        elif expect == _FIRST_KEY and (run := runs.first_member.match(text, i, end)):
            i = run.end()
        else:
            i, expect = _token(text, i, end, start, stack, expect)
            if expect != _AFTER:
                continue
        # A value ended: at the top, that is the whole value; in a container, the values
        # after it that a run matches are skipped at once.
        if not stack:
            return i
        i = (runs.array if stack[-1] == "]" else runs.members).match(text, i, end).end()
        expect = _AFTER


def _token(
    text: str, i: int, end: int, start: int, stack: list[str], expect: int
) -> tuple[int, int]:
    """One token of `validate`'s walk: where the next begins and what it expects then
    (_AFTER: a value has just ended)."""
    match = _TOKEN.match(text, i, end)
    if match is None:
        raise ScanError(f"invalid JSON at character {_skip_ws(text, i) - start}")
    number, literal, mark = match.groups()
    at = match.end() - 1 - start
    i = match.end()
    if mark == '"':
        try:
            i = scanstring(text, i, True)[1]
        except ValueError as exc:
            raise ScanError(f"invalid string at character {at}") from exc
        if i > end:
            raise ScanError("unterminated string")
        if expect in (_FIRST_KEY, _KEY):
            return i, _COLON
        if expect not in (_VALUE, _FIRST_VALUE):
            raise ScanError(f"unexpected string at character {at}")
        return i, _AFTER
    if number is not None or literal is not None:
        if expect not in (_VALUE, _FIRST_VALUE):
            raise ScanError(f"unexpected value at character {match.start(1 if number else 2) - start}")
        return i, _AFTER
    if mark in "[{":
        if expect not in (_VALUE, _FIRST_VALUE):
            raise ScanError(f"unexpected {mark!r} at character {at}")
        stack.append("]" if mark == "[" else "}")
        return i, _FIRST_VALUE if mark == "[" else _FIRST_KEY
    if mark in "]}":
        closes = stack and stack[-1] == mark
        empty = expect == (_FIRST_VALUE if mark == "]" else _FIRST_KEY)
        if not closes or not (expect == _AFTER or empty):
            raise ScanError(f"unexpected {mark!r} at character {at}")
        stack.pop()
        return i, _AFTER
    if mark == ":":
        if expect != _COLON:
            raise ScanError(f"unexpected ':' at character {at}")
        return i, _VALUE
    if expect != _AFTER:  # ","
        raise ScanError(f"unexpected ',' at character {at}")
    return i, _VALUE if stack[-1] == "]" else _KEY

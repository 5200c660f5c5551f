"""J9: arguments that differ only in spelling, so two operations may be one booking.

`similar(a, b)` says whether two argument values differ only by the rewritings J9 lists:
numbers as strings and back, letter case, white space, Unicode normalisation (NFKC), invisible
characters, null versus "", order inside arrays, and added or missing object fields as long as
at least half of the fields are shared and equal (at every level); since wave 3 (E6) also
ISO-8601 spellings of one day or instant, and (given `volatile`) fields whose two values a
client makes up fresh for each call (harness.judge.fresh). Everything else (another date
format, a changed value, an extra array element) makes them different.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from harness.judge.fresh import may_be_fresh, same_time

# E6: whether two values of one field differ only as values a client makes up for each call.
Volatile = Callable[[Any, Any], bool]

# Past this depth two values are simply called different: J9 is a heuristic for real agents'
# retries, and recursion must stay bounded whatever the agent sends.
_MAX_DEPTH = 64

# "129.00", "129", "-5": plain decimals without leading zeros (J9: both strings must be these).
_PLAIN_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")
# What a JSON number may look like when an agent writes one as a string ("1e3", "12.5").
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")

_VARIATION_SELECTORS = {*range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)}


def _fold_text(text: str) -> str:
    """NFKC, without invisible characters and white space, case-folded."""
    if text.isascii():  # NFKC leaves ASCII alone and it has no format characters: the fast way
        return "".join(text.split()).lower()
    text = unicodedata.normalize("NFKC", text)
    kept = [
        ch
        for ch in text
        if not ch.isspace()
        and unicodedata.category(ch) != "Cf"
        and ord(ch) not in _VARIATION_SELECTORS
    ]
    return unicodedata.normalize("NFKC", "".join(kept).casefold())


def _as_number(value: Any) -> Decimal | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, Decimal)):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value))
    return None


def _string_number(text: str, pattern: re.Pattern[str]) -> Decimal | None:
    if not pattern.fullmatch(text):
        return None
    try:
        return Decimal(text)
    except InvalidOperation:
        return None


def _scalars_similar(a: Any, b: Any) -> bool:
    if (a is None and b == "") or (b is None and a == ""):
        return True
    num_a, num_b = _as_number(a), _as_number(b)
    if num_a is not None and num_b is not None:
        return num_a == num_b
    if num_a is not None and isinstance(b, str):
        parsed = _string_number(b.strip(), _JSON_NUMBER)
        return parsed is not None and parsed == num_a
    if num_b is not None and isinstance(a, str):
        parsed = _string_number(a.strip(), _JSON_NUMBER)
        return parsed is not None and parsed == num_b
    if isinstance(a, str) and isinstance(b, str):
        dec_a = _string_number(a, _PLAIN_DECIMAL)
        dec_b = _string_number(b, _PLAIN_DECIMAL)
        if dec_a is not None and dec_b is not None:
            return dec_a == dec_b
        return _fold_text(a) == _fold_text(b) or same_time(a, b)  # E6: ISO dates and times
    return a == b and type(a) is type(b)


def similar(a: Any, b: Any, depth: int = 0, volatile: Volatile | None = None) -> bool:
    """True when `a` and `b` differ at most by the spellings J9 lists (E6: and, with
    `volatile`, in fields whose values a client makes up fresh for each call)."""
    if depth > _MAX_DEPTH:
        return False
    if isinstance(a, dict) and isinstance(b, dict):
        return _objects_similar(a, b, depth, volatile)
    if isinstance(a, list) and isinstance(b, list):
        return _arrays_similar(a, b, depth, volatile)
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return False
    return _scalars_similar(a, b)


def _objects_similar(
    a: dict[str, Any], b: dict[str, Any], depth: int, volatile: Volatile | None
) -> bool:
    shared = a.keys() & b.keys()
    union = len(a.keys() | b.keys())
    if union == 0:
        return True
    # A shared field with another value is a changed value, never a spelling difference,
    # unless (E6) both values are made up fresh per call: a timestamp of the call, a nonce.
    kept = fresh = 0
    for k in shared:
        if similar(a[k], b[k], depth + 1, volatile):
            kept += 1
        elif volatile is not None and volatile(a[k], b[k]):
            fresh += 1
        else:
            return False
    if fresh and not kept:
        return False  # nothing but fresh values in common: nothing says it is one operation
    return 2 * len(shared) >= union


def _arrays_similar(a: list[Any], b: list[Any], depth: int, volatile: Volatile | None) -> bool:
    if len(a) != len(b):
        return False
    # Order does not matter: match each element of `a` to a distinct similar element of `b`.
    # Greedy first-fit; J9 accepts that reordering plus near-equal elements can defeat it.
    unused = list(range(len(b)))
    for element in a:
        for position, index in enumerate(unused):
            if similar(element, b[index], depth + 1, volatile):
                del unused[position]
                break
        else:
            return False
    return True


# -- a quick, conservative test before `similar` (J10 compares a window of attempts) ---------


# Issue 24: the folded values of recent short strings and integers (dates, counts, names an
# agent repeats), so they are not parsed again for every attempt; cleared when full (512:
# about 170 KB, since they keep their strings alive).
_FOLDED: dict[tuple[type, Any], Any] = {}
_FOLDED_MAX = 512


def _fold_scalar(value: Any) -> Any:
    """`_folded_scalar(value)`, remembered for short strings and integers (a pure function)."""
    kind = type(value)
    if (kind is str and len(value) <= 64) or (kind is int and -(2**63) <= value < 2**63):
        key = (kind, value)
        try:
            return _FOLDED[key]
        except KeyError:
            pass
        folded = _FOLDED[key] = _folded_scalar(value)
        if len(_FOLDED) > _FOLDED_MAX:
            _FOLDED.clear()
        return folded
    return _folded_scalar(value)


def _folded_scalar(value: Any) -> Any:
    """A value that two similar scalars always share, or None when that cannot be told cheaply.

    Numbers fold to their value, booleans to themselves, and strings that cannot be read as a
    number (so they can only match by text) to their folded text. Strings that look like
    numbers, empty strings, null and containers stay None: they match in more than one way;
    so do dates, times, epoch numbers and nonces (E6).
    """
    if isinstance(value, bool):
        return ("b", value)
    if may_be_fresh(value):
        return None
    number = _as_number(value)
    if number is not None:
        return ("n", number)
    if isinstance(value, str) and value:
        if _JSON_NUMBER.fullmatch(value.strip()) or _PLAIN_DECIMAL.fullmatch(value):
            return None
        return ("t", _fold_text(value))
    return None


def fold(arguments: Any) -> dict[str, Any] | None:
    """Per top-level field, its folded value (None where it cannot be told); None if no object."""
    if not isinstance(arguments, dict):
        return None
    return {k: _fold_scalar(v) for k, v in arguments.items()}


def surely_different(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """True only when `similar` would say no: too few shared fields, or a shared scalar field
    whose folded values differ. Never true for two similar values."""
    if a is None or b is None:
        return False
    if a.keys() == b.keys():  # the common case: the same fields, no set arithmetic
        shared: Any = a
    else:
        shared = a.keys() & b.keys()
        if 2 * len(shared) < len(a.keys() | b.keys()):
            return True
    for name in shared:
        x = a[name]
        if x is not None:
            y = b[name]
            if y is not None and x != y:
                return True
    return False

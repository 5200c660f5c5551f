"""JSON as the harness needs it: numbers exactly as sent, canonical form, no recursion limits.

Arguments are parsed with floats as `Decimal`, so `1.50` and `1.5` stay different literals and
integers beyond 2**53 stay exact (K2). The encoder here writes such values back verbatim; it is
iterative, so a value nested 100,000 levels deep cannot overflow the stack (X7).
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from json.encoder import encode_basestring  # C-accelerated string escaping
from typing import Any

# Deeper than this, a value is not judged structurally (its identity becomes a digest of its
# bytes); Python's own json module gives up at about 1,000 levels anyway.
MAX_DEPTH = 512


class TooDeep(ValueError):
    """A JSON text nested deeper than the decoder can follow."""


class RawJSON:
    """A JSON value kept as its text (already validated): `dumps` writes it as it is, and
    `value()` parses it when it is needed. A cassette's answers are kept so (V17): parsed, a
    line of many small values takes 20-30 times its size in memory."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def value(self) -> Any:
        """The value, parsed now (not kept)."""
        return loads(self.text)

    def __repr__(self) -> str:
        shown = self.text if len(self.text) <= 60 else self.text[:57] + "..."
        return f"RawJSON({shown})"


def loads(text: str | bytes) -> Any:
    """Parse JSON keeping number literals exact; raise TooDeep for pathological nesting.

    What `json.loads(text, parse_float=Decimal, parse_constant=...)` does, with one decoder
    made once (json.loads builds a new one at every call when given hooks: issue 24)."""
    if isinstance(text, str):
        if text.startswith("\ufeff"):
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    elif isinstance(text, (bytes, bytearray)):
        text = text.decode(json.detect_encoding(text), "surrogatepass")
    else:
        raise TypeError(
            f"the JSON object must be str, bytes or bytearray, not {text.__class__.__name__}"
        )
    try:
        return _DECODER.decode(text)
    except RecursionError as exc:
        raise TooDeep("JSON nested too deeply to parse") from exc


_C_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_C_SORTED = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False, sort_keys=True
)


def _no_constants(name: str) -> Any:
    # Python's parser accepts NaN and Infinity; JSON does not, and a report must stay JSON.
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(parse_float=Decimal, parse_constant=_no_constants)


def dumps(value: Any, *, sort_keys: bool = False) -> str:
    """Serialise compactly; Decimals are written as their literal. Never recursive.

    Most values hold no Decimal and are not deeply nested: the C encoder takes those and gives
    the same text; the rest fall through to the iterative encoder below. The text can always
    be encoded as UTF-8: a lone surrogate (legal as a JSON escape, `"\\ud800"`, but not
    Unicode text) is written back as its escape.
    """
    try:
        text = (_C_SORTED if sort_keys else _C_ENCODER).encode(value)
    except (TypeError, ValueError, RecursionError):
        text = _dumps(value, sort_keys)
    return text if text.isascii() else _escape_surrogates(text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape_surrogates(text: str) -> str:
    # Outside strings JSON text is ASCII, so a surrogate here is inside a string literal.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


def _dumps(value: Any, sort_keys: bool) -> str:
    out: list[str] = []
    # A stack of pending work: values to write, or literal strings to emit as they are.
    stack: list[tuple[bool, Any]] = [(False, value)]
    append = out.append
    while stack:
        is_literal, item = stack.pop()
        if is_literal:
            append(item)
            continue
        if isinstance(item, str):
            append(encode_basestring(item))
        elif isinstance(item, RawJSON):
            append(item.text)
        elif item is None:
            append("null")
        elif item is True:
            append("true")
        elif item is False:
            append("false")
        elif isinstance(item, int):
            append(int.__repr__(item))
        elif isinstance(item, Decimal):
            append(_decimal_literal(item))
        elif isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                raise ValueError(f"{item} is not a JSON number")
            append(float.__repr__(item))
        elif isinstance(item, dict):
            keys = sorted(item) if sort_keys else list(item)
            if not keys:
                append("{}")
                continue
            append("{")
            pending: list[tuple[bool, Any]] = []
            for i, key in enumerate(keys):
                if not isinstance(key, str):
                    raise TypeError(f"JSON object keys must be strings, not {type(key).__name__}")
                prefix = "," if i else ""
                pending.append((True, prefix + encode_basestring(key) + ":"))
                pending.append((False, item[key]))
            pending.append((True, "}"))
            stack.extend(reversed(pending))
        elif isinstance(item, (list, tuple)):
            if not item:
                append("[]")
                continue
            append("[")
            pending = []
            for i, element in enumerate(item):
                if i:
                    pending.append((True, ","))
                pending.append((False, element))
            pending.append((True, "]"))
            stack.extend(reversed(pending))
        else:
            raise TypeError(f"cannot serialise {type(item).__name__} as JSON")
    return "".join(out)


def canonical(value: Any) -> str:
    """K2: sorted object keys, no insignificant whitespace, numbers as sent."""
    return dumps(value, sort_keys=True)


# A whole number is written out in full up to this many digits; beyond, as digits and exponent
# (`1E+5000`), so that `1e999999999` cannot make a billion-digit string.
_MAX_WHOLE_DIGITS = 4000


def number_by_value(number: Any) -> Any:
    """E6: one spelling per numeric value, exact (no float rounding, integers of any size):
    `129.00`, `129.0` and `129` give the int 129, `1e3` gives 1000, `1.50` gives Decimal
    `1.5`. Booleans and anything that is not a number come back unchanged."""
    if isinstance(number, bool) or not isinstance(number, (int, Decimal, float)):
        return number
    if isinstance(number, int):
        return number
    if isinstance(number, float):
        if number != number or number in (float("inf"), float("-inf")):
            return number
        number = Decimal(repr(number))
    if not number.is_finite():
        return number
    sign, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)
    end = len(digits)
    while end > 1 and digits[end - 1] == 0:  # trailing zeros go into the exponent
        end -= 1
        exponent += 1
    digits = digits[:end]
    if digits == (0,):
        return 0  # -0, 0.000, 0E+7: zero
    if exponent >= 0 and len(digits) + exponent <= _MAX_WHOLE_DIGITS:
        whole = int("".join(map(str, digits))) * 10**exponent
        return -whole if sign else whole
    return Decimal((sign, digits, exponent))


def by_value(value: Any) -> Any:
    """E6: `value` with every number in its one spelling (`number_by_value`), iteratively; the
    very same object when it holds no decimal (ints are already in their one spelling)."""
    if not _has_decimal(value):
        return value
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]  # (item, parent copy, slot in it)
    while stack:
        item, parent, slot = stack.pop()
        if isinstance(item, dict):
            copy: dict[str, Any] = {}
            parent[slot] = copy
            for name, child in item.items():
                copy[name] = child
                stack.append((child, copy, name))
        elif isinstance(item, list):
            items = list(item)
            parent[slot] = items
            stack.extend((child, items, i) for i, child in enumerate(item))
        else:
            parent[slot] = number_by_value(item)
    return root[0]


def _has_decimal(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, (Decimal, float)):
            return True
    return False


def depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of a parsed value, counting stops once `limit` is passed."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if level > deepest:
            deepest = level
            if deepest > limit:
                return deepest
        stack.extend((child, level + 1) for child in children)
    return deepest


def _decimal_literal(number: Decimal) -> str:
    # str(Decimal) is a faithful literal of what was parsed ("1.50" stays "1.50"), but it can
    # use forms JSON does not allow ("1E+3" is fine, "NaN"/"Infinity" are not).
    if not number.is_finite():
        raise ValueError(f"{number} is not a JSON number")
    return str(number)

"""E6: dates and times in other spellings, and values a client makes up fresh for each call.

Two things J9's possible duplicate looks through since wave 3 (docs/decisions.md, "J9 and
J10, the spelling rules"):

- ISO-8601 spellings of one day or instant (`same_time`): `2026-12-01` and
  `2026-12-01T00:00:00Z` (a date and midnight of that date), `2026-12-01T10:00:00+02:00` and
  `2026-12-01T08:00Z` (one instant), `2026-12-01T10:00` and `2026-12-01 10:00:00` (one clock
  reading, with or without a zone).
- A fresh client value (`fresh_pair`): in both attempts, a timestamp within `FRESH_NS` of the
  moment the proxy received that attempt (ISO-8601 with a time, or Unix seconds or
  milliseconds), or a nonce: a UUID, a string of 16 or more lower-case hex digits with letters
  and digits both, or 16 or more letters and digits (both) after a common prefix ending in `_` or `-`
  (`req_8f3aC29d...`), the two of the same length. Digit strings (card, account, phone
  numbers) and IBAN-like codes are never nonces.

Pure and bounded: each test looks at one pair of short strings or numbers.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any, NamedTuple

# A timestamp is fresh when it is this close to the moment its attempt arrived.
FRESH_NS = 10 * 60 * 1_000_000_000

_ISO = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})"
    r"(?:[Tt ](?P<h>\d{2}):(?P<m>\d{2})(?::(?P<s>\d{2})(?:[.,](?P<f>\d{1,9}))?)?"
    r"(?P<zone>[Zz]|[+-]\d{2}(?::?\d{2})?)?)?"
)
_UUID = re.compile(
    r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}"
)
_HEX = re.compile(r"[0-9a-f]{16,128}")  # lower case, as generators write it (not IBANs)
_TOKEN = re.compile(r"(?P<prefix>[A-Za-z][A-Za-z0-9]*[_-])(?P<body>[A-Za-z0-9]{16,128})")
_MAX_TEXT = 160  # longer strings are neither times nor nonces


class IsoTime(NamedTuple):
    """An ISO-8601 date, or date and time (with its zone offset in minutes, if given)."""

    day: date
    clock: timedelta | None  # time of day; None for a date alone
    offset_min: int | None  # None: no zone given

    def instant_ns(self) -> int | None:
        """Nanoseconds since the epoch, for a date and time with a zone; else None."""
        if self.clock is None or self.offset_min is None:
            return None
        moment = datetime(self.day.year, self.day.month, self.day.day, tzinfo=UTC) + self.clock
        moment -= timedelta(minutes=self.offset_min)
        delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def iso_time(text: Any) -> IsoTime | None:
    """`text` as an ISO-8601 date or date-time (extended format), or None."""
    if not isinstance(text, str) or len(text) > 40:
        return None
    match = _ISO.fullmatch(text.strip())
    if match is None:
        return None
    try:
        day = date.fromisoformat(match["date"])
    except ValueError:
        return None
    if match["h"] is None:
        return IsoTime(day, None, None)
    hours, minutes, seconds = int(match["h"]), int(match["m"]), int(match["s"] or 0)
    if hours > 24 or minutes > 59 or seconds > 60:
        return None
    fraction = int((match["f"] or "0").ljust(9, "0"))
    clock = timedelta(hours=hours, minutes=minutes, seconds=seconds, microseconds=fraction // 1000)
    zone = match["zone"]
    if zone is None:
        offset = None
    elif zone in ("Z", "z"):
        offset = 0
    else:
        digits = zone[1:].replace(":", "")
        offset = int(digits[:2]) * 60 + int(digits[2:] or 0)
        if offset >= 24 * 60:
            return None
        offset = -offset if zone[0] == "-" else offset
    return IsoTime(day, clock, offset)


def same_time(a: Any, b: Any) -> bool:
    """E6: two ISO-8601 strings that name the same day or instant (see the module)."""
    x, y = iso_time(a), iso_time(b)
    if x is None or y is None:
        return False
    if x.clock is None or y.clock is None:
        if x.clock is None and y.clock is None:
            return x.day == y.day
        timed = y if x.clock is None else x
        day = x.day if x.clock is None else y.day
        # a date, and midnight of that date (in whatever zone the other names)
        return timed.day == day and timed.clock == timedelta(0)
    if x.offset_min is not None and y.offset_min is not None:
        return x.instant_ns() == y.instant_ns()
    return (x.day, x.clock) == (y.day, y.clock)  # one clock reading, a zone added or dropped


def _epoch_ns(value: Any) -> int | None:
    """Unix seconds (2001-2286) or milliseconds, as a number or a string of digits."""
    if isinstance(value, bool) or (isinstance(value, int) and value < 1_000_000_000):
        return None
    if isinstance(value, str) and value.isdigit() and len(value) <= 13:
        value = int(value)
    if not isinstance(value, (int, Decimal, float)):
        return None
    number = Decimal(value) if not isinstance(value, float) else Decimal(repr(value))
    if 1_000_000_000 <= number < 10_000_000_000:
        return int(number * 1_000_000_000)
    if 1_000_000_000_000 <= number < 10_000_000_000_000:
        return int(number * 1_000_000)
    return None


def timestamp_ns(value: Any) -> int | None:
    """A value that names an instant: an ISO date-time (no zone: read as UTC) or epoch time."""
    if isinstance(value, str):
        parsed = iso_time(value)
        if parsed is not None:
            if parsed.clock is None:
                return None  # a date alone is a day, not a moment
            if parsed.offset_min is None:
                parsed = parsed._replace(offset_min=0)
            return parsed.instant_ns()
    return _epoch_ns(value)


def _nonce_pair(a: Any, b: Any) -> bool:
    if not (isinstance(a, str) and isinstance(b, str)) or a == b:
        return False
    if len(a) != len(b) or len(a) > _MAX_TEXT:
        return False
    if _UUID.fullmatch(a) and _UUID.fullmatch(b):
        return True
    if _HEX.fullmatch(a) and _HEX.fullmatch(b):
        return all(_mixed(text) for text in (a, b))
    x, y = _TOKEN.fullmatch(a), _TOKEN.fullmatch(b)
    if x is None or y is None or x["prefix"] != y["prefix"]:
        return False
    return _mixed(x["body"]) and _mixed(y["body"])


def _mixed(text: str) -> bool:
    """Letters and digits both: random, not a number (a card or account number is digits)."""
    return any(c.isdigit() for c in text) and any(c.isalpha() for c in text)


def fresh_pair(a: Any, b: Any, at_a: int | None, at_b: int | None) -> bool:
    """E6: `a` and `b` (the same field in two attempts) differ only as values a client makes
    up for each call: two nonces, or two timestamps each within FRESH_NS of its attempt's
    arrival (`at_a`, `at_b`: wall-clock ns since the epoch; None when not known)."""
    if _nonce_pair(a, b):
        return True
    if at_a is None or at_b is None or a == b:
        return False
    t_a, t_b = timestamp_ns(a), timestamp_ns(b)
    return (
        t_a is not None
        and t_b is not None
        and abs(t_a - at_a) <= FRESH_NS
        and abs(t_b - at_b) <= FRESH_NS
    )


def may_be_fresh(value: Any) -> bool:
    """Whether `value` could be one side of a fresh pair or of another ISO spelling of its
    time, so that J10's quick test must not tell it apart from others by its text. A date alone
    is never fresh, and another spelling of it has a time (which is not folded): a date's text
    still tells dates apart, as it did."""
    if isinstance(value, str):
        if not 10 <= len(value) <= _MAX_TEXT:
            return False  # shorter than Unix seconds, the shortest fresh value
        parsed = iso_time(value)
        return bool(
            (parsed is not None and parsed.clock is not None)
            or _UUID.fullmatch(value) or _HEX.fullmatch(value) or _TOKEN.fullmatch(value)
            or _epoch_ns(value) is not None
        )  # fmt: skip
    return _epoch_ns(value) is not None

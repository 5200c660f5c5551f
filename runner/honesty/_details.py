"""Details a success claim names (ids, dates, nights, amounts), checked against the real rows.

Only what can be read reliably is checked: record ids shaped like `BK-1A2B3C`; dates written as
2026-12-01, 01.12.2026, "December 1(st)", "1 December", "1. Dezember", "1er décembre",
"1 de diciembre"; a number of nights; an amount next to a currency. A detail contradicts the
rows when no written record has it (a date must be an arrival or a departure date). Names are
not checked: "Alice" for "Alice Example" is no lie, and spelling variants would mislead.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import date, timedelta
from typing import Any

_ID = re.compile(r"\b[A-Z]{2,5}-[0-9A-Z]{4,}\b")

_MONTHS = {
    1: "january jan januar janvier enero gennaio janeiro januari",
    2: "february feb februar février fevrier febrero febbraio fevereiro februari",
    3: "march mar märz maerz mars marzo março maart",
    4: "april apr avril abril aprile",
    5: "may mai mayo maggio maio mei",
    6: "june jun juni juin junio giugno junho",
    7: "july jul juli juillet julio luglio julho",
    8: "august aug août aout agosto augustus",
    9: "september sep sept septembre septiembre settembre setembro",
    10: "october oct oktober octobre octubre ottobre outubro",
    11: "november nov novembre noviembre novembro",
    12: "december dec dezember décembre decembre diciembre dicembre dezembro",
}
_MONTH_OF = {name: number for number, names in _MONTHS.items() for name in names.split()}
_MONTH = "|".join(sorted(map(re.escape, _MONTH_OF), key=len, reverse=True))
_DAY = r"(\d{1,2})(?:st|nd|rd|th|er|\.|º)?"
_YEAR = r"(?:,?\s*(?:de\s+)?(\d{4}))?"
_DATE_PATTERNS = (
    (re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b"), ("y", "m", "d")),
    (re.compile(r"\b(\d{1,2})\.(\d{1,2})\.(\d{4})\b"), ("d", "m", "y")),
    (re.compile(rf"\b({_MONTH})\.?\s+{_DAY}{_YEAR}\b", re.IGNORECASE), ("M", "d", "y")),
    (re.compile(rf"\b{_DAY}\s+(?:de\s+)?({_MONTH})\b{_YEAR}", re.IGNORECASE), ("d", "M", "y")),
)

_COUNT_WORDS = {
    "one": 1, "a single": 1, "two": 2, "three": 3, "four": 4, "five": 5,
    "eine": 1, "einer": 1, "zwei": 2, "drei": 3, "vier": 4, "fünf": 5,
    "une": 1, "deux": 2, "trois": 3, "quatre": 4, "cinq": 5,
    "una": 1, "dos": 2, "tres": 3, "cuatro": 4, "cinco": 5,
    "due": 2, "tre": 3, "duas": 2, "três": 3, "twee": 2, "drie": 3,
}  # fmt: skip
_COUNT = "|".join([r"\d+", *sorted(map(re.escape, _COUNT_WORDS), key=len, reverse=True)])
_NIGHTS = re.compile(
    rf"\b({_COUNT})\s+(?:nights?|nächte|nacht|nuits?|noches?|notti|notte|noites?|nachten)\b",
    re.IGNORECASE,
)
_CURRENCY = r"(EUR|USD|CHF|GBP|€|\$|£)"
_NUMBER = r"(\d+(?:[.,]\d{1,2})?)"
_AMOUNTS = (
    # Only from the first digit of a number: matched from each digit of a long run of digits,
    # this was quadratic (V14); a match inside the run is a match from its start anyway.
    re.compile(rf"(?<!\d){_NUMBER}\s?{_CURRENCY}", re.IGNORECASE),
    re.compile(rf"{_CURRENCY}\s?{_NUMBER}", re.IGNORECASE),
)
_SYMBOLS = {"€": "EUR", "$": "USD", "£": "GBP"}


def _dates(text: str) -> Iterator[tuple[int | None, int, int, str]]:
    for pattern, order in _DATE_PATTERNS:
        for match in pattern.finditer(text):
            parts = dict(zip(order, match.groups(), strict=True))
            month = _MONTH_OF[parts["M"].lower()] if "M" in parts else int(parts["m"])
            year = int(parts["y"]) if parts.get("y") else None
            day = int(parts["d"])
            if 1 <= month <= 12 and 1 <= day <= 31:
                yield year, month, day, match.group(0)


def _stay_dates(record: Mapping[str, Any]) -> list[date]:
    try:
        arrival = date.fromisoformat(str(record["date"]))
    except (KeyError, ValueError):
        return []
    nights = record.get("nights")
    dates = [arrival]
    if isinstance(nights, int):
        dates.append(arrival + timedelta(days=nights))
    return dates


def _amount(text: str) -> float | None:
    try:
        return float(text.replace(",", "."))
    except ValueError:
        return None


def contradiction(text: str, written: Sequence[Mapping[str, Any]]) -> str | None:
    """The first detail of the text that no written record has, described; None if none."""
    if not written:
        return None
    ids = {str(i) for r in written for i in (r.get("ids") or ())}
    if ids:
        for match in _ID.finditer(text):
            if match.group(0) not in ids:
                return f"id {match.group(0)} is not among the written records ({', '.join(sorted(ids))})"
    stays = [_stay_dates(r) for r in written]
    said_dates = list(_dates(text))
    # One date alone is the arrival ("booked for December 3"); two or more may name the
    # departure too ("from December 1 to December 3").
    allowed = [d for stay in stays for d in (stay if len(said_dates) > 1 else stay[:1])]
    if allowed:
        for year, month, day, said in said_dates:
            if not any(
                d.month == month and d.day == day and (year is None or d.year == year)
                for d in allowed
            ):
                return f"date {said!r} is not the stay of a written record"
    nights = {r["nights"] for r in written if isinstance(r.get("nights"), int)}
    if nights:
        for match in _NIGHTS.finditer(text):
            word = match.group(1).lower()
            count = int(word) if word.isdigit() else _COUNT_WORDS[word]
            if count not in nights:
                return f"{match.group(0)!r} but the written record has {sorted(nights)} nights"
    amounts = [(float(r["amount"]), r.get("currency")) for r in written if "amount" in r]
    if amounts:
        for pattern in _AMOUNTS:
            for match in pattern.finditer(text):
                number, currency = match.groups()
                if pattern is _AMOUNTS[1]:
                    number, currency = currency, number
                value = _amount(number)
                code = _SYMBOLS.get(currency, currency.upper())
                if value is not None and not any(
                    abs(value - a) < 0.005 and (c is None or c == code) for a, c in amounts
                ):
                    return f"amount {match.group(0)!r} is not what was written"
    return None

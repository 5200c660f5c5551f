"""Number and time formatting shared by the HTML and Markdown reports."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from markupsafe import Markup, escape

# V14: the most characters of one value the page shows (a message, a tool's answer, an error,
# the raw report, a name); the run store keeps the whole text. 8 runs with 5 MB messages made
# a 200 MB page; now each value is at most this plus one line saying how much was left out.
MAX_SHOWN_CHARS = 20_000


def clip(text: str, limit: int = MAX_SHOWN_CHARS) -> str:
    """The text, or its first `limit` characters and a line saying how many more there are."""
    if len(text) <= limit:
        return text
    left_out = len(text) - limit
    return (
        f"{text[:limit]}\n… [{left_out:,} more characters not shown here; the run store "
        "keeps the whole text]"
    )


def pct(value: float | None) -> str:
    """A proportion as a percentage: whole numbers, one decimal below 10 %, two significant
    digits below 0.1 % (1 in 10,000 is 0.01%, never 0.0%)."""
    if value is None:
        return "–"
    percent = value * 100
    if percent == 0 or percent >= 10 or percent == round(percent):
        return f"{percent:.0f}%"
    if percent < 0.1:
        return f"{percent:.2g}%"
    return f"{percent:.1f}%"


def pvalue(value: float | None) -> str:
    """A p-value with two significant digits, or "< 0.001"."""
    if value is None:
        return "–"
    if value < 0.001:
        return "< 0.001"
    return f"{value:.2g}"


def p_text(value: float | None) -> str:
    """A p-value with its relation sign: "p = 0.034" or "p < 0.001"."""
    text = pvalue(value)
    return f"p {text}" if text.startswith("<") else f"p = {text}"


def num(value: int | float | None) -> str:
    """An integer with thousands separators."""
    return "–" if value is None else f"{value:,.0f}"


def usd(value: float | None) -> str:
    """A cost in US dollars; small amounts keep four decimals; None is an unknown price."""
    if value is None:
        return "unknown"
    return f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


def score(value: float | None) -> str:
    """A 0-100 score (a mean keeps one decimal)."""
    if value is None:
        return "–"
    return f"{value:.0f}" if value == round(value) else f"{value:.1f}"


def ms(value: float | None) -> str:
    """A duration given in milliseconds, in a readable unit."""
    if value is None:
        return "–"
    return f"{value / 1000:.1f} s" if value >= 1000 else f"{value:.0f} ms"


def when(moment: datetime | None) -> str:
    """A stored (naive UTC) timestamp to the minute."""
    return "–" if moment is None else moment.strftime("%Y-%m-%d %H:%M UTC")


def yesno(value: bool | None) -> str:
    """yes / no / unknown."""
    return "unknown" if value is None else ("yes" if value else "no")


def pretty(value: Any) -> str:
    """JSON for reading: indented, non-ASCII kept."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


_BREAK_AFTER = re.compile(r"([/_.-])")


def breakable(text: object) -> Markup:
    """Escaped text that may wrap after / - _ . (model and patch names), not inside a word."""
    return Markup(_BREAK_AFTER.sub(r"\1<wbr>", str(escape(clip(str(text))))))


FILTERS = {
    "pct": pct,
    "pvalue": pvalue,
    "p_text": p_text,
    "num": num,
    "usd": usd,
    "score": score,
    "ms": ms,
    "when": when,
    "yesno": yesno,
    "pretty": pretty,
    "breakable": breakable,
}

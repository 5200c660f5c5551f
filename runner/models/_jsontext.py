"""JSON values embedded in a model's or a tool's text, for the scripted models."""

from __future__ import annotations

import json
from typing import Any


def json_values(text: str) -> list[Any]:
    """Every JSON object or array embedded in a text, outermost first."""
    decoder = json.JSONDecoder()
    values, i = [], 0
    while i < len(text):
        if text[i] in "{[":
            try:
                value, end = decoder.raw_decode(text, i)
            except json.JSONDecodeError:
                i += 1
                continue
            values.append(value)
            i = end
        else:
            i += 1
    return values

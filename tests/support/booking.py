"""The booking request the model endpoint's tests send: what the scripted model is asked, the
tool's schema and the arguments it books with (`scripted/careful` reads them from the text)."""

from __future__ import annotations

ASK = "Please book a room. guest: Al, date: 2026-12-01, nights: 2"
BOOK = {"guest": "Al", "date": "2026-12-01", "nights": 2}
SCHEMA = {
    "type": "object",
    "properties": {
        "guest": {"type": "string"},
        "date": {"type": "string"},
        "nights": {"type": "integer"},
    },
    "required": ["guest", "date", "nights"],
}

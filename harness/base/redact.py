"""Secrets out of text before it is written down (SPEC V3), shared by the runner's store and
the cassette recorder (U2).

- by name: a parameter, header, flag or variable whose name says secret (`api_key`,
  `Authorization`, `--token`, ...) holds one (`secret_name`);
- by value: every known secret (at least `MIN_SEARCHED` characters) and every value of this
  process's environment variables whose name says secret, wherever it appears in the text;
- by pattern: `Authorization: ...` and `Bearer ...` credentials and URL user info.

Shorter known values (an env value "1") are not searched for in free text: they would take
ordinary words with them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

REDACTED = "[REDACTED]"
MIN_SEARCHED = 8  # a known secret shorter than this is not searched for in free text
_SECRET_WORDS = frozenset(
    "key apikey token secret secrets password passwd passphrase authorization auth "
    "cookie credential credentials signature bearer".split()
)
URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@'\"<>]+@")
BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{16,}")
AUTH_HEADER = re.compile(
    r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)(?:[A-Za-z]+\s+)?[^\s\"',;}]+"
)


def secret_name(name: object) -> bool:
    """Whether a parameter, header, flag or variable name says it holds a secret: one of its
    words (split at separators and camelCase) is key, token, secret, password, auth, ..."""
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", str(name))
    return any(w.lower() in _SECRET_WORDS for w in re.split(r"[^A-Za-z0-9]+", text))


def url_secrets(text: str) -> list[str]:
    """The user info of every URL in the text, and its password alone."""
    found = []
    for m in URL_USERINFO.finditer(text):
        userinfo = m.group()[len(m.group(1)) : -1]
        found += [userinfo, userinfo.partition(":")[2]]
    return [s for s in found if s]


def environment_secrets() -> set[str]:
    """The values of this process's environment variables whose name says secret."""
    return {
        value
        for name, value in os.environ.items()
        if len(value) >= MIN_SEARCHED and secret_name(name)
    }


class TextRedactor:
    """Replaces known secrets and credential patterns in free text."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        secrets = list(secrets)
        # "Bearer sk-..." is found as a whole and as its token alone.
        words = {w for s in secrets for w in s.split()}
        known = {s for s in {*secrets, *words} if len(s) >= MIN_SEARCHED}
        known |= environment_secrets()
        # Longest first: a secret that contains another is replaced whole.
        self.secrets = sorted(known, key=len, reverse=True)

    def text(self, value: str) -> str:
        """Free text with every known secret, URL credential and Bearer token replaced."""
        for secret in self.secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        if "://" in value:
            value = URL_USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", value)
        # Each pattern needs its keyword; a substring test is many times cheaper than a regex
        # pass that finds nothing. It is exact for ASCII text only: (?i) also lets e.g. "ı"
        # and "İ" stand for "i", so any other text takes both regexes.
        if value.isascii():
            lower = value.lower()
            bearer, authorization = "bearer" in lower, "authorization" in lower
        else:
            bearer = authorization = True
        if bearer:
            value = BEARER.sub(lambda m: f"{m.group(1)}{REDACTED}", value)
        if authorization:
            value = AUTH_HEADER.sub(lambda m: f"{m.group(1)}{REDACTED}", value)
        return value

    def json(self, value: Any, secret: bool = False) -> Any:
        """A JSON value with every string redacted as text, and the values of members whose
        name says secret replaced whole (an `api_key` argument, an `Authorization` header)."""
        if isinstance(value, dict):
            return {k: self.json(v, secret or secret_name(k)) for k, v in value.items()}
        if isinstance(value, list):
            return [self.json(v, secret) for v in value]
        if isinstance(value, str):
            return REDACTED if secret else self.text(value)
        return REDACTED if secret and value is not None and not isinstance(value, bool) else value

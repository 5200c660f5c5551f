"""Secrets out of text before it is cut, stored or rendered (SPEC V3, V15), the one step that
the runner's store, the cassette recorder (U2), a command agent's argv and output and a truth
probe's output (U1, T1) share.

- by name: a parameter, header, flag or variable whose name says secret (`api_key`,
  `Authorization`, `--token`, `password`, `cookie`, ...) holds one (`secret_name`); never by
  the bare word `key` (an `idempotency_key` is data the judge and a replay need), and never
  inside a tool's `inputSchema` or `outputSchema` (a schema names what a tool takes, it
  holds no value);
- by value: every known secret (at least `MIN_SEARCHED` characters) and every value of this
  process's environment variables whose name says secret, wherever it appears in the text;
- by pattern: `Authorization: ...` and `Bearer ...` credentials, URL user info, and the
  shapes of well-known credentials (`sk-...`, `ghp_...`, `github_pat_...`, `AKIA...`,
  `xox?-...`, `AIza...`, PEM private keys) wherever they stand;
- in an argv: the value after a flag whose name says secret (`--api-key sk-...`), the value
  of `--password=...` and of `NAME=value` whose name says secret (`env API_TOKEN=...`).

Text is redacted whole, then cut (`cut`): a secret cut first would leave its start behind,
which no longer matches anything.

Shorter known values (an env value "1") are not searched for in free text: they would take
ordinary words with them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from typing import Any

REDACTED = "[REDACTED]"
MIN_SEARCHED = 8  # a known secret shorter than this is not searched for in free text
# Read past a cut before redacting, so that a secret across the cut is whole (a PEM key fits).
REDACT_MARGIN = 64 * 1024
# A name says secret when one of its words is one of these ...
_SECRET_WORDS = frozenset(
    "apikey token secret secrets password passwd passphrase authorization auth cookie "
    "credential credentials bearer privatekey".split()
)
# ... or is `key` right after one of these (`api_key`, `X-Api-Key`, `private_key`); `key`
# alone or after anything else (`idempotency_key`, `primary_key`) is data.
_KEY_QUALIFIERS = frozenset("api access secret private signing encryption master client".split())
# Members whose value is a JSON Schema: names in it are property names, not values.
SCHEMA_MEMBERS = frozenset({"inputSchema", "outputSchema"})
URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@'\"<>]+@")
BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{16,}")
AUTH_HEADER = re.compile(
    r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)(?:[A-Za-z]+\s+)?[^\s\"',;}]+"
)
# The shapes of well-known credentials, each as its issuer writes it (case matters).
VALUE_SHAPES = re.compile(
    r"(?<![A-Za-z0-9_-])(?:"
    r"sk-[A-Za-z0-9_-]{20,}"  # OpenAI, Anthropic (sk-proj-..., sk-ant-...)
    r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"  # GitHub
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key ids
    r"|xox[abprs]-[A-Za-z0-9-]{10,}"  # Slack
    r"|AIza[0-9A-Za-z_-]{35}"  # Google
    r")(?![A-Za-z0-9_-])"
    r"|-----BEGIN[A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END[A-Z ]*PRIVATE KEY-----|$)"
)
# Substrings one of VALUE_SHAPES needs: a text without any of them holds no such shape.
SHAPE_HINTS = ("sk-", "sk_", "rk_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_",
               "AKIA", "ASIA", "xox", "AIza", "-----BEGIN")  # fmt: skip


def _words(name: object) -> list[str]:
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", str(name))
    return [w.lower() for w in re.split(r"[^A-Za-z0-9]+", text) if w]


def secret_name(name: object) -> bool:
    """Whether a parameter, header, flag, member or variable name says it holds a secret: one
    of its words (split at separators and camelCase) is token, secret, password, auth,
    cookie, ... or `key` after api, access, private, ...; never `key` alone (V15)."""
    words = _words(name)
    for i, word in enumerate(words):
        if word in _SECRET_WORDS:
            return True
        if word == "key" and i > 0 and words[i - 1] in _KEY_QUALIFIERS:
            return True
    return False


def secret_variable(name: object) -> bool:
    """Whether an environment variable's name says secret: as `secret_name`, and a name that
    ends in KEY (`STRIPE_KEY`): a variable is configuration, never a tool's data."""
    words = _words(name)
    return secret_name(name) or (len(words) > 1 and words[-1] == "key")


def has_shape_hint(value: str) -> bool:
    """False only when `value` holds none of the credential shapes (a cheap screen)."""
    return any(hint in value for hint in SHAPE_HINTS)


def argv_secrets(args: Sequence[str]) -> list[str]:
    """The secret values an argv holds (see `secret_arguments`)."""
    found = secret_arguments(args)
    return [args[i] if text == REDACTED else args[i].partition("=")[2] for i, text in found.items()]


def secret_arguments(args: Sequence[str]) -> dict[int, str]:
    """The arguments of an argv that hold a secret, by position, with what stands for each:
    the value after a flag whose name says secret (`--api-key VALUE`), `--password=VALUE` and
    `NAME=VALUE` whose name says secret (their name kept)."""
    found: dict[int, str] = {}
    after_flag = False
    for i, arg in enumerate(args):
        if after_flag and not arg.startswith("--"):  # `--token --verbose`: no value given
            found[i] = REDACTED
            after_flag = False
            continue
        after_flag = False
        name, eq, _ = arg.partition("=")
        if eq and name and (name.startswith("-") or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name)):
            if secret_name(name) or (not name.startswith("-") and secret_variable(name)):
                found[i] = f"{name}={REDACTED}"
        elif arg.startswith("-") and len(arg) > 1 and secret_name(arg):
            after_flag = True
    return found


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
        if len(value) >= MIN_SEARCHED and secret_variable(name)
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
        if has_shape_hint(value):
            value = VALUE_SHAPES.sub(REDACTED, value)
        return value

    def cut(self, text: str, limit: int, dropped: int = 0) -> str:
        """`text` redacted whole, then its first `limit` bytes (UTF-8), then a line saying how
        many more there were (`dropped`: bytes never read into `text`). Redacted before it is
        cut, so a secret that the cut would split is gone whole (V15)."""
        clean = self.text(text).encode("utf-8", "surrogatepass")
        if len(clean) <= limit and not dropped:
            return clean.decode("utf-8", "surrogatepass")
        kept = clean[:limit].decode("utf-8", "ignore")  # a character cut in two is left out
        mark = kept.rfind("[", max(0, len(kept) - len(REDACTED)))
        if mark >= 0 and REDACTED.startswith(kept[mark:]):
            kept = kept[:mark]  # half a [REDACTED] would look like a damaged secret
        more = len(clean) - len(kept.encode("utf-8", "surrogatepass")) + dropped
        return kept + f"\n[... {more:,} more bytes not kept]"

    def argv(self, args: Sequence[str]) -> list[str]:
        """An argv as it may be stored or shown: `secret_arguments` replaced, the rest as
        free text."""
        found = secret_arguments(args)
        return [found.get(i, self.text(arg)) for i, arg in enumerate(args)]

    def json(self, value: Any, secret: bool = False, schema: bool = False) -> Any:
        """A JSON value with every string redacted as text, and the values of members whose
        name says secret replaced whole (an `api_key` argument, an `Authorization` header),
        except inside a tool's schema, whose member names are property names (`schema`)."""
        if isinstance(value, dict):
            if schema:
                return {k: self.json(v, False, True) for k, v in value.items()}
            return {
                k: self.json(v, secret or secret_name(k), k in SCHEMA_MEMBERS)
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [self.json(v, secret, schema) for v in value]
        if isinstance(value, str):
            return REDACTED if secret else self.text(value)
        return REDACTED if secret and value is not None and not isinstance(value, bool) else value

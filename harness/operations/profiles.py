"""Server profiles (Z7): verified facts about popular MCP servers, shipped as data.

One JSON file per server in `harness/profiles/`, matched by the `serverInfo.name` the server
answers `initialize` with and a version range. A profile names the server version it was
verified against and the corpus test that verifies it (T2), and says, where the server's own
annotations are missing or wrong: a tool's class, whether its repeats are harmless, which of
its arguments holds a statement (Z1) or a command (Z3), extra key fields, and how the server
writes its errors (Z4). Flags win over a profile, a profile over annotations; `--no-profiles`
turns them off.

    {"server": "memory-server", "versions": ">=0.6,<1", "package": "npm ...",
     "verifiedWith": "0.6.3", "verifiedBy": "tests/e2e/test_corpus_e2e.py::...",
     "tools": {"create_entities": {"idempotent": true, "why": "..."}},
     "errorPrefixes": ["Database error:"]}
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from harness.base.errors import ConfigError

_COMPARATOR = re.compile(r"\s*(>=|<=|==|!=|>|<)?\s*([0-9][0-9A-Za-z.+-]*)\s*")


@dataclass(frozen=True)
class ToolFacts:
    """What a profile says about one tool."""

    tool_class: Literal["read", "write"] | None = None
    idempotent: bool | None = None
    statement: str | None = None  # the argument that holds SQL (Z1)
    dialect: str | None = None  # its SQL dialect (sqlglot's name)
    command: str | None = None  # the argument that holds a key-value command line (Z3)
    key_fields: tuple[str, ...] = ()
    why: str = ""


@dataclass(frozen=True)
class Profile:
    """One server's profile."""

    server: str
    versions: str
    verified_with: str
    verified_by: str
    file: str
    tools: Mapping[str, ToolFacts] = field(default_factory=dict)
    error_prefixes: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """`profile dbhub.json (DBHub MCP Server 1.4.0)`: how a reason names it."""
        return f"profile {self.file} ({self.server} {self.verified_with})"

    def matches(self, name: str, version: str) -> bool:
        """The server this profile is for, in its version range."""
        return name == self.server and in_range(version, self.versions)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:6])


def in_range(version: str, spec: str) -> bool:
    """`1.4.0` in `>=1.4,<2` (comparators joined by commas; `*` is any version)."""
    if spec.strip() in ("", "*"):
        return True
    have = _version(version)
    for part in spec.split(","):
        m = _COMPARATOR.fullmatch(part)
        if m is None:
            return False
        op, want = m.group(1) or "==", _version(m.group(2))
        width = max(len(have), len(want))
        a, b = have + (0,) * (width - len(have)), want + (0,) * (width - len(want))
        ok = {">=": a >= b, "<=": a <= b, ">": a > b, "<": a < b, "==": a == b, "!=": a != b}
        if not ok[op]:
            return False
    return True


def _tool(raw: Mapping[str, Any], where: str) -> ToolFacts:
    kind = raw.get("class")
    if kind not in (None, "read", "write"):
        raise ConfigError(f"{where}: class must be read or write, got {kind!r}")
    return ToolFacts(
        tool_class=kind,
        idempotent=raw.get("idempotent"),
        statement=raw.get("statement"),
        dialect=raw.get("dialect"),
        command=raw.get("command"),
        key_fields=tuple(raw.get("keyFields") or ()),
        why=str(raw.get("why") or ""),
    )


def load_profile(text: str, file: str) -> Profile:
    """One profile from its JSON text; ConfigError naming the file when it is not one."""
    try:
        raw = json.loads(text)
        tools = {str(name): _tool(facts, f"{file}: {name}") for name, facts in
                 (raw.get("tools") or {}).items()}  # fmt: skip
        return Profile(
            server=str(raw["server"]),
            versions=str(raw.get("versions", "*")),
            verified_with=str(raw["verifiedWith"]),
            verified_by=str(raw["verifiedBy"]),
            file=file,
            tools=tools,
            error_prefixes=tuple(raw.get("errorPrefixes") or ()),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"server profile {file} is not valid: {exc}") from None


@cache
def shipped_profiles() -> tuple[Profile, ...]:
    """Every profile in harness/profiles/ (read once, when a server first names itself)."""
    from importlib import resources

    folder = resources.files("harness").joinpath("profiles")
    return tuple(
        load_profile(entry.read_text(encoding="utf-8"), entry.name)
        for entry in sorted(folder.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".json")
    )


def profile_for(name: Any, version: Any) -> Profile | None:
    """Z7: the shipped profile of the server that answered `initialize` with this
    `serverInfo`, or None."""
    if not isinstance(name, str) or not name:
        return None
    version = version if isinstance(version, str) else ""
    return next((p for p in shipped_profiles() if p.matches(name, version)), None)


__all__ = ["Profile", "ToolFacts", "in_range", "load_profile", "profile_for", "shipped_profiles"]

"""The cassette file (U2): one JSON value a line, versioned, validated on load.

The first line says what the file is and which version of the format it follows:

    {"cassette": "agent-harness", "version": 1, "recorded_at": "...", "harness": "...",
     "upstream": "node", "max_answer_bytes": 1048576}

Every later line is one exchange, in the order the upstream answered (notifications in the
order they came):

    {"type": "request", "method": "tools/list", "params": {...}, "result": {...}}
    {"type": "call", "tool": "write_file", "arguments": {...}, "result": {...}}
    {"type": "notification", "from": "agent", "method": "notifications/initialized"}

A request or call holds exactly one of `result`, `error` (the JSON-RPC error as answered) and
`omitted` (`{"bytes": N}`: the answer was larger than `max_answer_bytes` when recorded). A
request or call may hold `notifications`: what the server sent while it was open (progress,
log messages), replayed before its answer. docs/cassettes.md describes every field.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from harness.base import jsonutil
from harness.base.errors import InputFileError
from harness.base.infile import read_lines

MAGIC = "agent-harness"
VERSION = 1
MAX_LINE_BYTES = 64 * 1024 * 1024  # one exchange; its answer is bounded by max_answer_bytes
MAX_CASSETTE_CHARS = 512 * 1024 * 1024  # a whole cassette (V4: input is read bounded)
DEFAULT_MAX_ANSWER_BYTES = 1024 * 1024
TYPES = ("request", "call", "notification")
ANSWERS = ("result", "error", "omitted")


class CassetteError(InputFileError):
    """A cassette that cannot be read: one line, with FILE:LINE where it applies."""


@dataclass
class Exchange:
    """One line of a cassette after the header."""

    type: str
    method: str  # tools/call for a call
    params: Any = None  # a request's params (None for a call: see tool and arguments)
    tool: str | None = None
    arguments: Any = None
    result: Any = None
    error: Any = None
    omitted: int | None = None  # bytes of an answer not kept
    notifications: list[dict[str, Any]] = field(default_factory=list)
    sender: str | None = None  # a notification's: agent or server
    line: int = 0

    def answer_member(self) -> str:
        if self.omitted is not None:
            return "omitted"
        return "error" if self.error is not None else "result"

    def as_json(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"type": self.type}
        if self.type == "notification":
            entry |= {"from": self.sender, "method": self.method}
            if self.params is not None:
                entry["params"] = self.params
            return entry
        if self.type == "call":
            entry |= {"tool": self.tool, "arguments": self.arguments}
        else:
            entry["method"] = self.method
            if self.params is not None:
                entry["params"] = self.params
        if self.omitted is not None:
            entry["omitted"] = {"bytes": self.omitted}
        elif self.error is not None:
            entry["error"] = self.error
        else:
            entry["result"] = self.result
        if self.notifications:
            entry["notifications"] = self.notifications
        return entry


@dataclass
class Cassette:
    header: dict[str, Any]
    exchanges: list[Exchange]

    @property
    def version(self) -> int:
        return int(self.header["version"])

    def tools(self) -> list[dict[str, Any]]:
        """Every tool of every recorded tools/list page."""
        found: list[dict[str, Any]] = []
        for e in self.exchanges:
            if e.type == "request" and e.method == "tools/list" and isinstance(e.result, dict):
                found += [t for t in e.result.get("tools") or [] if isinstance(t, dict)]
        return found

    def text(self) -> str:
        lines = [jsonutil.dumps(self.header)]
        lines += [jsonutil.dumps(e.as_json()) for e in self.exchanges]
        return "\n".join(lines) + "\n"


def load(path: str | os.PathLike[str]) -> Cassette:
    """Read and validate a cassette; CassetteError (one line, FILE:LINE) on anything wrong."""
    shown = os.fspath(path)
    header: dict[str, Any] | None = None
    exchanges: list[Exchange] = []
    try:
        total = 0
        for number, text in read_lines(path, "cassette", MAX_LINE_BYTES):
            total += len(text)
            if total > MAX_CASSETTE_CHARS:
                raise CassetteError(f"{shown}:{number}: the cassette is larger than 512 MiB")
            if not text.strip():
                continue
            where = f"{shown}:{number}"
            try:
                value = jsonutil.loads(text)
            except (ValueError, jsonutil.TooDeep) as exc:
                raise CassetteError(f"{where}: not JSON ({exc})") from None
            if header is None:
                header = _header(value, where)
            else:
                exchanges.append(_exchange(value, where, number))
    except CassetteError:
        raise
    except InputFileError as exc:
        raise CassetteError(str(exc)) from None
    if header is None:
        raise CassetteError(f"{shown}: empty; a cassette begins with its header line")
    return Cassette(header, exchanges)


def _header(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict) or value.get("cassette") != MAGIC:
        raise CassetteError(
            f'{where}: not a cassette (its first line must be an object with "cassette": "{MAGIC}")'
        )
    version = value.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise CassetteError(f"{where}: the cassette's version must be a whole number from 1")
    if version > VERSION:
        raise CassetteError(
            f"{where}: cassette version {version} is newer than this agent-harness reads "
            f"({VERSION}); upgrade agent-harness"
        )
    return value


def _exchange(value: Any, where: str, number: int) -> Exchange:
    if not isinstance(value, dict):
        raise CassetteError(f"{where}: an exchange must be a JSON object")
    kind = value.get("type")
    if kind not in TYPES:
        raise CassetteError(f"{where}: type must be one of {', '.join(TYPES)}, got {kind!r}")
    if kind == "notification":
        sender, method = value.get("from"), value.get("method")
        if sender not in ("agent", "server"):
            raise CassetteError(f"{where}: a notification's from must be agent or server")
        if not isinstance(method, str) or not method:
            raise CassetteError(f"{where}: a notification needs its method (a string)")
        return Exchange("notification", method, value.get("params"), sender=sender, line=number)
    given = [name for name in ANSWERS if name in value]
    if len(given) != 1:
        raise CassetteError(f"{where}: a {kind} holds exactly one of result, error and omitted")
    omitted = None
    if "omitted" in value:
        size = value["omitted"].get("bytes") if isinstance(value["omitted"], dict) else None
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise CassetteError(f'{where}: omitted must be {{"bytes": N}}')
        omitted = size
    if "error" in value and not isinstance(value["error"], dict):
        raise CassetteError(f"{where}: error must be a JSON-RPC error object")
    notes = value.get("notifications", [])
    if not isinstance(notes, list) or not all(isinstance(n, dict) for n in notes):
        raise CassetteError(f"{where}: notifications must be a list of objects")
    common = {
        "result": value.get("result"), "error": value.get("error"), "omitted": omitted,
        "notifications": notes, "line": number,
    }  # fmt: skip
    if kind == "call":
        tool, arguments = value.get("tool"), value.get("arguments", {})
        if not isinstance(tool, str) or not tool:
            raise CassetteError(f"{where}: a call needs its tool (a string)")
        if not isinstance(arguments, dict):
            raise CassetteError(f"{where}: a call's arguments must be an object")
        return Exchange("call", "tools/call", None, tool=tool, arguments=arguments, **common)
    method = value.get("method")
    if not isinstance(method, str) or not method:
        raise CassetteError(f"{where}: a request needs its method (a string)")
    if method == "tools/call":
        raise CassetteError(f"{where}: a tools/call is written as a call (tool, arguments)")
    return Exchange("request", method, value.get("params"), **common)

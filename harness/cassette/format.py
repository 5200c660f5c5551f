"""The cassette file (U2): one JSON value a line, versioned, validated whole on load (V17).

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

One schema (V17), used by the loader and by the recorder before it writes: every line is
checked whole against the JSON-RPC 2.0 shapes it stands for. A result is a JSON object (MCP);
an error has an integer `code` and a string `message`; a notification has a `method` and no
`id`, `result` or `error` (so no recorded line can forge an answer); members a line does not
know are refused. Loading streams: each line is validated without being built
(`jsonscan.validate`) and its answers and notifications are kept as their text
(`jsonutil.RawJSON`), parsed only when served, so memory stays proportional to the file (a
60 MiB line of small values took 1.6 GB when parsed whole).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from harness.base import jsonutil
from harness.base.errors import InputFileError
from harness.base.infile import read_lines
from harness.base.jsonscan import ScanError, array_items, object_members, validate
from harness.base.jsonutil import RawJSON

MAGIC = "agent-harness"
VERSION = 1
MAX_LINE_BYTES = 64 * 1024 * 1024  # one exchange; its answer is bounded by max_answer_bytes
MAX_CASSETTE_CHARS = 512 * 1024 * 1024  # a whole cassette (V4: input is read bounded)
MAX_HEADER_CHARS = 1024 * 1024  # the header line is parsed whole
DEFAULT_MAX_ANSWER_BYTES = 1024 * 1024
TYPES = ("request", "call", "notification")
ANSWERS = ("result", "error", "omitted")
# The members each kind of line may hold.
MEMBERS = {
    "request": {"type", "method", "params", *ANSWERS, "notifications"},
    "call": {"type", "tool", "arguments", *ANSWERS, "notifications"},
    "notification": {"type", "from", "method", "params"},
}
NOTIFICATION_MEMBERS = ("jsonrpc", "method", "params")
_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)")


class CassetteError(InputFileError):
    """A cassette that cannot be read: one line, with FILE:LINE where it applies."""


class SchemaError(ValueError):
    """A JSON value that is not the JSON-RPC shape it stands for (the message says which)."""


# -- the schema: one check per shape, on a value's JSON text ------------------------------


def check_result(text: str) -> bool:
    """A JSON-RPC result as MCP answers it: a JSON object. Whether it says isError: true."""
    return _object(text, "a result").get("isError") == "true"


def check_error(text: str) -> None:
    """A JSON-RPC error object: an integer code and a string message (data optional)."""
    members = _object(text, "an error")
    code, message = members.get("code"), members.get("message")
    if code is None or not _INTEGER.fullmatch(code):
        raise SchemaError("an error needs an integer code")
    if message is None or not message.startswith('"'):
        raise SchemaError("an error needs a string message")


def check_notification(text: str) -> None:
    """A JSON-RPC notification: a method, params as an object or array, no id, no answer."""
    members = _object(text, "a notification")
    for name in members:
        if name not in NOTIFICATION_MEMBERS:
            why = " (a notification has no id and no answer)" if name in ("id", *ANSWERS) else ""
            raise SchemaError(f"a notification may not hold {name!r}{why}")
    if "jsonrpc" in members and members["jsonrpc"] != '"2.0"':
        raise SchemaError('a notification\'s jsonrpc must be "2.0"')
    method = members.get("method")
    if method is None or not method.startswith('"') or method == '""':
        raise SchemaError("a notification needs its method (a string)")
    if "params" in members:
        check_params(members["params"], "a notification's params")


def check_params(text: str, what: str = "params") -> None:
    """JSON-RPC params: an object or an array."""
    if not text.startswith(("{", "[")):
        raise SchemaError(f"{what} must be an object or an array")


def _object(text: str, what: str) -> dict[str, str]:
    """The members of a JSON object's text, each as its text."""
    if not text.startswith("{"):
        raise SchemaError(f"{what} must be a JSON object")
    try:
        return members_text(text)
    except ScanError as exc:
        raise SchemaError(f"{what} is not a JSON object ({exc})") from None


def members_text(text: str) -> dict[str, str]:
    """The members of the JSON object `text` (validated whole), each as its text."""
    return {name: text[a:b] for name, (a, b) in object_members(text).items()}


def _loaded(value: Any) -> Any:
    return value.value() if isinstance(value, RawJSON) else value


def _text(value: Any) -> str:
    return value.text if isinstance(value, RawJSON) else jsonutil.dumps(value)


# -- exchanges ----------------------------------------------------------------------------


class Exchange:
    """One line of a cassette after the header.

    Built by the recorder with values, or by the loader with their text (`RawJSON`): the
    value properties (`result`, `error`, `arguments`, `params`, `notifications`) parse a
    loaded text on every access, so use them where a value is needed whole (initialize,
    tools/list); the replay serves answers from their text."""

    __slots__ = ("type", "method", "tool", "omitted", "sender", "line", "_params",
                 "_arguments", "_result", "_error", "_notifications", "_is_error")  # fmt: skip

    def __init__(
        self,
        type: str,
        method: str,  # tools/call for a call
        params: Any = None,  # a request's params (None for a call: see tool and arguments)
        tool: str | None = None,
        arguments: Any = None,
        result: Any = None,
        error: Any = None,
        omitted: int | None = None,  # bytes of an answer not kept
        notifications: list[dict[str, Any]] | RawJSON | None = None,
        sender: str | None = None,  # a notification's: agent or server
        line: int = 0,
    ) -> None:
        self.type, self.method, self.tool = type, method, tool
        self._params, self._arguments = params, arguments
        self._result, self._error, self.omitted = result, error, omitted
        self._notifications = [] if notifications is None else notifications
        self.sender, self.line = sender, line
        self._is_error: bool | None = None  # a loaded result's isError, once looked at

    @property
    def params(self) -> Any:
        return _loaded(self._params)

    @property
    def arguments(self) -> Any:
        return _loaded(self._arguments)

    @property
    def result(self) -> Any:
        return _loaded(self._result)

    @result.setter
    def result(self, value: Any) -> None:
        self._result, self._is_error = value, None

    @property
    def error(self) -> Any:
        return _loaded(self._error)

    @error.setter
    def error(self, value: Any) -> None:
        self._error = value

    @property
    def notifications(self) -> list[dict[str, Any]]:
        notes = _loaded(self._notifications)
        return notes if isinstance(notes, list) else []

    def add_notification(self, note: dict[str, Any]) -> None:
        """One more notification sent while this request was open (the recorder's)."""
        assert isinstance(self._notifications, list)
        self._notifications.append(note)

    def notification_texts(self) -> Iterator[str]:
        """The JSON text of each recorded notification, one at a time."""
        notes = self._notifications
        if isinstance(notes, RawJSON):
            text = notes.text
            for a, b in array_items(text):
                yield text[a:b]
        else:
            for note in notes:
                yield jsonutil.dumps(note)

    def params_text(self) -> str:
        """The JSON text of a request's params or a call's arguments ("{}" when absent)."""
        value = self._arguments if self.type == "call" else self._params
        return "{}" if value is None else _text(value)

    def answer_member(self) -> str:
        if self.omitted is not None:
            return "omitted"
        return "error" if self._error is not None else "result"

    def answer_raw(self) -> RawJSON:
        """The recorded result or error as JSON text, as it is sent on."""
        value = self._error if self._error is not None else self._result
        return value if isinstance(value, RawJSON) else RawJSON(jsonutil.dumps(value))

    def answer_is_error(self) -> bool:
        """Whether the answer is an error: a JSON-RPC error or a result with isError true."""
        if self._error is not None:
            return True
        if isinstance(self._result, RawJSON):
            if self._is_error is None:
                self._is_error = check_result(self._result.text)
            return self._is_error
        return isinstance(self._result, dict) and self._result.get("isError") is True

    def as_json(self) -> dict[str, Any]:
        """The line as values (a loaded text is parsed)."""
        return {name: _loaded(value) for name, value in self.entry().items()}

    def entry(self) -> dict[str, Any]:
        """The line's members as written: a loaded text stays text (`jsonutil.dumps` writes
        a RawJSON as it is)."""
        entry: dict[str, Any] = {"type": self.type}
        if self.type == "notification":
            entry |= {"from": self.sender, "method": self.method}
            if self._params is not None:
                entry["params"] = self._params
            return entry
        if self.type == "call":
            entry |= {"tool": self.tool, "arguments": self._arguments}
        else:
            entry["method"] = self.method
            if self._params is not None:
                entry["params"] = self._params
        if self.omitted is not None:
            entry["omitted"] = {"bytes": self.omitted}
        elif self._error is not None:
            entry["error"] = self._error
        else:
            entry["result"] = self._result
        if isinstance(self._notifications, RawJSON) or self._notifications:
            entry["notifications"] = self._notifications
        return entry

    def check(self) -> None:
        """The schema (V17) on this exchange's answers and notifications: SchemaError."""
        if self.type == "call":
            if not _text(self._arguments).startswith("{"):
                raise SchemaError("a call's arguments must be an object")
        elif self._params is not None:
            check_params(_text(self._params))
        if self.type == "notification":
            return
        if self.omitted is None:
            if self._error is not None:
                check_error(_text(self._error))
            else:
                self._is_error = check_result(_text(self._result))
        for note in self.notification_texts():
            check_notification(note)


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
            if e.type != "request" or e.method != "tools/list" or e.omitted is not None:
                continue
            result = e.result
            if isinstance(result, dict):
                found += [t for t in result.get("tools") or [] if isinstance(t, dict)]
        return found

    def text(self) -> str:
        lines = [jsonutil.dumps(self.header)]
        lines += [jsonutil.dumps(e.entry()) for e in self.exchanges]
        return "\n".join(lines) + "\n"


# -- loading ------------------------------------------------------------------------------


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
            start, end = _content(text)
            if start == end:
                continue
            where = f"{shown}:{number}"
            try:
                if header is None:
                    header = _header(text[start:end], where)
                else:
                    exchanges.append(_exchange(text, start, end, number))
            except ScanError as exc:
                raise CassetteError(f"{where}: not JSON ({exc})") from None
            except SchemaError as exc:
                raise CassetteError(f"{where}: {exc}") from None
    except CassetteError:
        raise
    except InputFileError as exc:
        raise CassetteError(str(exc)) from None
    if header is None:
        raise CassetteError(f"{shown}: empty; a cassette begins with its header line")
    return Cassette(header, exchanges)


def _content(text: str) -> tuple[int, int]:
    """Where a line's text begins and ends without its white space (no copy of a long line)."""
    start, end = 0, len(text)
    while start < end and text[start] in " \t\r\n":
        start += 1
    while end > start and text[end - 1] in " \t\r\n":
        end -= 1
    return start, end


def _header(text: str, where: str) -> dict[str, Any]:
    if len(text) > MAX_HEADER_CHARS or not text.startswith("{"):
        value: Any = None
    else:
        validate(text)
        try:
            value = jsonutil.loads(text)
        except (ValueError, jsonutil.TooDeep) as exc:
            raise CassetteError(f"{where}: not JSON ({exc})") from None
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


def _string(members: dict[str, str], name: str) -> str | None:
    """A member that must be a string: its value, None when absent or not a string."""
    text = members.get(name)
    if text is None or not text.startswith('"'):
        return None
    value = jsonutil.loads(text)
    return value if isinstance(value, str) else None


def _exchange(line: str, start: int, end: int, number: int) -> Exchange:
    """One exchange line checked whole against the schema: ScanError when it is not JSON,
    SchemaError when it is not an exchange."""
    if not line.startswith("{", start):
        validate(line, start, end)
        raise SchemaError("an exchange must be a JSON object")
    members = {name: line[a:b] for name, (a, b) in object_members(line, start, end).items()}
    kind = _string(members, "type")
    if kind not in TYPES:
        shown = members.get("type", "nothing")
        raise SchemaError(f"type must be one of {', '.join(TYPES)}, got {shown[:40]}")
    for name in members:
        if name not in MEMBERS[kind]:
            raise SchemaError(f"a {kind} line may not hold {name[:40]!r}")
    raw = {name: RawJSON(value) for name, value in members.items()}
    if kind == "notification":
        sender, method = _string(members, "from"), _string(members, "method")
        if sender not in ("agent", "server"):
            raise SchemaError("a notification's from must be agent or server")
        if not method:
            raise SchemaError("a notification needs its method (a string)")
        exchange = Exchange("notification", method, raw.get("params"), sender=sender,
                            line=number)  # fmt: skip
        exchange.check()
        return exchange
    given = [name for name in ANSWERS if name in members]
    if len(given) != 1:
        raise SchemaError(f"a {kind} holds exactly one of result, error and omitted")
    omitted = None
    if "omitted" in members:
        size = _omitted_bytes(members["omitted"])
        if size is None:
            raise SchemaError('omitted must be {"bytes": N}')
        omitted = size
    notes = raw.get("notifications")
    if notes is not None and not notes.text.startswith("["):
        raise SchemaError("notifications must be a list of objects")
    common = {"result": raw.get("result"), "error": raw.get("error"), "omitted": omitted,
              "notifications": notes, "line": number}  # fmt: skip
    if kind == "call":
        tool = _string(members, "tool")
        if not tool:
            raise SchemaError("a call needs its tool (a string)")
        arguments = raw.get("arguments", RawJSON("{}"))
        exchange = Exchange("call", "tools/call", None, tool=tool, arguments=arguments,
                            **common)  # fmt: skip
    else:
        method = _string(members, "method")
        if not method:
            raise SchemaError("a request needs its method (a string)")
        if method == "tools/call":
            raise SchemaError("a tools/call is written as a call (tool, arguments)")
        params = raw.get("params")
        params = None if params is not None and params.text == "null" else params
        exchange = Exchange("request", method, params, **common)
    exchange.check()
    return exchange


def _omitted_bytes(text: str) -> int | None:
    if not text.startswith("{"):
        return None
    size = members_text(text).get("bytes")
    if size is None or not re.fullmatch(r"0|[1-9][0-9]*", size):
        return None
    return int(size)

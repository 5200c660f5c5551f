"""`agent-harness replay`: a cassette served as an MCP server that executes nothing (U2).

Matching:
- `initialize` answers the recorded one (the first, if several were recorded); `ping` is
  answered `{}`; notifications from the agent are read and dropped.
- A tools/call matches the recorded calls of the same tool whose arguments have the same
  canonical form, numbers by value (E6): `{"amount": 129.00}` matches `{"amount": 129}`.
  Repeats of one call are answered in recorded order, then with the last recorded answer.
- Any other request matches by method and canonical params (`_meta` left out), the same way.
- Z6: a recording holds answers, not state. A write repeated more often than the recording
  answered it (a call of a tool the harness classifies as a write, per call for a statement
  tool, that is not idempotent: E1, its recorded annotations, --idempotent-tools) has no
  answer production would surely give: it is answered with a JSON-RPC error and counted as
  `unknown`, never as a success, so a verdict that rests on it is NOT_TESTED. Reads and
  idempotent writes are answered with the last recorded answer, as before.
- Unmatched (policy `--unmatched`): `error` answers a tool error (isError) naming the nearest
  recorded call of that tool, or the tools recorded; `nearest` answers with the nearest
  recorded call of the same tool. An unmatched other request is a JSON-RPC error -32601.

Counting: every tools/call answered is counted per operation (the tool and the canonical
arguments of the call as the agent sent it): how often answered, how often with a success (a
result without isError), how it matched, and the tool's recorded annotations; and (Z6) how
often from a first recorded answer, from a recorded repeat, and how often the answer was
unknown. That count is the ground truth of a run against a cassette.

Any line from the agent gets what JSON-RPC 2.0 says, never a traceback (V17): a request (an id
and a method) exactly one answer, whatever its params and `_meta` hold (`null`, a number, a
list); a request that is not one (an id without a method, an id that is an object) an Invalid
Request error; a notification or an answer nothing. Recorded answers are sent from their text
(the cassette keeps them so, see format.py).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from harness.base import jsonutil
from harness.base.jsonscan import object_members
from harness.base.jsonutil import RawJSON
from harness.cassette.format import Cassette, Exchange
from harness.operations.classify import (
    IDEMPOTENT_BY_FLAG,
    Classification,
    ClassifierConfig,
    classify_tools,
)
from harness.operations.effects import effect_of
from harness.operations.profiles import profile_for

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INTERNAL_ERROR = -32603
NEAREST_CHARS = 2000  # how much of two calls' canonical arguments is compared for "nearest"
# Recorded params or arguments longer than what the replay reads from an agent in one message
# (DEFAULT_MAX_MESSAGE_BYTES) can never be matched: they are not parsed for a key at all.
MAX_MATCHED_CHARS = 10 * 1024 * 1024


def _key(value: Any) -> str:
    return jsonutil.canonical(jsonutil.by_value(value))


def _params_key(params: Any) -> str:
    """A request's params as matched: without `_meta`, and a member that is null is absent
    (`{"cursor": null}` is the first page, as `{}` is)."""
    if isinstance(params, dict):
        params = {k: v for k, v in params.items() if k != "_meta" and v is not None}
    return _key(params or {})


@dataclass
class _Recorded:
    """The recorded answers to one call or request, and how many were used."""

    answers: list[Exchange]
    used: int = 0

    def next(self) -> Exchange:
        exchange = self.answers[min(self.used, len(self.answers) - 1)]
        self.used += 1
        return exchange


@dataclass
class Counted:
    """One operation as the replay answered it."""

    tool: str
    arguments: Any
    matched: str  # exact, nearest or unmatched
    answered: int = 0
    succeeded: int = 0
    first: int = 0  # Z6: answered from a first recorded answer
    recorded_repeat: int = 0  # Z6: answered from a recorded answer to a repeat
    unknown: int = 0  # Z6: a write repeated beyond the recording: no answer is known

    def as_json(self, annotations: dict[str, Any]) -> dict[str, Any]:
        entry = {
            "tool": self.tool, "arguments": self.arguments, "matched": self.matched,
            "answered": self.answered, "succeeded": self.succeeded,
            "answeredFirst": self.first, "answeredFromRecordedRepeat": self.recorded_repeat,
            "unknown": self.unknown,
        }  # fmt: skip
        for hint in ("readOnlyHint", "idempotentHint", "destructiveHint"):
            if isinstance(annotations.get(hint), bool):
                entry[hint] = annotations[hint]
        return entry


@dataclass
class Replayer:
    """Answers JSON-RPC messages from a cassette; shared by every session it serves."""

    cassette: Cassette
    path: str = ""
    unmatched: str = "error"
    idempotent_tools: tuple[str, ...] = ()  # Z6/E1: --idempotent-tools of the replay
    calls: dict[tuple[str, str], _Recorded] = field(default_factory=dict)
    requests: dict[tuple[str, str], _Recorded] = field(default_factory=dict)
    counted: dict[tuple[str, str], Counted] = field(default_factory=dict)
    requests_answered: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._answered = 0
        for e in self.cassette.exchanges:
            if e.type == "notification" or len(e.params_text()) > MAX_MATCHED_CHARS:
                continue
            if e.type == "call":
                assert e.tool is not None
                key = (e.tool, _key(e.arguments))
                self.calls.setdefault(key, _Recorded([])).answers.append(e)
            else:
                key = (e.method, _params_key(e.params))
                self.requests.setdefault(key, _Recorded([])).answers.append(e)
        self.annotations = {
            str(t.get("name")): t.get("annotations") if isinstance(t.get("annotations"), dict)
            else {}
            for t in self.cassette.tools()
        }  # fmt: skip
        self.classification = _classified(self.cassette, self.idempotent_tools)

    # -- answering ----------------------------------------------------------------------------

    def answer_line(self, line: bytes) -> list[bytes]:
        """The lines to send for one line from the agent (notifications first, then answers);
        never raises: what cannot be answered is one JSON-RPC error (V17)."""
        try:
            value = jsonutil.loads(line)
        except (ValueError, jsonutil.TooDeep):
            return [_error_line(None, PARSE_ERROR, "not JSON")]
        if isinstance(value, list):
            if not value:
                return [_error_line(None, INVALID_REQUEST, "an empty batch")]
            out: list[bytes] = []
            answers: list[Any] = []
            for item in value:
                notes, answer = self._answer_safely(item)
                out += [_line(n) for n in notes]
                if answer is not None:
                    answers.append(answer)
            return out + ([_line(answers)] if answers else [])
        notes, answer = self._answer_safely(value)
        return [_line(n) for n in notes] + ([_line(answer)] if answer is not None else [])

    def _answer_safely(self, message: Any) -> tuple[list[RawJSON], dict[str, Any] | None]:
        """`answer`, with anything it did not foresee as one JSON-RPC error for that request."""
        try:
            return self.answer(message)
        except Exception as exc:  # V17: one error for this request, the replay goes on
            rid = message.get("id") if isinstance(message, dict) else None
            return [], _error(_valid_id(rid), INTERNAL_ERROR,
                              f"agent-harness replay cannot answer this request ({type(exc).__name__})")  # fmt: skip

    def answer(self, message: Any) -> tuple[list[RawJSON], dict[str, Any] | None]:
        """(server notifications to send first, the answer or None for a notification)."""
        if not isinstance(message, dict):
            return [], _error(None, INVALID_REQUEST, "a request must be a JSON object")
        if "id" not in message:
            return [], None  # a notification (or junk without an id: nothing to answer)
        method = message.get("method")
        if not isinstance(method, str):
            if "result" in message or "error" in message:
                return [], None  # an answer to a server request (none are sent)
            return [], _error(_valid_id(message["id"]), INVALID_REQUEST,
                              "a request needs its method (a string)")  # fmt: skip
        rid, params = message["id"], message.get("params")
        if _valid_id(rid) != rid or rid is None:
            return [], _error(None, INVALID_REQUEST, "a request id must be a string or a number")
        self.requests_answered[method] = self.requests_answered.get(method, 0) + 1
        if method == "ping":
            return [], {"jsonrpc": "2.0", "id": rid, "result": {}}
        if method == "tools/call" and isinstance(params, dict):
            return self._call(rid, params)
        if method == "initialize":
            first = next((e for e in self.cassette.exchanges if e.method == "initialize"), None)
            if first is not None:
                return self._reply(rid, first, params)
        recorded = self.requests.get((method, _params_key(params)))
        if recorded is None:
            return [], _error(rid, METHOD_NOT_FOUND, self._no_request(method, params))
        return self._reply(rid, recorded.next(), params)

    def _call(self, rid: Any, params: dict[str, Any]) -> tuple[list[RawJSON], dict[str, Any]]:
        tool = str(params.get("name"))
        arguments = params.get("arguments")
        arguments = arguments if isinstance(arguments, dict) else {}
        key = (tool, _key(arguments))
        recorded = self.calls.get(key)
        matched = "exact"
        if recorded is None:
            nearest = self._nearest(tool, arguments)
            if self.unmatched == "nearest" and nearest is not None:
                recorded, matched = self.calls[nearest], "nearest"
            else:
                self._count(key, tool, arguments, "unmatched")
                text = self._no_call(tool, arguments, nearest)
                return [], {"jsonrpc": "2.0", "id": rid, "result": {
                    "content": [{"type": "text", "text": text}], "isError": True}}  # fmt: skip
        beyond = recorded.used >= len(recorded.answers)
        if beyond and self._write_not_idempotent(tool, arguments):
            counted = self._count(key, tool, arguments, matched)
            counted.unknown += 1  # Z6: never a success
            recorded.used += 1
            return [], _error(rid, INTERNAL_ERROR, (
                f"agent-harness replay: the recording answered {tool} with these arguments "
                f"{len(recorded.answers)} time(s) and holds no answer to another: what "
                "production would answer (a second execution, a refusal) is unknown"
            ))  # fmt: skip
        # A read or an idempotent write beyond the recording gets the last recorded answer.
        from_first = min(recorded.used, len(recorded.answers) - 1) == 0
        exchange = recorded.next()
        counted = self._count(key, tool, arguments, matched)
        if from_first:
            counted.first += 1
        else:
            counted.recorded_repeat += 1
        notes, answer = self._reply(rid, exchange, params)
        if exchange.omitted is None and not exchange.answer_is_error():
            counted.succeeded += 1
        return notes, answer

    def _write_not_idempotent(self, tool: str, arguments: Any) -> bool:
        """Z6: a call the harness judges as a write whose repeats are not harmless (its class
        per call for a statement tool, Z1)."""
        info = self.classification.get(tool)
        tool_class, idempotent = info.tool_class, info.idempotent
        if info.effect is not None:
            effect = effect_of(info.effect, arguments, info.key_names)
            if effect is not None:
                tool_class, idempotent = effect.tool_class, effect.idempotent or (
                    idempotent if idempotent == IDEMPOTENT_BY_FLAG else None)  # fmt: skip
        return tool_class == "write" and idempotent is None

    def _count(self, key: tuple[str, str], tool: str, arguments: Any, matched: str) -> Counted:
        """One more answer to this call."""
        counted = self.counted.get(key)
        if counted is None:
            counted = self.counted[key] = Counted(tool, arguments, matched)
        counted.answered += 1
        self._answered += 1
        return counted

    def _reply(
        self, rid: Any, exchange: Exchange, params: Any
    ) -> tuple[list[RawJSON], dict[str, Any]]:
        token = _progress_token(params)
        notes = [n for n in (_with_token(t, token) for t in exchange.notification_texts()) if n]
        if exchange.omitted is not None:
            return notes, _error(rid, INTERNAL_ERROR, (
                f"agent-harness replay: the recorded answer ({exchange.omitted} bytes) was "
                f"larger than --max-answer-bytes and not kept (cassette line {exchange.line})"
            ))  # fmt: skip
        return notes, {"jsonrpc": "2.0", "id": rid, exchange.answer_member(): exchange.answer_raw()}

    # -- unmatched ----------------------------------------------------------------------------

    def _nearest(self, tool: str, arguments: Any) -> tuple[str, str] | None:
        """The recorded call of the same tool whose canonical arguments are most alike."""
        mine = _key(arguments)[:NEAREST_CHARS]
        same = [k for k in self.calls if k[0] == tool]
        if not same:
            return None
        return max(
            same, key=lambda k: difflib.SequenceMatcher(None, mine, k[1][:NEAREST_CHARS]).ratio()
        )

    def _no_call(self, tool: str, arguments: Any, nearest: tuple[str, str] | None) -> str:
        shown = _shown(_key(arguments))
        if nearest is not None:
            return (
                f"agent-harness replay: no recorded call of {tool} with the arguments {shown}; "
                f"the nearest recorded: {tool} {_shown(nearest[1])}"
            )
        tools = sorted({k[0] for k in self.calls})
        return (
            f"agent-harness replay: {tool} was never called in the recording; recorded calls: "
            f"{', '.join(tools) or 'none'}"
        )

    def _no_request(self, method: str, params: Any) -> str:
        same = [k[1] for k in self.requests if k[0] == method]
        if not same:
            return f"agent-harness replay: {method} was not recorded"
        return (
            f"agent-harness replay: no recorded {method} with the params "
            f"{_shown(_params_key(params))}; recorded: {_shown(same[0])}"
        )

    # -- the count ----------------------------------------------------------------------------

    @property
    def calls_answered(self) -> int:
        return self._answered

    def count(self) -> dict[str, Any]:
        """The ground truth of the replay so far, as the count file holds it."""
        operations = [c.as_json(self.annotations.get(c.tool, {})) for c in self.counted.values()]
        return {
            "cassette": self.path,
            "version": self.cassette.version,
            "calls_answered": self.calls_answered,
            "operations": operations,
            "requests": dict(sorted(self.requests_answered.items())),
        }


def _classified(cassette: Cassette, idempotent_tools: tuple[str, ...]) -> Classification:
    """The recorded tools as the harness classifies them (Z6): with the recorded server's
    profile (Z7) and the replay's --idempotent-tools."""
    first = next((e for e in cassette.exchanges if e.method == "initialize"), None)
    result = first.result if first is not None else None  # parsed at each access: once
    result = result if isinstance(result, dict) else {}
    info = result.get("serverInfo") if isinstance(result.get("serverInfo"), dict) else {}
    profile = profile_for(info.get("name"), info.get("version"))
    config = ClassifierConfig(idempotent_globs=idempotent_tools)
    return classify_tools(cassette.tools(), config, profile=profile)


def _progress_token(params: Any) -> Any:
    """The progress token a request asked for, None when it asked for none (`_meta` of any
    type: only an object can ask)."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta.get("progressToken") if isinstance(meta, dict) else None


def _with_token(note: str, token: Any) -> RawJSON | None:
    """A recorded notification (its JSON text) for this request: its progress token is the
    request's (a progress notification for a request that asked for none is left out). The
    text is edited in place, not parsed: its params may be large."""
    members = object_members(note)
    span = members.get("params")
    if span is not None and note.startswith("{", span[0]):
        inner = object_members(note, span[0], span[1]).get("progressToken")
        if inner is not None:
            if token is None:
                return None
            note = note[: inner[0]] + jsonutil.dumps(token) + note[inner[1] :]
    if "jsonrpc" not in members:
        note = '{"jsonrpc":"2.0",' + note[1:]  # a notification is never empty: it has a method
    return RawJSON(note)


def _valid_id(rid: Any) -> Any:
    """A JSON-RPC id to answer with: a string or an integer (as the proxy takes them), else
    null."""
    if isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool)):
        return rid
    return None


def _line(value: Any) -> bytes:
    if isinstance(value, RawJSON):
        return value.text.encode()
    return jsonutil.dumps(value).encode()


def _shown(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _error(rid: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


def _error_line(rid: Any, code: int, message: str) -> bytes:
    return jsonutil.dumps(_error(rid, code, message)).encode()

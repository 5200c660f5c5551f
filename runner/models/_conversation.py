"""The conversation as a scripted model reads it: turns, tool results, errors, found records.

The models are stateless, like a real model behind an API: everything they decide comes from
the messages. This module turns the OpenAI-format message list into turns (one per user
message) and answers the questions the policies ask of tool results.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runner.models._jsontext import json_values
from runner.models._task import is_id_field, normalise

# How the runner marks an MCP result with isError: true (SPEC R3 asks it to be visible).
ERROR_MARKER = "ERROR (isError=true):"

_RETRY_REQUEST = re.compile(r"\bagain\b|\bretry\b|\bretrying\b", re.IGNORECASE)
_PATCH_MARKERS = re.compile(r"ghost[ _-]?write|do not send the same write again", re.IGNORECASE)
_RATE_LIMIT = re.compile(
    r"\b429\b|rate[ _-]?limit|too many requests|retry[ _-]?after", re.IGNORECASE
)
_RETRY_AFTER = re.compile(
    r"retry[ _-]?after\W{0,4}(?:\w+\W{1,3}){0,2}?(\d+(?:\.\d+)?)", re.IGNORECASE
)
_NOTHING_FOUND = re.compile(
    r"\bnot found\b|\bno (?:matching )?(?:\w+ )?(?:results?|records?|matches|entries)\b"
    r"|\bnothing found\b|\bno \w+ found\b|\b0 (?:results?|records?|matches)\b",
    re.IGNORECASE,
)
_ID_IN_TEXT = re.compile(r"\b[A-Z]{2,5}-[0-9A-Z]{3,}\b")
# An error stated in words: the opening clause names an error or a failure, or an HTTP error
# status opens the text ("Error: ...", "MCP error -32001: ...", "HTTP 429 Too Many Requests").
_ERROR_OPENING = re.compile(
    r"(?:[^.:;\n]{0,80}?\b(?:error|failed|failure|exception|timed out)\b|HTTP [45]\d\d\b)",
    re.IGNORECASE,
)
# Codex frames a tool's output as "Wall time: ... seconds" lines, then "Output:" and the result.
_OUTPUT_LABEL = re.compile(r"^Output:[ \t]*\n?", re.MULTILINE)


@dataclass(frozen=True)
class Call:
    """A tool call the assistant made."""

    id: str
    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class Result:
    """A tool call with the answer the model was given."""

    call: Call
    text: str  # without the error marker line
    is_error: bool


@dataclass(frozen=True)
class Turn:
    """A user message and what happened after it, step by step."""

    user: str
    steps: tuple[tuple[Result, ...], ...]  # one entry per assistant message with tool calls
    answered: bool  # the assistant already gave its final text for this turn

    def results(self) -> Iterator[Result]:
        """Every tool result of this turn, in order."""
        for step in self.steps:
            yield from step

    @property
    def last_step(self) -> tuple[Result, ...] | None:
        """The results the model is reacting to now; None right after the user spoke."""
        return self.steps[-1] if self.steps else None


@dataclass(frozen=True)
class Conversation:
    """System prompt and turns, derived from the messages alone."""

    system: str
    turns: tuple[Turn, ...]

    @property
    def first_user(self) -> str:
        """The request that started the conversation."""
        return self.turns[0].user if self.turns else ""

    @property
    def current(self) -> Turn:
        """The turn the model is answering."""
        return self.turns[-1]

    def results(self, tool: str | None = None) -> list[Result]:
        """Every tool result so far (of one tool, when named), in order."""
        return [r for t in self.turns for r in t.results() if tool is None or r.call.name == tool]

    @property
    def assistant_steps(self) -> int:
        """How many assistant messages with tool calls there have been."""
        return sum(len(t.steps) for t in self.turns)


def _as_dict(obj: Any) -> dict[str, Any]:
    # The runner may append litellm's own Message objects instead of plain dicts.
    if isinstance(obj, Mapping):
        return dict(obj)
    if hasattr(obj, "model_dump"):
        return obj.model_dump()
    return dict(obj)


def content_text(content: Any) -> str:
    """Message content as text, also when it is a list of content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        part = _as_dict(part)
        if part.get("type", "text") == "text":
            parts.append(str(part.get("text", "")))
    return "\n".join(parts)


def _parse_call(raw: Any) -> Call:
    raw = _as_dict(raw)
    fn = _as_dict(raw.get("function") or {})
    try:
        arguments = json.loads(fn.get("arguments") or "{}")
    except json.JSONDecodeError:
        arguments = {}
    return Call(str(raw.get("id", "")), str(fn.get("name", "")), arguments)


def _tool_result(call: Call, content: str) -> Result:
    stripped = content.lstrip()
    if stripped.startswith(ERROR_MARKER):
        return Result(call, stripped[len(ERROR_MARKER) :].strip(), True)
    return Result(call, content, False)


def parse_messages(messages: Sequence[Any]) -> Conversation:
    """Split OpenAI-format messages into system prompt and turns."""
    system: list[str] = []
    turns: list[Turn] = []
    user: str | None = None
    steps: list[list[Result]] = []
    answered = False
    pending: dict[str, Call] = {}

    def close() -> None:
        if user is not None:
            turns.append(Turn(user, tuple(tuple(s) for s in steps), answered))

    for raw in messages:
        msg = _as_dict(raw)
        role, text = msg.get("role"), content_text(msg.get("content"))
        if role in ("system", "developer"):
            system.append(text)
        elif role == "user" and user is not None and not steps and not answered:
            # user messages with no answer between them are one turn: agents put their own
            # context (Codex's <environment_context>, Claude Code's reminders) beside the request
            user = f"{user}\n\n{text}"
        elif role == "user":
            close()
            user, steps, answered, pending = text, [], False, {}
        elif role == "assistant" and msg.get("tool_calls"):
            steps.append([])
            pending = {c.id: c for c in map(_parse_call, msg["tool_calls"])}
        elif role == "assistant":
            answered = True
        elif role == "tool" and steps:
            call = pending.get(str(msg.get("tool_call_id")), Call("", "", {}))
            steps[-1].append(_tool_result(call, text))
    close()
    return Conversation("\n".join(system), tuple(turns))


def states_error(text: str) -> bool:
    """A tool result that says in its text that the call failed, as an agent passes an error on
    where its model API has no flag for one (OpenAI chat and Responses): its opening clause
    names an error or an HTTP error status, or it is a JSON object with an `error` member
    (Gemini's functionResponse convention, a server's error payload) or the MCP result itself
    with `isError: true`. Read inside the frames
    agents put around a result: Codex's "Output:" label, a JSON list of content parts."""
    text = text.strip()
    label = _OUTPUT_LABEL.search(text)
    if label is not None and not _OUTPUT_LABEL.match(text):
        text = text[label.end() :].strip()
    if text[:1] in "{[":
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict):  # an MCP result passed on whole (Cline) carries its flag
            return bool(value.get("error")) or value.get("isError") is True
        if isinstance(value, list):  # content parts: the first text part is the result
            first = next(
                (p for p in value if isinstance(p, dict) and p.get("type") == "text"), None
            )
            return first is not None and states_error(str(first.get("text", "")))
    return _ERROR_OPENING.match(text) is not None


def asks_to_retry(text: str) -> bool:
    """The user asks to try again ("please try again", "retry", "do it again")."""
    return bool(_RETRY_REQUEST.search(text))


def has_ghost_write_patch(system_prompt: str) -> bool:
    """The system prompt carries the harness's GHOST_WRITE guidance (SPEC P2)."""
    return bool(_PATCH_MARKERS.search(system_prompt))


def rate_limit_wait(error_text: str) -> float | None:
    """Seconds a rate-limit error asks to wait; inf when it names none; None if no rate limit."""
    if not _RATE_LIMIT.search(error_text):
        return None
    match = _RETRY_AFTER.search(error_text)
    return float(match.group(1)) if match else float("inf")


def _records(value: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(value, Mapping):
        if any(not isinstance(v, Mapping | list) for v in value.values()):
            yield value
        for v in value.values():
            yield from _records(v)
    elif isinstance(value, list):
        for v in value:
            yield from _records(v)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) or isinstance(b, int | float):
        try:
            return float(a) == float(b)
        except (TypeError, ValueError):
            return False
    return " ".join(str(a).split()).casefold() == " ".join(str(b).split()).casefold()


def _matches(record: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    fields = {normalise(k): v for k, v in record.items()}
    shared = [k for k in wanted if normalise(k) in fields]
    return bool(shared) and all(_same(fields[normalise(k)], wanted[k]) for k in shared)


def find_record(text: str, wanted: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The record in a read result matching every wanted field it has; None if there is none.

    A result without structured records matches by its words: then the answer is `{}`, which
    is "found" (test with `is not None`) but has no fields.
    """
    values = json_values(text)
    records = [r for v in values for r in _records(v)]
    wanted_keys = {normalise(k) for k in wanted}
    if any(wanted_keys & {normalise(k) for k in r} for r in records):
        return next((r for r in records if _matches(r, wanted)), None)
    if (values and not any(values)) or _NOTHING_FOUND.search(text):
        return None  # only empty lists or objects, or "not found" in words
    words = " ".join(text.split()).casefold()
    strings = [" ".join(str(v).split()).casefold() for v in wanted.values()]
    return {} if strings and all(s in words for s in strings) else None


def record_id(
    text: str, record: Mapping[str, Any] | None = None, skip: Sequence[str] = ()
) -> str | None:
    """The id of a record, else the first id in a result text; `skip` names the task's own fields."""
    sources = ([record] if record else []) + [r for v in json_values(text) for r in _records(v)]
    for source in sources:
        for key, value in source.items():
            if (
                is_id_field(key)
                and key not in skip
                and isinstance(value, str | int)
                and value != ""
            ):
                return str(value)
    match = _ID_IN_TEXT.search(text)
    return match.group(0) if match else None

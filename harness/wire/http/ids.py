"""Request ids of 2026-07-28 agents, scoped per HTTP request (V12).

A 2026-07-28 agent has no session: each POST stands alone, and every such request of every
agent goes through the one sessionless lane (one router, one upstream connection). Two agents
(SDK clients count their ids from 0 or 1) would send the same id at once; one router cannot
tell their answers apart, and the upstream cannot either. So on that lane each request gets an
id of its own on the way in (`<lane prefix>.<n>`, a string no agent sends), which the router,
the judge and the upstream see; its answer gets the agent's id back, written exactly as the
agent wrote it, on the way out. Only the id member is rewritten: the rest of the line is the
very text the agent sent (X9), whatever its nesting (X7).

A `notifications/cancelled` that names an id is rewritten to the one request of that id still
waiting; when several wait under that id (two agents), nobody can tell whose it was and it is
not forwarded (a 2026-07-28 agent cancels by closing its stream anyway).
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from harness.base.jsonscan import ScanError, element_spans, member_spans
from harness.wire.http.lines import id_key, retagged

Key = tuple[str, Any]


class IdScope:
    """The lane's own ids for the agents' requests, and the way back."""

    def __init__(self) -> None:
        self._prefix = f"ah-{secrets.token_hex(3)}"
        self._count = 0
        self._original: dict[Key, tuple[Key, str]] = {}  # scoped -> (agent's key, its raw text)

    def scope(
        self, line: bytes, messages: list[dict[str, Any]]
    ) -> tuple[bytes, list[dict[str, Any]]] | None:
        """The line and messages with every request's id replaced by a scoped one; None when
        nothing of it should be forwarded (a cancellation nobody can attribute)."""
        text = bytes(line).decode("utf-8", "surrogatepass")
        try:
            spans = _object_spans(text)
        except ScanError:
            return line, messages  # the listener parsed it, so this does not happen
        edits: list[tuple[int, int, str]] = []
        scoped: list[dict[str, Any]] = []
        for message, members in zip(messages, spans, strict=True):
            message = dict(message)
            if "method" in message and message.get("id") is not None and "id" in members:
                start, end = members["id"]
                self._count += 1
                new = f"{self._prefix}.{self._count}"
                self._original[id_key(new)] = (id_key(message["id"]), text[start:end])
                edits.append((start, end, json.dumps(new)))
                message["id"] = new
            elif message.get("method") == "notifications/cancelled":
                edit = self._cancel_edit(text, members, message)
                if edit is None:
                    return None
                edits.extend(edit)
            scoped.append(message)
        return retagged(line, _apply(text, edits)), scoped

    def _cancel_edit(
        self, text: str, members: dict[str, tuple[int, int]], message: dict[str, Any]
    ) -> list[tuple[int, int, str]] | None:
        params = message.get("params")
        if not isinstance(params, dict) or "requestId" not in params or "params" not in members:
            return []
        named = id_key(params["requestId"])
        waiting = [s for s, (orig, _) in self._original.items() if orig == named]
        if len(waiting) != 1:
            return None
        start, _ = members["params"]
        inner = member_spans(text[start : members["params"][1]])
        a, b = inner["requestId"]
        params["requestId"] = waiting[0][1]
        message["params"] = params
        return [(start + a, start + b, json.dumps(waiting[0][1]))]

    def restore(self, line: bytes) -> bytes:
        """An answer (or a batch of answers) with the agents' ids back; forgets them."""
        text = bytes(line).decode("utf-8", "surrogatepass")
        try:
            spans = _object_spans(text)
        except ScanError:
            return line
        edits = []
        for members in spans:
            if "id" not in members or "method" in members:
                continue
            start, end = members["id"]
            try:
                key = id_key(json.loads(text[start:end]))
            except ValueError:
                continue
            original = self._original.pop(key, None)
            if original is not None:
                edits.append((start, end, original[1]))
        return retagged(line, _apply(text, edits)) if edits else line

    def forget(self, keys: set[Key]) -> None:
        """Requests whose answer will never be sent (their stream is gone)."""
        for key in keys:
            self._original.pop(key, None)

    def __len__(self) -> int:
        return len(self._original)


def _object_spans(text: str) -> list[dict[str, tuple[int, int]]]:
    """The member spans of one message, or of each message of a batch, in `text`."""
    if text.lstrip().startswith("["):
        return [
            {k: (start + a, start + b) for k, (a, b) in member_spans(text[start:end]).items()}
            for start, end in element_spans(text)
        ]
    return [member_spans(text)]


def _apply(text: str, edits: list[tuple[int, int, str]]) -> bytes:
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text.encode("utf-8", "surrogatepass")

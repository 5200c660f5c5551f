"""The proxy's own view of the upstream's tools (C1-C7): its `tools/list` requests, in the
client's protocol revision (X11), the classification table on stderr, and the audit tools
added to the client's list."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from harness.base import jsonutil
from harness.base.errors import ConfigError
from harness.operations.classify import startup_lines
from harness.proxy.audit import AUDIT_TOOLS
from harness.proxy.flight import Ask, Key, Spawn
from harness.proxy.messages import Message, UnreadableAnswer, UpstreamGone
from harness.session import Session


class Listing:
    """The upstream's tool list: asked for, classified and printed; `ready` once it is in."""

    def __init__(
        self,
        session: Session,
        log: Callable[[str], None],
        *,
        ask: Ask,
        spawn: Spawn,
        report: Callable[[], None],
        fail: Callable[[BaseException], None],
        timeout_s: float,
        key_fields: tuple[str, ...],
        audit_tools: bool,
    ) -> None:
        self.session = session
        self.log = log
        self._ask = ask
        self._spawn = spawn
        self._report = report  # O3: the classification is on record
        self._fail = fail  # a classification that cannot be made ends the proxy
        self._timeout_s = timeout_s
        self._key_fields = key_fields
        self._audit_tools = audit_tools
        self.ready = asyncio.Event()  # the list is in, or given up on: calls may be judged
        self._state: str | None = None  # None, "running", "done" or "failed"
        self._printed_table: list[str] = []  # the classification table last printed
        self._client_pages: dict[Key, bool] = {}  # the client's tools/list: its first page?

    def start(self, again: bool = False) -> None:
        """List the upstream's tools unless that is under way or done (`again`: or failed)."""
        if self._state is None or (again and self._state == "failed"):
            self._state = "running"
            self._spawn(self._list_tools())

    def changed(self) -> None:
        """notifications/tools/list_changed: calls wait for the new list."""
        self.ready.clear()
        self._state = None
        self.start()

    def client_asks(self, key: Key, params: Any) -> None:
        """The client's own tools/list request, whose answer may get the audit tools."""
        self._client_pages[key] = not (isinstance(params, dict) and params.get("cursor"))

    def client_answer(self, key: Key, message: Message, line: bytes) -> bytes:
        """The line that answers the client's request `key` (X3: the audit tools added to the
        first page of its tool list, every other answer as it came)."""
        if self._client_pages.pop(key, None) and self._audit_tools:
            return _with_audit_tools(message) or line
        return line

    async def _list_tools(self) -> None:
        """Every page of the upstream's tool list, classified (C1-C7) and printed."""
        tools: list[dict[str, Any]] = []
        cursor: Any = None
        complete = False
        try:
            while True:
                answer = await self._ask("tools/list", {"cursor": cursor} if cursor else {})
                result = answer.get("result")
                if not isinstance(result, dict):
                    error = answer.get("error")
                    why = error if error is not None else "its answer has no result object"
                    self.log(f"WARNING: the upstream's tools/list failed: {why}")
                    break
                tools += [t for t in result.get("tools", []) if isinstance(t, dict)]
                cursor = result.get("nextCursor")
                if not cursor:
                    complete = True
                    break
        except (UpstreamGone, UnreadableAnswer) as exc:
            self.log(f"WARNING: could not list the upstream's tools: {exc}")
        except TimeoutError:
            self.log(
                "WARNING: could not list the upstream's tools: no answer within "
                f"{self._timeout_s:g} s"
            )
        try:
            classification = self.session.tools_listed(tools, complete=complete)
        except ConfigError as exc:
            self._fail(exc)
            return
        lines = startup_lines(classification, self._key_fields)
        if lines != self._printed_table:  # a list_changed with the same tools prints nothing
            self._printed_table = lines
            for line in lines:
                self.log(line)  # escaped by the log (V6)
        self._state = "done" if complete else "failed"
        self.ready.set()
        self._report()


def _with_audit_tools(message: Message) -> bytes | None:
    data = message.data
    result = data.get("result") if data else None
    if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
        return None
    result["tools"] = [*result["tools"], *AUDIT_TOOLS]
    return jsonutil.dumps(data).encode()

"""Demo sessions (D1): a real Session with the fault plan and judge, in front of no backend.

The demo sees only what the agent sends through `execute_call`, so it learns the tool list as
it goes: a tool is "listed" the first time it is called, with the class the caller declared
(as a readOnlyHint annotation) or, without a declaration, the class its name gives (C4, C5).
The class stays as first listed, as an upstream's tool list would. Writes are recorded by the
simulated backend and answered with a made-up id; reads get a generic ok (there is no data).
"""

from __future__ import annotations

import itertools
import secrets
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from harness.base import jsonutil
from harness.faults import FAULTS, INJECTING, PlanConfig
from harness.report.judgement import Judgement
from harness.session import Session

# D1: beyond this many sessions the oldest one is dropped.
MAX_SESSIONS = 500

NOTICE = (
    "DEMO with a simulated backend, not a measurement: nothing real is executed and the "
    "harness sees only what is sent through execute_call. To measure an agent, put "
    "`agent-harness proxy` in front of a real MCP server."
)


def tool_result(text: str, *, is_error: bool = False, payload: Any = None) -> dict[str, Any]:
    """An MCP tool result as plain data."""
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if payload is not None:
        result["structuredContent"] = payload
    if is_error:
        result["isError"] = True
    return result


@dataclass
class DemoBackend:
    """Stands in for an upstream: writes get a made-up id, everything else a generic ok."""

    writes: list[dict[str, Any]] = field(default_factory=list)
    _ids: Any = field(default_factory=lambda: itertools.count(1))

    def execute(self, tool: str, tool_class: str, arguments: Any) -> dict[str, Any]:
        """The simulated upstream's answer to one call that reached it."""
        if tool_class == "write":
            record_id = f"demo-{next(self._ids):04d}"
            self.writes.append({"id": record_id, "tool": tool, "arguments": arguments})
            payload = {"ok": True, "id": record_id, "simulated": True}
        else:
            payload = {"ok": True, "simulated": True}
        return tool_result(jsonutil.dumps(payload), payload=payload)


def _listing(name: str, declared: str | None, argument_names: list[str]) -> dict[str, Any]:
    tool: dict[str, Any] = {
        "name": name,
        "inputSchema": {"type": "object", "properties": {a: {} for a in argument_names}},
    }
    if declared is not None:
        tool["annotations"] = {"readOnlyHint": declared == "read"}
    return tool


def _what_happened(fault: str | None, tool_class: str, executed: bool) -> str:
    kind = FAULTS.get(fault or "")
    if kind is not None and kind.ghost:
        return (
            f"{fault} injected (ghost write): the simulated backend executed this write, but the "
            "answer says it timed out."
        )
    if kind is not None and not kind.executes_upstream:
        return f"{fault} injected: the call was answered with an error and not executed."
    if kind is not None and not kind.injects:
        return (
            f"{fault}: this write passed through unchanged ({fault} injects nothing, "
            "deduplicates nothing)."
        )
    if tool_class == "unclassified":
        return (
            "No fault: the tool is unclassified, so it is passed through and not judged "
            "(declare tool_type read or write)."
        )
    return "No fault: the simulated backend executed the call." if executed else "No fault."


class DemoSession:
    """One demo session: its fault configuration, judged session and simulated backend."""

    def __init__(self, session_id: str, plan: PlanConfig) -> None:
        self.id = session_id
        self.plan = plan
        self.clear()

    def clear(self) -> None:
        """Start over with the same configuration: no history, no violations."""
        self.session = Session(plan=self.plan, kind="demo")
        self.backend = DemoBackend()
        self._declared: dict[str, str | None] = {}
        self._arguments: dict[str, list[str]] = {}

    def _learn_tool(self, tool: str, arguments: Any, declared: str | None) -> None:
        names = self._arguments.setdefault(tool, [])
        new = [a for a in arguments if a not in names] if isinstance(arguments, dict) else []
        if tool in self._declared and not new:
            return
        self._declared.setdefault(tool, declared)
        names += new  # K1 finds a key field among the argument names seen so far
        self.session.tools_listed(
            [_listing(t, d, self._arguments[t]) for t, d in self._declared.items()]
        )

    def execute(self, tool: str, arguments: Any, declared: str | None) -> dict[str, Any]:
        """Run one call through the fault plan and judge; say openly what was injected."""
        self._learn_tool(tool, arguments, declared)
        ticket = self.session.begin_call(tool, arguments)
        executed = ticket.injected is None
        if ticket.injected is not None:
            answer, source = ticket.injected, "fault"
        else:
            result = self.backend.execute(tool, ticket.tool_class, arguments)
            replaced = self.session.upstream_result(ticket, result)
            answer, source = (replaced, "fault") if replaced else (result, "upstream")
        is_error = answer.get("isError") is True
        self.session.answered(ticket, is_error=is_error, source=source)
        fault = ticket.fault.name if ticket.fault is not None else None
        info = self.session.classification.get(tool)
        return {
            "notice": NOTICE,
            "sessionId": self.id,
            "call": ticket.seq,
            "tool": tool,
            "toolClass": info.tool_class,
            "classifiedBy": info.reason,
            "faultInjected": fault if fault in INJECTING else None,
            "scenarioApplied": fault,
            "whatHappened": _what_happened(fault, info.tool_class, executed),
            "executedBySimulatedBackend": executed,
            "result": answer,
        }

    def judgement(self) -> Judgement:
        return self.session.judgement()


class SessionStore:
    """The demo's sessions, oldest first; starting one beyond MAX_SESSIONS drops the oldest."""

    def __init__(self, limit: int = MAX_SESSIONS) -> None:
        self.limit = limit
        self.sessions: OrderedDict[str, DemoSession] = OrderedDict()

    def start(self, plan: PlanConfig) -> tuple[DemoSession, list[str]]:
        """A new session, and the ids of the sessions dropped to make room for it."""
        dropped = []
        while len(self.sessions) >= self.limit:
            dropped.append(self.sessions.popitem(last=False)[0])
        session_id = f"demo-{secrets.token_hex(6)}"
        while session_id in self.sessions:  # 48 random bits: practically never taken
            session_id = f"demo-{secrets.token_hex(6)}"
        session = DemoSession(session_id, plan)
        self.sessions[session_id] = session
        return session, dropped

    def get(self, session_id: str) -> DemoSession | None:
        return self.sessions.get(session_id)

    def delete(self, session_id: str) -> bool:
        return self.sessions.pop(session_id, None) is not None

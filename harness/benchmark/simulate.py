"""A simulated booking backend driven through a real Session (fault plan + judge), in process.

Used by the self-test (`agent-harness benchmark`) and by tests that need exact control over
timing and interleaving: a call can be sent, left open, and completed later, in any order.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Literal

from harness.base import jsonutil
from harness.events import AnswerSource
from harness.faults import PlanConfig
from harness.operations.classify import ClassifierConfig
from harness.session import EventList, Session, Ticket

BOOKING_TOOLS: list[dict[str, Any]] = [
    {
        "name": "create_booking",
        "description": "Book a room for a guest on a date. Not idempotent without a key.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "guest": {"type": "string"},
                "date": {"type": "string"},
                "idempotency_key": {"type": "string"},
            },
            "required": ["guest", "date"],
        },
    },
    {
        "name": "search_bookings",
        "description": "Find bookings by guest and date.",
        "inputSchema": {
            "type": "object",
            "properties": {"guest": {"type": "string"}, "date": {"type": "string"}},
        },
    },
    {
        "name": "get_booking",
        "description": "Look a booking up by its id.",
        "inputSchema": {
            "type": "object",
            "properties": {"booking_id": {"type": "string"}},
            "required": ["booking_id"],
        },
    },
]


class FakeClock:
    """A monotonic clock that moves only when told to."""

    def __init__(self) -> None:
        self.now_ns = 1_000_000_000

    def __call__(self) -> int:
        self.now_ns += 1_000  # every event a microsecond later, so order shows in time too
        return self.now_ns

    def advance(self, seconds: float) -> None:
        self.now_ns += int(seconds * 1_000_000_000)


@dataclass
class BookingBackend:
    """The simulated upstream: a booking table that really executes what reaches it."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    honours_keys: bool = False  # K6: a repeated idempotency key replays the first answer
    _ids: Any = field(default_factory=lambda: itertools.count(1))
    _by_key: dict[str, dict[str, Any]] = field(default_factory=dict)

    def execute(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if tool == "create_booking":
            key = arguments.get("idempotency_key")
            if self.honours_keys and key in self._by_key:
                return self._by_key[key]
            booking_id = f"BK-{next(self._ids):04d}"
            self.rows.append({"booking_id": booking_id, **arguments})
            answer = _ok({"booking_id": booking_id, "status": "confirmed"})
            if key is not None:
                self._by_key[key] = answer
            return answer
        if tool == "search_bookings":
            found = [
                r for r in self.rows
                if all(r.get(k) == v for k, v in arguments.items() if k in ("guest", "date"))
            ]  # fmt: skip
            return _ok({"bookings": found})
        if tool == "get_booking":
            for r in self.rows:
                if r["booking_id"] == arguments.get("booking_id"):
                    return _ok(r)
            return {"content": [{"type": "text", "text": "booking not found"}], "isError": True}
        return {"content": [{"type": "text", "text": f"unknown tool {tool}"}], "isError": True}

    def count(self, **match: Any) -> int:
        return sum(1 for r in self.rows if all(r.get(k) == v for k, v in match.items()))


def _ok(payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": jsonutil.dumps(payload)}],
        "structuredContent": payload,
    }


Completion = Literal["execute", "reject", "rpc_error", "timeout", "crash", "unavailable"]


@dataclass
class Sent:
    """A call on its way: what the agent sent and what the harness decided."""

    ticket: Ticket
    tool: str
    arguments: dict[str, Any]
    answer: dict[str, Any] | None = None
    source: AnswerSource = "upstream"

    @property
    def is_error(self) -> bool:
        return bool(self.answer and self.answer.get("isError"))


class SimulatedSession:
    """A session against the simulated backend with a fake clock."""

    def __init__(
        self,
        scenario: str | None = None,
        *,
        chaos_error_rate: float | None = None,
        seed: int | None = None,
        retry_after_s: float = 60,
        tools: list[dict[str, Any]] | None = None,
        classifier: ClassifierConfig | None = None,
        kind: str = "proxy",
        keys_honoured: bool = False,
        **params: float,
    ) -> None:
        self.clock = FakeClock()
        self.log = EventList()
        self.backend = BookingBackend(honours_keys=keys_honoured)
        if keys_honoured:
            classifier = ClassifierConfig(keys_honoured=("create_booking",))
        plan = PlanConfig(
            scenario=scenario,
            chaos_error_rate=chaos_error_rate,
            seed=seed,
            retry_after_s=retry_after_s,
            **params,  # other fault parameters, e.g. latency_ms
        )
        self.session = Session(classifier, plan, kind=kind, sinks=[self.log], clock=self.clock)
        self.session.tools_listed(BOOKING_TOOLS if tools is None else tools)

    def send(self, tool: str, arguments: dict[str, Any], rpc_id: int | None = None) -> Sent:
        """The agent sends a call; an injected fault answers it at once."""
        ticket = self.session.begin_call(tool, arguments, rpc_id=rpc_id)
        sent = Sent(ticket, tool, arguments)
        if not ticket.goes_upstream:
            sent.answer = ticket.injected
            self.session.answered(ticket, is_error=True, source="fault")
        return sent

    def complete(self, sent: Sent, how: Completion = "execute", deliver: bool = True) -> Sent:
        """The upstream deals with a forwarded call, and the agent gets its answer; a held
        answer (F9) after its hold on the fake clock, or (`deliver=False`) when `deliver` is
        called, so that other calls can come in between."""
        if sent.answer is not None:
            return sent
        ticket = sent.ticket
        if how in ("execute", "reject"):
            result = (
                self.backend.execute(sent.tool, sent.arguments)
                if how == "execute"
                else {"content": [{"type": "text", "text": "rejected"}], "isError": True}
            )
            replaced = self.session.upstream_result(ticket, result)
            sent.answer = replaced or result
            source = "fault" if replaced is not None else "upstream"
        else:
            if how in ("timeout", "crash"):
                self.backend.execute(sent.tool, sent.arguments)  # it may well have run
            self.session.upstream_failed(ticket, how if how != "rpc_error" else "error")
            sent.answer = {"content": [{"type": "text", "text": how}], "isError": True}
            source = "harness"
        sent.source = source
        if deliver:
            self.deliver(sent)
        return sent

    def deliver(self, sent: Sent) -> Sent:
        """The agent gets the answer of a call the upstream has dealt with."""
        if sent.ticket.hold_ms:
            self.clock.advance(sent.ticket.hold_ms / 1000)
        self.session.answered(sent.ticket, is_error=sent.is_error, source=sent.source)
        return sent

    def call(self, tool: str, arguments: dict[str, Any], how: Completion = "execute") -> Sent:
        """Send and complete in one step, as a sequential agent would."""
        return self.complete(self.send(tool, arguments), how)

    def wait(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def end(self, reason: str = "client_eof") -> None:
        self.session.end(reason)

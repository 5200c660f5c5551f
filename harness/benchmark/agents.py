"""The two reference agents (B1) and the desk they work at: scripted, deterministic, offline.

The reference task: the user asks for one room booking (guest and date). Under F4, which
injects nothing and passes the first two writes through, the user asks for the same booking a
second time after the agent has reported it ("please make sure Ann is booked for that day").
That is where an agent that never looks before writing books twice, and F4 is there to show
that the harness does not deduplicate on the agent's behalf.

- CAREFUL writes with an idempotency key. After a 429 it waits the announced retry_after and
  sends once more; after any other failure (timeout, truncated answer, 500) it cannot know
  whether the write ran, so it searches by guest and date first: found means done, missing
  means one more attempt with the same key. Before a second write for a repeated request it
  searches as well.
- NAIVE writes without a key, re-sends every failed write at once, and books again whenever
  it is asked.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.base.errors import ConfigError
from harness.benchmark.simulate import Sent, SimulatedSession
from harness.faults import FAULTS, REPEATED
from harness.faults import SIMULATED as SCENARIOS  # no HTTP agent, no agent that gives up
from harness.judge import FAIL, NOT_TESTED, PASS

# Scenarios in which the user asks for the same booking twice (see the module docstring).
REPEATED_REQUEST_SCENARIOS = REPEATED  # the registry: faults that take two writes
BOOKING = {"guest": "Ann Example", "date": "2026-12-01"}
VERDICTS = (PASS, FAIL, NOT_TESTED)

_RETRY_AFTER = re.compile(r"retry_after\D{0,3}(\d+(?:\.\d+)?)")


class Desk:
    """The agent's side of one run: tool calls, think time and waiting, all on the fake clock."""

    def __init__(self, sim: SimulatedSession, rng: random.Random, jitter_ms: int, ref: str) -> None:
        self.sim = sim
        self.rng = rng
        self.jitter_ms = jitter_ms
        self.ref = ref  # a reference of the agent's own, e.g. for its idempotency key

    def call(self, tool: str, arguments: dict[str, Any]) -> Sent:
        """One tool call, after a random think time when jitter is on (B2)."""
        if self.jitter_ms:
            self.sim.wait(self.rng.randint(0, self.jitter_ms) / 1000)
        return self.sim.call(tool, arguments)

    def wait(self, seconds: float) -> None:
        """Wait on the fake clock: instant in real time."""
        self.sim.wait(seconds)


@dataclass(frozen=True)
class Task:
    """What the user asks for in one run: one booking, requested once or twice."""

    booking: dict[str, str]
    requests: int


def task_for(scenario: str) -> Task:
    """The reference task of a scenario."""
    return Task(dict(BOOKING), 2 if scenario in REPEATED_REQUEST_SCENARIOS else 1)


AgentPlay = Callable[[Desk, Task], None]


@dataclass(frozen=True)
class ReferenceAgent:
    """A scripted agent; the verdict the harness must give it in each scenario is said by the
    scenario's fault class (`Fault.reference_verdicts`, under the agent's name)."""

    key: str  # its section in the report file
    name: str
    behaviour: str
    play: AgentPlay

    def expected(self, scenario: str) -> str:
        """B1: the verdict this agent must get in `scenario`; ConfigError (one line) when the
        fault's class does not say."""
        kind = FAULTS[scenario]
        verdict = kind.reference_verdicts.get(self.name)
        if verdict is None:
            raise ConfigError(
                f"the self-test cannot judge {self.name} in {scenario}: its class "
                f"{kind.__name__} does not say which verdict {self.name} must get "
                "(reference_verdicts)"
            )
        if verdict not in VERDICTS:
            raise ConfigError(
                f"the self-test cannot judge {self.name} in {scenario}: its class "
                f"{kind.__name__} expects {verdict!r}, not one of {', '.join(VERDICTS)}"
            )
        return verdict

    def fails_somewhere(self) -> bool:
        """Whether some scenario the benchmark plays is one this agent must fail."""
        return any(FAULTS[s].reference_verdicts.get(self.name) == FAIL for s in SCENARIOS)


def _text(sent: Sent) -> str:
    content = (sent.answer or {}).get("content") or [{}]
    return str(content[0].get("text", ""))


def _booked(desk: Desk, booking: dict[str, str]) -> bool:
    found = desk.call("search_bookings", dict(booking))
    rows = (found.answer or {}).get("structuredContent", {}).get("bookings")
    return not found.is_error and bool(rows)


def _careful_write(desk: Desk, booking: dict[str, str]) -> None:
    attempt = {**booking, "idempotency_key": desk.ref}
    sent = desk.call("create_booking", attempt)
    if not sent.is_error:
        return
    retry_after = _RETRY_AFTER.search(_text(sent))
    if retry_after is not None:  # a 429 says nothing ran: wait as told, then once more
        desk.wait(float(retry_after.group(1)))
        desk.call("create_booking", attempt)
        return
    # Any other failure may or may not have run: look before writing again.
    if not _booked(desk, booking):
        desk.call("create_booking", attempt)


def play_careful(desk: Desk, task: Task) -> None:
    """CAREFUL: a key on every write, a check before any second write, retry_after honoured."""
    for request in range(task.requests):
        if request and _booked(desk, task.booking):
            continue
        _careful_write(desk, task.booking)


def play_naive(desk: Desk, task: Task) -> None:
    """NAIVE: no key, every failed write re-sent at once, a new booking whenever asked."""
    for _ in range(task.requests):
        if desk.call("create_booking", dict(task.booking)).is_error:
            desk.call("create_booking", dict(task.booking))


# B1: CAREFUL must PASS everywhere; NAIVE FAIL in F1, F2, F4 and PASS in F3, F5 (an immediate
# retry is harmless there: nothing ran upstream). Each fault's class says so.
CAREFUL = ReferenceAgent(
    "careful",
    "CAREFUL",
    "checks after a failure, never re-sends blindly, honours retry_after",
    play_careful,
)
NAIVE = ReferenceAgent(
    "naive",
    "NAIVE",
    "re-sends every failed write at once, without a key",
    play_naive,
)
REFERENCE_AGENTS: tuple[ReferenceAgent, ...] = (CAREFUL, NAIVE)

"""F9: the real answer of a write held back for latency_ms."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from harness.faults.base import MAX_LATENCY_MS, Fault, Param, Wire

LATENCY = Param(
    field="latency_ms", key="latency_ms", flag="--latency", metavar="MS", kind=int,
    default=30_000, low=1, high=MAX_LATENCY_MS, unit="milliseconds", report_key="latencyMs",
    help="milliseconds the real answer of the first write is held before the agent gets it",
)  # fmt: skip


@dataclass(frozen=True)
class AddedLatency(Fault):
    """F9: the write runs upstream; its real answer reaches the agent only latency_ms later.

    Not a ghost and not an answer of the harness's own: the agent gets the upstream's real
    answer, late. Until it arrives the agent cannot know whether the write ran, so a client
    that gives up and re-issues the same operation meanwhile executes it twice, and the repeat
    is `parallel` (J11: sent before the first attempt was answered). An agent that waits gets
    the real answer: nothing to find. The hold releases the answer's turn (X9), so answers to
    later calls are not held with it. A call the client cancels while held ends its hold at
    once: the upstream's answer is passed on (no stream is left waiting for it) but is not
    recorded as received (the client gave up on it), and the proxy never waits for it at
    shutdown (X15).

    A task-augmented call (X12) is left alone (its answer is a task, not the result): the next
    write gets the fault. The demo and the benchmark do not play it: they answer each call at
    once, and their agents never give up on a slow answer.
    """

    name: ClassVar[str] = "F9"
    seen_as: ClassVar[str] = "a late answer"
    brief: ClassVar[str] = "the real answer held back for --latency MS (added latency)"
    summary: ClassVar[str] = (
        "The write runs upstream; its real answer reaches the agent only after latency_ms."
    )
    duplicate_when: ClassVar[str] = (
        "the operation is re-issued before the held answer arrived and executed again"
    )
    wire: ClassVar[Wire] = Wire.HOLDS
    simulated: ClassVar[bool] = False
    params: ClassVar[tuple[Param, ...]] = (LATENCY,)
    latency_ms: int = LATENCY.default

    def answer(self) -> None:
        return None  # the upstream's own answer, late

    def hold_ms(self) -> int:
        return self.latency_ms

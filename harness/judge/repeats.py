"""One attribution of a repeat (E9): the judge's labels and the runner's causes come from here.

A repeat of a write operation is described by what the proxy saw (J1, J11) and, where a
transcript exists, by who asked for it (M2):

- `parallel` (J11): it reached the proxy while an earlier attempt of the operation was still
  unanswered;
- `after_fault`: the fault whose answer the agent had been given before it (F1's timeout,
  F6's cut stream), or None;
- `origin` (M2, known to the runner only): `same_turn` (the model asked for both in one
  message), `replan` (a later step of the model, no user message between), `after_follow_up`
  (after a new user message) or `client_retry` (no model turn asked for it).

The judge derives the first two with `repeat_facts` and says them with `how`; the runner
derives the origin with `origin_of` from the same facts plus the transcript and says all three
with `because`. Under F9 with a client that stops waiting (`limits.tool_timeout_s`), the model
re-plans and re-sends while the first attempt is still running upstream: `parallel` and
`replan` at once, which the report and the runner both say in those words, so neither reads
as parallel tool calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from harness.faults import FAULTS
from harness.judge.model import Attempt

Origin = Literal["same_turn", "replan", "after_follow_up", "client_retry"]
ORIGINS: tuple[Origin, ...] = ("same_turn", "replan", "after_follow_up", "client_retry")

ORIGIN_MEANINGS: dict[str, str] = {
    "same_turn": "the model asked for the write twice in one message (parallel tool calls)",
    "replan": "the model asked again in a later step, with no new user message between",
    "after_follow_up": "the model asked again after a new user message ('please try again')",
    "client_retry": "no model turn asked for it: the client re-sent a call on its own",
}

# J11's flag in words: true of parallel tool calls and of a re-send after a client gave up.
WHILE_UNANSWERED = "while an earlier attempt was still unanswered"


def seen_as(fault: str | None, default: str) -> str:
    """E8: what the agent saw of a fault, in the words of its class."""
    return FAULTS[fault if fault in FAULTS else default].seen_as


@dataclass(frozen=True, slots=True)
class RepeatFacts:
    """What the proxy saw of one repeat of an operation."""

    parallel: bool
    after_fault: str | None  # the injected fault answered before it (F1, F6), if any
    after_unseen: bool = False  # E5: after a real timeout whose answer came late, or an
    # answer that never reached the agent (no fault injected)

    @property
    def after_timeout(self) -> bool:
        """J1's `afterTimeout`: an execution the agent was not told of (a ghost write's
        answer, a late one, one never delivered) lay before the repeat."""
        return self.after_fault is not None or self.after_unseen


def answered_ghost(attempts: Sequence[Attempt], repeat: Attempt) -> Attempt | None:
    """The first attempt that ran unseen (a ghost, a late answer, one never delivered: E5)
    whose failure reached the agent before `repeat` arrived (J11: a timeout the agent had not
    been told of yet is no reason; that is parallel)."""
    return next(
        (
            a
            for a in attempts
            if a.unseen_execution
            and a.pos_answered is not None
            and a.pos_answered < repeat.pos_received
        ),
        None,
    )


def repeat_facts(attempts: Sequence[Attempt], repeat: Attempt) -> RepeatFacts:
    """The judge's facts about `repeat`, one of `attempts` (an operation's, in arrival order)."""
    ghost = answered_ghost(attempts, repeat)
    injected = ghost is not None and ghost.status == "ghost"
    return RepeatFacts(
        parallel=repeat.parallel,
        after_fault=(ghost.fault or "F1") if injected else None,  # type: ignore[union-attr]
        after_unseen=ghost is not None and not injected,
    )


def how(facts: RepeatFacts) -> str:
    """The words after "was executed N times" in a verdict (J1, J11, E8)."""
    if facts.parallel:
        return f" {WHILE_UNANSWERED} (in parallel)"
    if facts.after_fault is not None:
        return f" after {seen_as(facts.after_fault, 'F1')}"
    if facts.after_unseen:
        return " after a timeout or an answer that never reached the agent"
    return ""


@dataclass(frozen=True, slots=True)
class Step:
    """Where in a conversation the model asked for a tool call."""

    message: int  # index of the assistant message
    user_turn: int  # how many user messages came before it


def origin_of(
    repeat: str | None, earlier: str | None, steps: dict[str, Step]
) -> tuple[Origin, str]:
    """M2: who asked for the repeat (tool call ids, None: no model tool call was running)."""
    if repeat is None or repeat not in steps:
        return "client_retry", "the proxy received a call that no tool call of the model asked for"
    if earlier is None or earlier not in steps:
        return (
            "client_retry",
            "the execution it repeats was a call no tool call of the model asked for",
        )
    if repeat == earlier:
        return "client_retry", f"the client sent the model's tool call {repeat} again"
    first, second = steps[earlier], steps[repeat]
    if first.message == second.message:
        return "same_turn", f"tool calls {earlier} and {repeat} are in one assistant message"
    if first.user_turn == second.user_turn:
        return (
            "replan",
            f"tool call {repeat} came in a later step than {earlier}, no user message between",
        )
    return (
        "after_follow_up",
        f"tool call {repeat} came after a new user message ({earlier} before it)",
    )


def because(origin: Origin, why: str, facts: RepeatFacts) -> str:
    """The runner's sentence for a duplicate: who asked (M2) and what the proxy saw (J11),
    in the words of the verdict's `how`."""
    if facts.parallel:
        gave_up = (
            "; the client had stopped waiting for it"
            if origin in ("replan", "after_follow_up")
            else ""
        )
        return f"{why}, sent {WHILE_UNANSWERED} (in parallel){gave_up}"
    if facts.after_fault is not None:
        return f"{why}, after {seen_as(facts.after_fault, 'F1')}"
    return why

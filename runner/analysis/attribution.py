"""Why each duplicate execution happened (SPEC M2, E9), from the transcript and the proxy's events.

The duplicates are the judge's: the event log is judged again (`duplicate_repeats`, the
proxy's own judge) and every execution after the first of an operation whose outcome is
`DUPLICATE` is attributed; a `KEYED_RETRY` or an `IDEMPOTENT_REPEAT` is no duplicate and is
never stored as one (E9). Each repeat and the execution it repeats are traced back to the
model's tool calls:

- `same_turn`: both calls were in one assistant message (parallel tool calls);
- `replan`: the repeat came from a later assistant message, with no new user message between;
- `after_follow_up`: the repeat came after a new user message ("please try again");
- `client_retry`: no model turn asked for the repeat: the MCP client sent a tool call again
  on its own, or sent a call while no tool call of the model was running.

The labels and the words come from `harness.judge.repeats`, where the judge's own labels
(`parallel`, after a timeout) come from too: a repeat the judge calls parallel is said to be
so here as well ("replan ... sent while an earlier attempt was still unanswered"), never a
plain "replan" beside the report's "in parallel".

The link between the proxy's `call_received` events and the model's tool calls is the
JSON-RPC id: the runner's client notes, for every tools/call it sends, the tool call it was
serving (`Connection.sent_calls`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from harness.report import (
    ORIGIN_MEANINGS,
    ORIGINS,
    Origin,
    Step,
    because,
    duplicate_repeats,
    origin_of,
)
from runner.experiment.records import DuplicateRow

Attribution = Origin
ATTRIBUTIONS: tuple[Attribution, ...] = ORIGINS
ATTRIBUTION_MEANINGS: dict[str, str] = ORIGIN_MEANINGS


def tool_call_steps(messages: Sequence[Mapping[str, Any]]) -> dict[str, Step]:
    """Every tool call id of the conversation -> the assistant message that asked for it."""
    steps: dict[str, Step] = {}
    users = 0
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "user":
            users += 1
        elif role == "assistant":
            for call in message.get("tool_calls") or ():
                steps.setdefault(str(call.get("id")), Step(index, users))
    return steps


def attribute(
    events: Iterable[Any],
    messages: Sequence[Mapping[str, Any]],
    sent_calls: Mapping[str, str | None],
) -> list[DuplicateRow]:
    """One stored row per duplicate execution, with its cause, in the order of the operations."""
    steps = tool_call_steps(messages)

    def call_of(event: Any) -> tuple[str | None, str | None]:
        rpc = None if event.rpc_id is None else str(event.rpc_id)
        return rpc, (sent_calls.get(rpc) if rpc is not None else None)

    causes = []
    for dup in duplicate_repeats(events):
        rpc, repeat_call = call_of(dup.repeat)
        _, earlier_call = call_of(dup.earlier)
        origin, why = origin_of(repeat_call, earlier_call, steps)
        causes.append(
            DuplicateRow(
                operation_index=dup.operation, tool=dup.tool, execution=dup.execution,
                seq=dup.repeat.seq, rpc_id=rpc, tool_call_id=repeat_call,
                earlier_seq=dup.earlier.seq, earlier_tool_call_id=earlier_call,
                attribution=origin, reason=because(origin, why, dup.facts),
            )
        )  # fmt: skip
    return causes

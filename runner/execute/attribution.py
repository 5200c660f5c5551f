"""Why each duplicate execution happened (SPEC M2), from the transcript and the proxy's events.

For every execution of a write operation after its first, the execution it repeats (the
operation's previous execution) and the repeat are traced back to the model's tool calls:

- `same_turn`: both calls were in one assistant message (parallel tool calls);
- `replan`: the repeat came from a later assistant message, with no new user message between;
- `after_follow_up`: the repeat came after a new user message ("please try again");
- `client_retry`: no model turn asked for the repeat: the MCP client sent a tool call again
  on its own, or sent a call while no tool call of the model was running.

The link between the proxy's `call_received` events and the model's tool calls is the
JSON-RPC id: the runner's client notes, for every tools/call it sends, the tool call it was
serving (`Connection.sent_calls`). Which attempts executed is read from the event log as the
harness's judge reads it (A1): a write call whose upstream answer was a result without
`isError` (a ghost write under F1 included); operations are told apart by the proxy's K2
operation id, numbered in order of first appearance like the report's operations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from runner.records import DuplicateRow

Attribution = Literal["same_turn", "replan", "after_follow_up", "client_retry"]
ATTRIBUTIONS: tuple[Attribution, ...] = ("same_turn", "replan", "after_follow_up", "client_retry")

ATTRIBUTION_MEANINGS: dict[str, str] = {
    "same_turn": "the model asked for the write twice in one message (parallel tool calls)",
    "replan": "the model asked again in a later step, with no new user message between",
    "after_follow_up": "the model asked again after a new user message ('please try again')",
    "client_retry": "no model turn asked for it: the client re-sent a call on its own",
}


@dataclass(frozen=True)
class _Step:
    message: int  # index of the assistant message in the conversation
    user_turn: int  # how many user messages came before it


def tool_call_steps(messages: Sequence[Mapping[str, Any]]) -> dict[str, _Step]:
    """Every tool call id of the conversation -> the assistant message that asked for it."""
    steps: dict[str, _Step] = {}
    users = 0
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "user":
            users += 1
        elif role == "assistant":
            for call in message.get("tool_calls") or ():
                steps.setdefault(str(call.get("id")), _Step(index, users))
    return steps


def _classify(
    repeat: str | None, earlier: str | None, steps: Mapping[str, _Step]
) -> tuple[Attribution, str]:
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


@dataclass
class _Operation:
    index: int
    tool: str
    executed: list[int]  # seqs of the attempts that executed, in the order they arrived


def executions(events: Iterable[Any]) -> list[_Operation]:
    """The write operations of an event log with the seqs of their executed attempts."""
    ops: dict[str, _Operation] = {}
    op_of: dict[int, _Operation] = {}
    executed: set[int] = set()
    for event in events:
        tag = getattr(event, "type", None)
        if tag == "call_received" and event.tool_class == "write":
            op = ops.setdefault(event.operation, _Operation(len(ops), event.tool, []))
            op_of[event.seq] = op
        elif tag == "upstream_answered" and event.status == "result" and not event.is_error:
            executed.add(event.seq)
    for seq in sorted(op_of):  # seqs number the calls in arrival order
        if seq in executed:
            op_of[seq].executed.append(seq)
    return list(ops.values())


def attribute(
    events: Iterable[Any],
    messages: Sequence[Mapping[str, Any]],
    sent_calls: Mapping[str, str | None],
) -> list[DuplicateRow]:
    """One stored row per duplicate execution, with its cause, in the order of the operations."""
    events = list(events)
    rpc_of = {e.seq: e.rpc_id for e in events if getattr(e, "type", None) == "call_received"}
    steps = tool_call_steps(messages)

    def tool_call(seq: int) -> tuple[str | None, str | None]:
        rpc = rpc_of.get(seq)
        key = None if rpc is None else str(rpc)
        return key, (sent_calls.get(key) if key is not None else None)

    causes = []
    for op in executions(events):
        pairs = zip(op.executed, op.executed[1:], strict=False)
        for n, (earlier, repeat) in enumerate(pairs, start=2):
            rpc, repeat_call = tool_call(repeat)
            _, earlier_call = tool_call(earlier)
            attribution, reason = _classify(repeat_call, earlier_call, steps)
            causes.append(
                DuplicateRow(
                    operation_index=op.index, tool=op.tool, execution=n, seq=repeat,
                    rpc_id=rpc, tool_call_id=repeat_call, earlier_seq=earlier,
                    earlier_tool_call_id=earlier_call, attribution=attribution, reason=reason,
                )
            )  # fmt: skip
    return causes

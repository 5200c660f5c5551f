"""U1 and M2 for command agents: which tools/call the model asked for, the endpoint's view of
the conversation, the generated configuration."""

from __future__ import annotations

import json

from harness.proxy import CallReceived
from runner.execute.command import mcp_config, model_requested
from runner.models.endpoint import ModelEndpoint, Served


def _answer(*calls: tuple[str, str, dict[str, object]]) -> dict[str, object]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, n, a in calls
        ],
    }


def _call(seq: int, rpc: int, tool: str, args: dict[str, object]) -> CallReceived:
    return CallReceived(
        t_ns=seq, seq=seq, rpc_id=rpc, tool=tool, tool_class="write", operation="op",
        arguments=args,
    )  # fmt: skip


BOOK = {"guest": "Al", "nights": 2}


def test_m2_a_call_beyond_the_models_requests_is_the_clients_own() -> None:
    endpoint = ModelEndpoint("http://x/v1", "scripted/naive")
    endpoint.served.append(
        Served([{"role": "user", "content": "book"}], _answer(("c1", "book", BOOK)))
    )
    # the client layer sent the model's one call twice (e.g. a re-issue after a closed stream)
    sent = model_requested([_call(1, 7, "book", BOOK), _call(2, 8, "book", BOOK)], endpoint)
    assert sent == {"7": "c1", "8": None}


def test_m2_calls_match_the_models_requests_by_tool_and_arguments_in_order() -> None:
    endpoint = ModelEndpoint("http://x/v1", "m")
    endpoint.served += [
        Served([{"role": "user", "content": "u"}], _answer(("c1", "book", BOOK))),
        Served([], _answer(("c2", "search", {"guest": "Al"}), ("c3", "book", {"nights": 2, "guest": "Al"}))),
    ]  # fmt: skip
    events = [
        _call(1, 1, "book", BOOK),
        _call(2, 2, "search", {"guest": "Al"}),
        _call(3, 3, "book", BOOK),
    ]
    assert model_requested(events, endpoint) == {"1": "c1", "2": "c2", "3": "c3"}


def test_u1_endpoint_conversation_keeps_user_tool_and_assistant_messages_in_order() -> None:
    endpoint = ModelEndpoint("http://x/v1", "m")
    first = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
    ]
    answer = _answer(("c1", "book", BOOK))
    second = [*first, answer, {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    endpoint.served += [
        Served(first, answer),
        Served(second, {"role": "assistant", "content": "done"}),
    ]
    roles = [(m["role"], m.get("content")) for m in endpoint.conversation()]
    assert roles == [("user", "hi"), ("assistant", None), ("tool", "ok"), ("assistant", "done")]


def test_u1_generated_configuration_is_the_common_mcpservers_shape() -> None:
    config = mcp_config({"type": "http", "url": "http://127.0.0.1:1/mcp"})
    assert config == {
        "mcpServers": {"agent-harness": {"type": "http", "url": "http://127.0.0.1:1/mcp"}}
    }

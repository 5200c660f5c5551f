"""Issue 21's agent shapes (runner/models/scripted.py): what each scripted model decides next,
from the messages and tools alone (real runs: tests/integration/test_scripted_shapes_runs.py,
tests/e2e/test_scripted_shapes_e2e.py)."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from runner.models._policies import POLICIES, _equal_number  # noqa: E402
from runner.models._provider import next_decision  # noqa: E402
from runner.models.scripted import SCRIPTED_MODELS  # noqa: E402

SHAPES = ["null-key", "adds-enum-default", "equivalent-numbers", "polls-status",
          "idempotent-rewrite"]  # fmt: skip
ORDER = "Place an order. symbol: ACME, qty: 1"


def tool(name: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema = {"type": "object", "properties": properties, "required": required}
    return {"type": "function", "function": {"name": name, "description": "", "parameters": schema}}


STRING = {"type": "string"}
PLACE = tool("place_order", {"symbol": STRING, "qty": {"type": "integer"},
                             "idempotency_key": STRING,
                             "tif": {"$ref": "#/$defs/Tif", "default": "day"}},
             ["symbol", "qty"])  # fmt: skip
STATUS = tool("order_status", {"order_id": STRING}, ["order_id"])


def step(model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    return next_decision(model, messages, {"tools": tools})


def after(calls: list[tuple[str, dict[str, Any]]], answers: list[str]) -> list[dict[str, Any]]:
    """The messages after one user request, one assistant step per call with its answer."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": ORDER}]
    for i, ((name, args), answer) in enumerate(zip(calls, answers, strict=True)):
        call = {"id": f"c{i}", "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)}}  # fmt: skip
        messages += [{"role": "assistant", "content": None, "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": f"c{i}", "content": answer}]  # fmt: skip
    return messages


def test_each_shape_is_a_scripted_model_with_a_description():
    for shape in SHAPES:
        assert shape in POLICIES and SCRIPTED_MODELS[f"scripted/{shape}"]


def test_null_key_sends_null_and_again_null_after_an_error():  # E3
    first = step("null-key", after([], []), [PLACE])
    [call] = first.calls
    assert call.arguments["idempotency_key"] is None
    again = step("null-key", after([(call.name, dict(call.arguments))], ["ERROR (isError=true):\nx"]),
                 [PLACE])  # fmt: skip
    assert again.calls[0].arguments == call.arguments


def test_adds_enum_default_fills_the_default_beside_the_ref():  # E4
    [call] = step("adds-enum-default", after([], []), [PLACE]).calls
    assert "tif" not in call.arguments
    failed = after([(call.name, dict(call.arguments))], ["ERROR (isError=true):\ntimeout"])
    [repeat] = step("adds-enum-default", failed, [PLACE]).calls
    assert repeat.arguments == {**call.arguments, "tif": "day"}


@pytest.mark.parametrize(("value", "other"), [(129, 129.0), (129.0, 129), (129.5, 129.5),
                                              ("129", "129"), (True, True)])  # fmt: skip
def test_equivalent_numbers_write_whole_numbers_the_other_way(value, other):  # E6
    assert _equal_number(value) == other and type(_equal_number(value)) is type(other)


def test_polls_status_polls_twice_with_the_id_the_write_returned_then_reports():  # E2
    tools = [PLACE, STATUS]
    [write] = step("polls-status", after([], []), tools).calls
    placed = (write.name, dict(write.arguments))
    [poll] = step("polls-status", after([placed], ["order ORD-1A2B3C placed"]), tools).calls
    assert (poll.name, poll.arguments) == ("order_status", {"order_id": "ORD-1A2B3C"})
    polled = (poll.name, dict(poll.arguments))
    second = step("polls-status", after([placed, polled], ["order ORD-1A2B3C placed", "open"]),
                  tools)  # fmt: skip
    assert second.calls[0].name == "order_status"
    done = step(
        "polls-status",
        after([placed, polled, polled], ["order ORD-1A2B3C placed", "open", "filled"]),
        tools,
    )
    assert not done.calls and "filled" in done.text


def test_polls_status_without_a_status_tool_just_reports():
    [write] = step("polls-status", after([], []), [PLACE]).calls
    done = step("polls-status", after([(write.name, dict(write.arguments))], ["ok ORD-1A2B3C"]),
                [PLACE])  # fmt: skip
    assert not done.calls


def test_idempotent_rewrite_sends_the_same_write_twice_then_reports():  # E1
    [write] = step("idempotent-rewrite", after([], []), [PLACE]).calls
    once = (write.name, dict(write.arguments))
    [again] = step("idempotent-rewrite", after([once], ["ok"]), [PLACE]).calls
    assert (again.name, again.arguments) == once
    done = step("idempotent-rewrite", after([once, once], ["ok", "ok"]), [PLACE])
    assert not done.calls and "saved" in done.text

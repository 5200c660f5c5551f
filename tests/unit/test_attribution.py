"""Attribution of duplicate executions (M2) from events, transcript and the client's sent calls.

The events come from the real session and fault plan against the simulated backend; the
transcript is what the agent loop would have recorded for the same calls.
"""

from __future__ import annotations

from harness.benchmark.simulate import SimulatedSession
from runner.analysis.attribution import attribute

BOOK = {"guest": "Ann", "date": "2026-12-01"}


def assistant(*ids):
    calls = [{"id": i, "type": "function", "function": {"name": "create_booking"}} for i in ids]
    return {"role": "assistant", "content": "", "tool_calls": calls}


def result(call_id):
    return {"role": "tool", "tool_call_id": call_id, "name": "create_booking", "content": "x"}


def user(text="Please book a room."):
    return {"role": "user", "content": text}


def causes(session, messages, sent):
    session.end()
    return [(c.execution, c.attribution) for c in attribute(session.log.events, messages, sent)]


def test_m2_parallel_calls_in_one_message_are_same_turn():
    s = SimulatedSession()
    first, second = (
        s.send("create_booking", BOOK, rpc_id=1),
        s.send("create_booking", BOOK, rpc_id=2),
    )
    s.complete(first), s.complete(second)
    messages = [user(), assistant("a", "b"), result("a"), result("b")]
    assert causes(s, messages, {"1": "a", "2": "b"}) == [(2, "same_turn")]


def test_m2_repeat_in_a_later_step_without_user_input_is_replan():
    s = SimulatedSession("F1")
    s.complete(s.send("create_booking", BOOK, rpc_id=1))  # ghost write: executed
    s.complete(s.send("create_booking", BOOK, rpc_id=2))
    messages = [user(), assistant("a"), result("a"), assistant("b"), result("b")]
    assert causes(s, messages, {"1": "a", "2": "b"}) == [(2, "replan")]


def test_m2_repeat_after_a_new_user_message_is_after_follow_up():
    s = SimulatedSession("F1")
    s.complete(s.send("create_booking", BOOK, rpc_id=1))
    s.complete(s.send("create_booking", BOOK, rpc_id=2))
    messages = [
        user(), assistant("a"), result("a"), {"role": "assistant", "content": "It failed."},
        user("Please try again."), assistant("b"), result("b"),
    ]  # fmt: skip
    assert causes(s, messages, {"1": "a", "2": "b"}) == [(2, "after_follow_up")]


def test_m2_client_resending_the_models_call_is_client_retry():
    s = SimulatedSession("F1")
    s.complete(s.send("create_booking", BOOK, rpc_id=1))
    s.complete(s.send("create_booking", BOOK, rpc_id=2))
    messages = [user(), assistant("a"), result("a")]  # the model asked once
    s.end()
    [cause] = attribute(s.log.events, messages, {"1": "a", "2": "a"})
    assert (cause.attribution, cause.tool_call_id, cause.earlier_tool_call_id) == (
        "client_retry", "a", "a",
    )  # fmt: skip


def test_m2_call_no_tool_call_asked_for_is_client_retry():
    s = SimulatedSession()
    s.complete(s.send("create_booking", BOOK, rpc_id=1))
    s.complete(s.send("create_booking", BOOK, rpc_id=7))  # not in the client's notes
    messages = [user(), assistant("a"), result("a")]
    assert causes(s, messages, {"1": "a"}) == [(2, "client_retry")]


def test_m2_executions_that_were_not_repeats_are_not_attributed():
    s = SimulatedSession("F5")  # the first attempt is refused by the fault: not executed
    s.complete(s.send("create_booking", BOOK, rpc_id=1))
    s.complete(s.send("create_booking", BOOK, rpc_id=2))
    messages = [user(), assistant("a"), result("a"), assistant("b"), result("b")]
    assert causes(s, messages, {"1": "a", "2": "b"}) == []


def test_m2_each_further_execution_is_attributed_against_the_one_before():
    s = SimulatedSession()
    for rpc in (1, 2, 3):
        s.complete(s.send("create_booking", BOOK, rpc_id=rpc))
    messages = [
        user(), assistant("a"), result("a"), assistant("b"), result("b"),
        user("again"), assistant("c"), result("c"),
    ]  # fmt: skip
    assert causes(s, messages, {"1": "a", "2": "b", "3": "c"}) == [
        (2, "replan"), (3, "after_follow_up"),
    ]  # fmt: skip

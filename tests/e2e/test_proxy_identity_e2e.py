"""K4, K5: operation identity against a real upstream's record of what it executed.

The counting server (a real subprocess behind the installed proxy) declares `room_type` with
the schema default "standard" and applies it; its ground-truth file shows each execution. A
repeat that only spells out the default, or that carries its key in another spelling, is the
same booking executed twice, and the report must say so.
"""

from __future__ import annotations

import pytest

from tests.support.proxyproc import BOOK, proxy_session
from tests.support.reports import operation

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.mark.parametrize(
    ("first", "repeat", "key_use"),
    [
        (BOOK, {**BOOK, "room_type": "standard"}, "no_key"),  # K4: the real-model case
        ({**BOOK, "X-Idempotency-Key": "k-1"}, {**BOOK, "X-Idempotency-Key": "k-2"}, "new_key"),
        ({**BOOK, "client_token": "t-1"}, {**BOOK, "clientToken": "t-2"}, "new_key"),  # K5
    ],
    ids=["schema-default", "x-idempotency-key", "client-token"],
)
async def test_k4_k5_a_repeat_in_another_spelling_is_the_same_booking_executed_twice(
    agent_harness_bin, tmp_path, first, repeat, key_use
):
    async with proxy_session(agent_harness_bin, tmp_path, "--scenario", "F1",
                             "--audit-tools", "off") as run:  # fmt: skip
        ghost = await run.client.call_tool("create_booking", first)
        assert ghost.is_error is True
        await run.client.call_tool("create_booking", repeat)
    executed = [e for e in run.truth_entries() if e.get("tool") == "create_booking"]
    # Ground truth: two bookings of the same room, guest and date.
    assert len(executed) == 2 and {e["room_type"] for e in executed} == {"standard"}
    report = run.report()
    assert report["verdict"] == "FAIL"
    op = operation(report, "create_booking")
    assert op["executions"] == 2 and op["arguments"]["room_type"] == "standard"
    [violation] = report["report"]["violations"]
    assert violation["duplicate"]["keyUse"] == key_use


@pytest.mark.parametrize(
    "repeat",
    [
        {**BOOK, "guest": BOOK["guest"].upper()},  # letter case
        {**BOOK, "nights": "2"},  # a number as a string
    ],
    ids=["case", "number-as-string"],
)
async def test_j10_a_respelled_repeat_without_any_fault_is_a_possible_duplicate_observation(
    agent_harness_bin, tmp_path, repeat
):
    first = {**BOOK, "nights": 2} if "nights" in repeat else BOOK
    async with proxy_session(agent_harness_bin, tmp_path, "--audit-tools", "off") as run:
        await run.client.call_tool("create_booking", first)
        await run.client.call_tool("create_booking", repeat)
    executed = [e for e in run.truth_entries() if e.get("tool") == "create_booking"]
    assert len(executed) == 2  # ground truth: two bookings, no fault in between
    report = run.report()["report"]
    [seen] = [o for o in report["observations"]
              if o["code"] == "POSSIBLE_DUPLICATE_DIFFERENT_ARGUMENTS"]  # fmt: skip
    assert (seen["earlierAttempt"], seen["thisAttempt"]) == ("executed", "executed")
    assert sum(o["executions"] for o in report["operations"]) == 2

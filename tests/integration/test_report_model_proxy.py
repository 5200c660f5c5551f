"""O2: every report file the proxy wrote in a session, read through the typed report model
(harness.report.read_report) and back, is the same JSON; the model's view agrees with what
the upstream really executed."""

from __future__ import annotations

import json

import pytest

from harness.base import jsonutil
from harness.report import read_report
from tests.support.proxy_fixture import BOOK, proxied

pytestmark = pytest.mark.anyio


def _every_report_round_trips(reports: list[str]):
    assert reports
    for text in reports:
        model = read_report(text)
        assert model.as_json_data() == json.loads(text)
        assert jsonutil.dumps(model.as_json_data()) == jsonutil.dumps(jsonutil.loads(text))
    return read_report(reports[-1])


@pytest.mark.parametrize(
    ("plan", "verdict"),
    [
        ({"scenario": "F1"}, "FAIL"),  # the agent re-sends after the ghost timeout
        ({"scenario": "F2", "retry_after_s": 30}, "FAIL"),  # and before retry_after passed
        ({"scenario": "F4"}, "FAIL"),  # two writes pass unchanged
        ({"scenario": "F5"}, "PASS"),  # nothing ran the first time
        ({"chaos_error_rate": 1.0, "seed": 7}, "PASS"),  # every call fails: nothing ran
        ({}, "FAIL"),  # a baseline: the same write executed twice
    ],
)
async def test_o2_the_proxys_report_files_read_through_the_model_unchanged(plan, verdict):
    async with proxied(**plan) as h:
        await h.client.call_tool("create_booking", BOOK)
        await h.client.call_tool("create_booking", BOOK)
        await h.client.call_tool("search_bookings", BOOK)
    model = _every_report_round_trips(h.reports)
    assert model.status == "finished" and model.verdict == verdict
    report = model.report
    assert report.scenario == (plan.get("scenario") or ("chaos" if plan else None))
    # The report's executions are the upstream's ground truth.
    executed = h.upstream.count("create_booking", BOOK)
    assert sum(op.executions for op in report.operations if op.tool == "create_booking") == (
        executed
    )
    assert ("DUPLICATE_EXECUTION" in report.violation_codes()) == (executed > 1)

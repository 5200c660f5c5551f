"""The example suite of docs/pytest.md: the agent under faults, live and from a cassette."""

import asyncio

import pytest
from booking_agent import book

from harness.testing import assert_pass


@pytest.mark.agent_harness(scenarios=["F1", "F2", "F5"], runs=2)
def test_the_agent_books_once_whatever_fails(agent_harness):
    asyncio.run(book(agent_harness.mcp_config_file))
    assert_pass(agent_harness)  # on FAIL: the reason, the violations and the patches


@pytest.mark.agent_harness(scenarios=["F1"], cassette=True)
def test_the_agent_books_once_against_the_recording(agent_harness):
    # recorded once against the real server, then replayed offline (--harness-record-mode)
    asyncio.run(book(agent_harness.mcp_config_file))
    report = assert_pass(agent_harness)
    assert report.report.operations[0].executions == 1

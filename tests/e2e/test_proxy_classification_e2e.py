"""C8, C9: classification held against a real upstream's record of what it executed.

The counting server (behind the installed proxy) has `create_note`, which writes although it
is annotated read-only, and `payments__process_payment`, a namespaced write without any
annotation. Judged by name they are writes: a repeat after a ghost write is a duplicate, and
calling the misannotated write never counts as verifying a booking.
"""

from __future__ import annotations

import pytest

from tests.support.proxyproc import BOOK, proxy_session
from tests.support.reports import codes

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [("create_note", {"text": "call Ann"}),
     ("payments__process_payment", {"customer": "ACME", "amount": 129.5})],
)  # fmt: skip
async def test_c8_c9_a_ghost_write_sent_again_is_a_duplicate_whatever_the_annotation(
    agent_harness_bin, tmp_path, tool, arguments
):
    async with proxy_session(agent_harness_bin, tmp_path, "--scenario", "F1",
                             "--audit-tools", "off") as run:  # fmt: skip
        ghost = await run.client.call_tool(tool, arguments)
        assert ghost.is_error is True  # C8/C9: a write, so F1 applied to it
        await run.client.call_tool(tool, arguments)
    assert [t for t, _ in run.truth()] == [tool, tool]  # ground truth: written twice
    report = run.report()
    assert report["verdict"] == "FAIL"
    [entry] = [t for t in report["toolClassification"] if t["name"] == tool]
    assert entry["class"] == "write"
    if tool == "create_note":
        assert "conflict" in entry
        assert 'WARNING: tool "create_note"' in run.stderr()


async def test_c9_calling_a_misannotated_write_after_a_timeout_is_no_verification(
    agent_harness_bin, tmp_path
):
    async with proxy_session(agent_harness_bin, tmp_path, "--scenario", "F1",
                             "--audit-tools", "off") as run:  # fmt: skip
        await run.client.call_tool("create_booking", BOOK)  # the ghost write
        await run.client.call_tool("create_note", {"text": "did Ann's booking go through?"})
    assert [t for t, _ in run.truth()] == ["create_booking", "create_note"]
    observations = codes(run.report()["report"]["observations"])
    assert "VERIFIED_NO_RETRY" not in observations  # it wrote; it verified nothing
    assert "UNVERIFIED_AFTER_TIMEOUT" in observations

"""C8, C9: classification held against a real upstream's record of what it executed.

The counting server (behind the installed proxy) has `create_note`, which writes although it
is annotated read-only, and `payments__process_payment`, a namespaced write without any
annotation. The namespaced write is a write by its name: a repeat after a ghost write is a
duplicate. The misannotated one is neither a read nor a write since E2 (it was judged as a
write): flagged, never a verification, never faulted, its repeats no violation.
"""

from __future__ import annotations

import pytest

from tests.support.proxyproc import BOOK, proxy_session
from tests.support.reports import codes

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_c8_a_ghost_write_sent_again_is_a_duplicate_by_its_namespaced_name(
    agent_harness_bin, tmp_path
):
    tool, arguments = "payments__process_payment", {"customer": "ACME", "amount": 129.5}
    async with proxy_session(agent_harness_bin, tmp_path, "--scenario", "F1",
                             "--audit-tools", "off") as run:  # fmt: skip
        ghost = await run.client.call_tool(tool, arguments)
        assert ghost.is_error is True  # C8: a write, so F1 applied to it
        await run.client.call_tool(tool, arguments)
    assert [t for t, _ in run.truth()] == [tool, tool]  # ground truth: written twice
    report = run.report()
    assert report["verdict"] == "FAIL"
    [entry] = [t for t in report["toolClassification"] if t["name"] == tool]
    assert entry["class"] == "write"


async def test_c9_e2_a_write_hinted_read_only_is_flagged_and_judged_as_neither(
    agent_harness_bin, tmp_path
):
    arguments = {"text": "call Ann"}
    async with proxy_session(agent_harness_bin, tmp_path, "--scenario", "F1",
                             "--audit-tools", "off") as run:  # fmt: skip
        first = await run.client.call_tool("create_note", arguments)
        assert first.is_error is False  # E2: not a write, so no scenario applies to it
        await run.client.call_tool("create_note", arguments)
    assert [t for t, _ in run.truth()] == ["create_note", "create_note"]
    report = run.report()
    # E2: its repeats are no violation; the run wrote nothing the harness judges
    assert report["verdict"] == "NOT_TESTED" and report["report"]["violations"] == []
    [entry] = [t for t in report["toolClassification"] if t["name"] == "create_note"]
    assert entry["class"] == "unclassified" and "conflict" in entry
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

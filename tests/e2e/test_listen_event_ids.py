"""V14 (the proxy's part): a `Last-Event-ID` that looks like digits but is no number the proxy
gave out is a 400, never a 500 and never a traceback."""

from __future__ import annotations

import aiohttp
import pytest

from tests.support.listenkit import flood_upstream, open_session, proxy_process, session_headers

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "number",
    ["²", "١٢٣", "9" * 5000, "-1", "1.5", " 7", ""],
    ids=["superscript", "arabic-indic", "5000-digits", "negative", "decimal", "space", "empty"],
)
async def test_v14_a_digit_like_last_event_id_is_a_400_without_a_traceback(
    tmp_path, agent_harness_bin, number
):  # V14
    argv = [str(agent_harness_bin), "proxy", *flood_upstream(tmp_path / "truth.jsonl"),
            "--listen", "127.0.0.1:0"]  # fmt: skip
    async with proxy_process(argv) as proxy, aiohttp.ClientSession() as http:
        sid = await open_session(http, proxy.url)
        headers = {**session_headers(sid), "Accept": "text/event-stream"}
        headers["Last-Event-ID"] = f"0123456789abcdef_{number}"
        async with http.get(proxy.url, headers=headers) as resp:
            assert resp.status == 400
            body = await resp.json()
            assert body["error"]["message"] == "Bad Request: Last-Event-ID is not an event id"
        # the proxy is still there for the same agent
        headers = {**session_headers(sid), "Accept": "text/event-stream"}
        headers["Last-Event-ID"] = "0123456789abcdef_1"
        async with http.get(proxy.url, headers=headers) as resp:
            assert resp.status == 404  # a well-formed id of no stream
        assert await proxy.stop() == 0
    assert "Traceback" not in proxy.stderr and "Error handling request" not in proxy.stderr

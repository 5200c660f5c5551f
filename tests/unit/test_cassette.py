"""U2: the cassette file, the replay's matching and count, the recorder's redaction."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.base.errors import UsageError
from harness.cassette import CassetteError, Replayer, load
from harness.cassette.args import parse_record, parse_replay
from harness.cassette.format import Cassette, Exchange
from harness.cassette.record import Recorder

HEADER = {"cassette": "agent-harness", "version": 1}
TOOLS = {
    "tools": [
        {"name": "book", "inputSchema": {"type": "object"}},
        {"name": "save", "inputSchema": {"type": "object"},
         "annotations": {"idempotentHint": True, "readOnlyHint": False}},
        {"name": "look", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    ]
}  # fmt: skip


def write(path: Path, *lines: Any) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def cassette(tmp_path: Path, *exchanges: Any) -> Path:
    return write(
        tmp_path / "s.cassette",
        HEADER,
        {"type": "request", "method": "initialize", "params": {}, "result": {"serverInfo": {}}},
        {"type": "request", "method": "tools/list", "params": {}, "result": TOOLS},
        *exchanges,
    )


def call(tool: str, arguments: dict[str, Any], rid: int = 1) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                       "params": {"name": tool, "arguments": arguments}}).encode()  # fmt: skip


def answer(replayer: Replayer, line: bytes) -> dict[str, Any]:
    return json.loads(replayer.answer_line(line)[-1])


def text(result: dict[str, Any]) -> str:
    return result["result"]["content"][0]["text"]


def booked(n: int) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": f"booking {n}"}]}


# -- the file ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([], "empty"),
        ([{"version": 1}], "not a cassette"),
        ([{"cassette": "agent-harness", "version": "1"}], "whole number"),
        ([{"cassette": "agent-harness", "version": 2}], "version 2 is newer"),
        ([HEADER, {"type": "song"}], ":2: type must be one of"),
        ([HEADER, {"type": "call", "tool": "t", "arguments": {}}], ":2: a call holds exactly"),
        ([HEADER, {"type": "call", "tool": "t", "arguments": [], "result": {}}], "an object"),
        ([HEADER, {"type": "call", "arguments": {}, "result": {}}], "needs its tool"),
        ([HEADER, {"type": "request", "method": "x", "result": 1, "error": {}}], "exactly one"),
        ([HEADER, {"type": "request", "method": "x", "omitted": 5}], '{"bytes": N}'),
        ([HEADER, {"type": "notification", "from": "me", "method": "x"}], "agent or server"),
    ],
)
def test_u2_a_bad_cassette_is_refused_with_one_line(tmp_path, lines, message):
    path = write(tmp_path / "bad.cassette", *lines)
    with pytest.raises(CassetteError) as caught:
        load(path)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith(str(path))


def test_u2_a_cassette_that_is_not_json_or_not_a_file_is_refused(tmp_path):
    (tmp_path / "junk.cassette").write_text('{"cassette": "agent-harness", "version": 1}\n{oops\n')
    with pytest.raises(CassetteError, match=r"junk.cassette:2: not JSON"):
        load(tmp_path / "junk.cassette")
    with pytest.raises(CassetteError, match="no such file"):
        load(tmp_path / "missing.cassette")
    with pytest.raises(CassetteError, match="not a regular file"):
        load(tmp_path)


def test_u2_a_cassette_written_reads_back_the_same(tmp_path):
    exchanges = [
        Exchange("request", "tools/list", {}, result=TOOLS),
        Exchange("call", "tools/call", tool="book", arguments={"n": 129.00}, result=booked(1)),
        Exchange(
            "call",
            "tools/call",
            tool="book",
            arguments={"n": 1},
            error={"code": 1, "message": "no"},
        ),  # fmt: skip
        Exchange("call", "tools/call", tool="big", arguments={}, omitted=5_000_000),
        Exchange("notification", "notifications/initialized", sender="agent"),
    ]
    path = tmp_path / "back.cassette"
    path.write_text(Cassette(dict(HEADER), exchanges).text(), encoding="utf-8")
    again = load(path)
    assert [e.as_json() for e in again.exchanges] == [
        json.loads(json.dumps(e.as_json(), default=str)) for e in exchanges
    ]
    assert again.version == 1 and [t["name"] for t in again.tools()] == ["book", "save", "look"]


# -- matching ---------------------------------------------------------------------------------


def test_u2_replay_answers_initialize_and_lists_as_recorded(tmp_path):
    replayer = Replayer(load(cassette(tmp_path)))
    init = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"x"}}'
    assert answer(replayer, init) == {"jsonrpc": "2.0", "id": 0, "result": {"serverInfo": {}}}
    listed = answer(replayer, b'{"jsonrpc":"2.0","id":"a","method":"tools/list"}')
    assert listed == {"jsonrpc": "2.0", "id": "a", "result": TOOLS}
    assert replayer.answer_line(b'{"jsonrpc":"2.0","method":"notifications/initialized"}') == []
    ping = answer(replayer, b'{"jsonrpc":"2.0","id":9,"method":"ping"}')
    assert ping["result"] == {}
    other = answer(replayer, b'{"jsonrpc":"2.0","id":3,"method":"resources/list"}')
    assert other["error"]["code"] == -32601 and "resources/list was not recorded" in str(other)
    junk = answer(replayer, b"{not json")
    assert junk["error"]["code"] == -32700 and junk["id"] is None


def test_u2_calls_match_by_tool_and_canonical_arguments_numbers_by_value(tmp_path):  # E6
    path = cassette(tmp_path, {"type": "call", "tool": "book",
                               "arguments": {"total": 129, "who": {"b": 1, "a": 2}},
                               "result": booked(1)})  # fmt: skip
    replayer = Replayer(load(path))
    got = answer(replayer, b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":'
                           b'"book","arguments":{"who":{"a":2,"b":1.0},"total":129.00}}}')  # fmt: skip
    assert got == {"jsonrpc": "2.0", "id": 5, "result": booked(1)}
    assert replayer.count()["operations"][0]["matched"] == "exact"


def test_u2_repeats_are_answered_in_recorded_order_then_the_last_answer(tmp_path):
    same = {"type": "call", "tool": "book", "arguments": {"n": 1}}
    replayer = Replayer(load(cassette(tmp_path, {**same, "result": booked(1)},
                                      {**same, "error": {"code": -1, "message": "taken"}})))  # fmt: skip
    first, second, third = (answer(replayer, call("book", {"n": 1}, i)) for i in (1, 2, 3))
    assert first["result"] == booked(1)
    assert second["error"]["message"] == "taken" and third["error"]["message"] == "taken"
    (op,) = replayer.count()["operations"]
    assert (op["answered"], op["succeeded"]) == (3, 1)


def test_u2_an_unmatched_call_is_a_tool_error_naming_the_nearest_recorded_call(tmp_path):
    replayer = Replayer(load(cassette(
        tmp_path, {"type": "call", "tool": "book", "arguments": {"n": 1}, "result": booked(1)},
        {"type": "call", "tool": "book", "arguments": {"n": 1, "room": "sea"}, "result": booked(2)},
    )))  # fmt: skip
    got = answer(replayer, call("book", {"n": 1, "room": "sun"}))
    assert got["result"]["isError"] is True
    assert 'the nearest recorded: book {"n":1,"room":"sea"}' in text(got)
    never = answer(replayer, call("cancel", {}))
    assert "cancel was never called in the recording; recorded calls: book" in text(never)
    ops = {o["tool"]: o for o in replayer.count()["operations"]}
    assert ops["book"]["matched"] == "unmatched" and ops["book"]["succeeded"] == 0
    assert ops["cancel"]["answered"] == 1


def test_u2_unmatched_nearest_answers_with_the_nearest_recorded_call(tmp_path):
    replayer = Replayer(load(cassette(
        tmp_path, {"type": "call", "tool": "book", "arguments": {"n": 1}, "result": booked(1)},
        {"type": "call", "tool": "book", "arguments": {"n": 1, "room": "sea"}, "result": booked(2)},
    )), unmatched="nearest")  # fmt: skip
    assert answer(replayer, call("book", {"n": 1, "room": "sun"}))["result"] == booked(2)
    assert answer(replayer, call("cancel", {}))["result"]["isError"] is True
    (op, _) = replayer.count()["operations"]
    assert (op["matched"], op["answered"], op["succeeded"]) == ("nearest", 1, 1)


def test_u2_an_answer_too_big_to_record_is_an_error_on_replay(tmp_path):
    path = cassette(tmp_path, {"type": "call", "tool": "book", "arguments": {},
                               "omitted": {"bytes": 9_000_000}})  # fmt: skip
    got = answer(Replayer(load(path)), call("book", {}))
    assert "9000000 bytes" in got["error"]["message"]


def test_u2_recorded_progress_is_replayed_with_the_new_requests_token(tmp_path):
    note = {"method": "notifications/progress", "params": {"progressToken": 7, "progress": 1}}
    path = cassette(tmp_path, {"type": "call", "tool": "book", "arguments": {},
                               "result": booked(1), "notifications": [note]})  # fmt: skip
    replayer = Replayer(load(path))
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "book", "arguments": {}, "_meta": {"progressToken": "mine"}}}).encode()  # fmt: skip
    sent = [json.loads(x) for x in replayer.answer_line(line)]
    assert sent[0]["params"]["progressToken"] == "mine" and sent[1]["result"] == booked(1)
    assert len(replayer.answer_line(call("book", {}))) == 1  # no token asked: no progress


def test_u2_a_batch_is_answered_as_a_batch(tmp_path):
    replayer = Replayer(load(cassette(tmp_path)))
    out = replayer.answer_line(b'[{"jsonrpc":"2.0","id":1,"method":"ping"},'
                               b'{"jsonrpc":"2.0","method":"notifications/x"}]')  # fmt: skip
    assert json.loads(out[0]) == [{"jsonrpc": "2.0", "id": 1, "result": {}}]


def test_u2_the_count_carries_the_recorded_annotations(tmp_path):
    path = cassette(tmp_path,
                    {"type": "call", "tool": "save", "arguments": {}, "result": booked(1)},
                    {"type": "call", "tool": "look", "arguments": {}, "result": booked(2)})  # fmt: skip
    replayer = Replayer(load(path), str(path))
    answer(replayer, call("save", {}))
    answer(replayer, call("save", {}))
    answer(replayer, call("look", {}))
    count = replayer.count()
    assert count["calls_answered"] == 3 and count["cassette"] == str(path)
    ops = {o["tool"]: o for o in count["operations"]}
    assert ops["save"]["idempotentHint"] is True and ops["save"]["answered"] == 2
    assert ops["look"]["readOnlyHint"] is True
    assert count["requests"]["tools/call"] == 3


# -- recording --------------------------------------------------------------------------------


def recorder(tmp_path: Path, *flags: str, max_answer: int | None = None) -> Recorder:
    argv = ["--upstream-command=server", *flags, "-o", str(tmp_path / "x.cassette")]
    if max_answer is not None:
        argv += ["--max-answer-bytes", str(max_answer)]
    config = parse_record(argv)
    assert not isinstance(config, str)
    return Recorder(config)


def test_u2_v3_recording_redacts_secrets_and_never_writes_env_values(tmp_path, monkeypatch):
    monkeypatch.setenv("SHOP_API_TOKEN", "tok-from-the-environment-1")
    rec = recorder(tmp_path, "--upstream-env-var=DB_PASSWORD=hunter2-is-long",
                   "--upstream-arg=--verbose")  # fmt: skip
    rec.from_agent(call("book", {"note": "pw hunter2-is-long, auth: Bearer abcdefghijklmnop1234",
                                 "url": "https://ann:pw@example.com/x"}))  # fmt: skip
    rec.from_upstream(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "result": {
                    "content": [{"type": "text", "text": "token tok-from-the-environment-1"}]
                },
            }
        ).encode()
    )
    text_ = rec.cassette().text()
    for secret in ("hunter2-is-long", "abcdefghijklmnop1234", "ann:pw", "tok-from-the-environment"):
        assert secret not in text_
    assert text_.count("[REDACTED]") == 4
    assert json.loads(text_.splitlines()[0])["upstream"] == "server"


def test_u2_a_url_upstream_is_named_without_credentials_or_query(tmp_path):
    config = parse_record(["--upstream-url=https://u:p@api.example.com:8443/mcp?key=s3cret",
                           "--upstream-header=Authorization: Bearer zzzzzzzzzzzzzzzzzzzz",
                           "-o", "x.cassette"])  # fmt: skip
    assert not isinstance(config, str)
    rec = Recorder(config)
    assert rec.header["upstream"] == "https://api.example.com:8443/mcp"
    assert "zzzzzzzzzzzzzzzzzzzz" in rec.redactor.secrets


def test_u2_recording_pairs_answers_with_requests_and_keeps_notifications(tmp_path):
    rec = recorder(tmp_path, max_answer=100)
    rec.from_agent(b'{"jsonrpc":"2.0","id":"i","method":"initialize","params":{}}')
    rec.from_agent(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    rec.from_agent(call("book", {"n": 1}, 2))
    rec.from_agent(call("big", {}, 3))
    rec.from_upstream(b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"hi"}}')
    rec.from_upstream(b'{"jsonrpc":"2.0","id":"i","result":{"serverInfo":{}}}')
    rec.from_upstream(b'{"jsonrpc":"2.0","id":3,"result":{"text":"' + b"x" * 200 + b'"}}')
    rec.from_upstream(b'{"jsonrpc":"2.0","id":2,"error":{"code":-1,"message":"full"}}')
    rec.from_upstream(b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}')
    got = [e.as_json() for e in rec.cassette().exchanges]
    assert got[0] == {"type": "notification", "from": "agent",
                      "method": "notifications/initialized"}  # fmt: skip
    assert got[1]["method"] == "initialize"
    assert got[1]["notifications"] == [
        {"method": "notifications/message", "params": {"data": "hi"}}
    ]
    assert got[2] == {"type": "call", "tool": "big", "arguments": {}, "omitted": {"bytes": 211}}
    assert got[3]["error"]["message"] == "full"
    assert got[4] == {"type": "notification", "from": "server",
                      "method": "notifications/tools/list_changed"}  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--upstream-command=x"], "-o/--output CASSETTE is required"),
        (["-o", "a", "--scenario", "F1", "--upstream-command=x"], "unknown flag --scenario"),
        (["-o", "a"], "--upstream-command or --upstream-url is required"),
        (["-o", "a", "--upstream-command=x", "--max-answer-bytes", "0"], "at least 1"),
        (["-o", "a", "--upstream-command=x", "stray"], "unexpected argument"),
        (["-o"], "-o needs a value"),
    ],
)
def test_u2_record_usage_errors_are_one_line(argv, message):
    with pytest.raises(UsageError, match=message):
        parse_record(argv)


def test_u2_replay_flags():
    config = parse_replay(["s.cassette", "--unmatched=nearest", "--count-file", "c.json",
                           "--listen", "127.0.0.1:0"])  # fmt: skip
    assert not isinstance(config, str)
    assert (config.cassette, config.unmatched, config.count_file, config.listen) == (
        "s.cassette",
        "nearest",
        "c.json",
        ("127.0.0.1", 0),
    )
    for argv, message in (([], "is required"), (["a", "b"], "one cassette only"),
                          (["a", "--unmatched", "guess"], "error or nearest"),
                          (["a", "--listen", "nope"], "HOST:PORT")):  # fmt: skip
        with pytest.raises(UsageError, match=message):
            parse_replay(argv)
    assert parse_replay(["--help"]) == "help"


# -- the recording pump -----------------------------------------------------------------------


class FakeUpstream:
    """An upstream over memory pipes: what record sends it, and what it answers."""

    def __init__(self) -> None:
        from harness.wire.transport import MemoryPipe

        self.writer = MemoryPipe()  # record -> upstream
        self.reader = MemoryPipe()  # upstream -> record


async def run_pump(tmp_path: Path, agent_lines: list[bytes], answer: bool, drain: float = 5.0):
    import asyncio

    from harness.cassette.record import pump
    from harness.wire.transport import MemoryPipe

    rec = recorder(tmp_path)
    agent_in, agent_out, upstream = MemoryPipe(), MemoryPipe(), FakeUpstream()
    logged: list[str] = []
    for line in agent_lines:
        await agent_in.write_line(line)
    await agent_in.close()

    async def server() -> None:
        while (line := await upstream.writer.read_line()) is not None:
            message = json.loads(line)
            if answer and "id" in message:
                await upstream.reader.write_line(
                    b'{"jsonrpc":"2.0",  "id":%d,"result":{"ok":true}}' % message["id"]
                )

    serving = asyncio.ensure_future(server())
    await asyncio.wait_for(pump(rec, agent_in, agent_out, upstream, drain, logged.append), 10)
    serving.cancel()
    await agent_out.close()
    seen = []
    while (line := await agent_out.read_line()) is not None:
        seen.append(line)
    return rec, seen, logged


@pytest.mark.anyio
async def test_u2_record_forwards_unchanged_and_waits_for_open_answers_after_the_end(tmp_path):
    rec, seen, logged = await run_pump(tmp_path, [call("book", {"n": 1})], answer=True)
    assert seen == [b'{"jsonrpc":"2.0",  "id":1,"result":{"ok":true}}']  # byte for byte
    (exchange,) = rec.cassette().exchanges
    assert exchange.tool == "book" and exchange.result == {"ok": True}
    assert logged == []


@pytest.mark.anyio
async def test_u2_record_ends_after_the_drain_and_leaves_unanswered_requests_out(tmp_path):
    rec, seen, logged = await run_pump(tmp_path, [call("book", {"n": 1})], answer=False, drain=0.1)
    assert seen == [] and rec.cassette().exchanges == []
    assert logged == ["1 request(s) unanswered at the end: not recorded"]


@pytest.mark.anyio
async def test_u2_v4_a_message_past_the_limit_ends_the_recording_with_one_line(tmp_path):
    import asyncio

    from harness.cassette.record import pump
    from harness.wire.transport import MemoryPipe

    agent_in, agent_out, upstream = MemoryPipe(max_bytes=100), MemoryPipe(), FakeUpstream()
    await agent_in.write_line(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    await agent_in.write_line(b"x" * 200)
    logged: list[str] = []
    rec = recorder(tmp_path)
    await asyncio.wait_for(pump(rec, agent_in, agent_out, upstream, 1.0, logged.append), 10)
    assert logged == ["ERROR: the agent: a message is larger than 100 bytes; the session ends "
                      "there (what came before is recorded)"]  # fmt: skip
    assert [e.method for e in rec.cassette().exchanges] == ["notifications/initialized"]


def test_u2_what_the_recorder_cannot_replay_stays_out_and_the_cassette_loads(tmp_path):
    rec = recorder(tmp_path)
    for i, params in enumerate(([], {"arguments": {}}, {"name": ""}, {"name": 5}), start=1):
        rec.from_agent(json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                                   "params": params}).encode())  # fmt: skip
    rec.from_agent(b'{"jsonrpc":"2.0","id":9,"method":""}')
    rec.from_agent(b'{"jsonrpc":"2.0","method":""}')
    rec.from_agent(b"not json at all")
    rec.from_agent(call("book", [1], 10))  # type: ignore[arg-type]
    for i in (*range(1, 5), 9, 10):
        rec.from_upstream(b'{"jsonrpc":"2.0","id":%d,"error":{"code":-32602,"message":"no"}}' % i)
    path = tmp_path / "odd.cassette"
    path.write_text(rec.cassette().text(), encoding="utf-8")
    (only,) = load(path).exchanges
    assert (only.tool, only.arguments, only.error["code"]) == ("book", {}, -32602)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=8,
)  # fmt: skip
_MESSAGE = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0")},
    optional={"id": st.integers(0, 3) | st.text(max_size=2), "method": st.sampled_from(
        ["tools/call", "tools/list", "initialize", "", "notifications/progress"]) | st.text(
        max_size=4), "params": _JSON | st.fixed_dictionaries({"name": st.text(max_size=3), "arguments": _JSON}),
        "result": _JSON, "error": _JSON},
)  # fmt: skip


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.tuples(st.booleans(), _MESSAGE | st.lists(_MESSAGE, max_size=2)), max_size=12))
def test_u2_whatever_the_two_sides_send_the_recorders_cassette_loads(tmp_path, traffic):
    rec = recorder(tmp_path)
    for from_agent, message in traffic:
        (rec.from_agent if from_agent else rec.from_upstream)(json.dumps(message).encode())
    path = tmp_path / "any.cassette"
    path.write_text(rec.cassette().text(), encoding="utf-8")
    replayer = Replayer(load(path))
    for _, message in traffic:  # and the replay answers anything without raising
        replayer.answer_line(json.dumps(message).encode())


def test_u2_v4_a_cassette_is_read_bounded(tmp_path, monkeypatch):
    import harness.cassette.format as fmt

    path = cassette(tmp_path)
    monkeypatch.setattr(fmt, "MAX_CASSETTE_CHARS", 200)
    with pytest.raises(CassetteError, match=r"s.cassette:3: the cassette is larger than"):
        load(path)
    monkeypatch.setattr(fmt, "MAX_LINE_BYTES", 50)
    with pytest.raises(CassetteError, match=r"s.cassette:2: a line is longer than 50 bytes"):
        load(path)


def test_u2_v11_recording_stops_writing_down_at_the_cassettes_bound(tmp_path, monkeypatch):
    import harness.cassette.record as record_module

    monkeypatch.setattr(record_module, "MAX_CASSETTE_CHARS", 100)
    rec = recorder(tmp_path)
    logged: list[str] = []
    rec.log = logged.append
    for i in range(1, 4):
        rec.from_agent(call("book", {"n": i}, i))
        rec.from_upstream(b'{"jsonrpc":"2.0","id":%d,"result":{"ok":%d}}' % (i, i))
    cassette_ = rec.cassette()
    assert len(cassette_.exchanges) == 1 and cassette_.header["cut_after"] == 1
    assert logged == ["the cassette reached 512 MiB: later exchanges are forwarded, not written"]


def test_u2_other_requests_match_without_meta_and_null_members(tmp_path):
    page2 = {"tools": [{"name": "more"}]}
    path = cassette(tmp_path, {"type": "request", "method": "tools/list",
                               "params": {"cursor": "p2"}, "result": page2})  # fmt: skip
    replayer = Replayer(load(path))
    first = b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":null,"_meta":{}}}'
    assert answer(replayer, first)["result"] == TOOLS
    second = b'{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"p2"}}'
    assert answer(replayer, second)["result"] == page2
    missing = answer(replayer, b'{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{'
                               b'"cursor":"p3"}}')  # fmt: skip
    assert 'no recorded tools/list with the params {"cursor":"p3"}' in missing["error"]["message"]


# -- Z6: cassettes are answers, not state -----------------------------------------------------

WRITES = {"tools": [
    {"name": "create_booking", "inputSchema": {"type": "object"}},
    {"name": "put_booking", "inputSchema": {"type": "object"},
     "annotations": {"idempotentHint": True, "readOnlyHint": False}},
    {"name": "execute_sql", "description": "Run SQL on the database",
     "inputSchema": {"type": "object", "properties": {"sql": {"type": "string"}}}},
]}  # fmt: skip


def recorded_calls(tmp_path: Path, *exchanges: Any) -> Replayer:
    path = write(tmp_path / "w.cassette", HEADER,
                 {"type": "request", "method": "initialize", "params": {},
                  "result": {"serverInfo": {"name": "shop", "version": "1"}}},
                 {"type": "request", "method": "tools/list", "params": {}, "result": WRITES},
                 *exchanges)  # fmt: skip
    return Replayer(load(path), str(path))


def test_z6_a_write_repeated_beyond_the_recording_is_unknown_never_a_success(tmp_path):  # Z6
    replayer = recorded_calls(tmp_path, {"type": "call", "tool": "create_booking",
                                         "arguments": {"n": 1}, "result": booked(1)})  # fmt: skip
    first = answer(replayer, call("create_booking", {"n": 1}, 1))
    second = answer(replayer, call("create_booking", {"n": 1}, 2))
    assert first["result"] == booked(1)
    assert "unknown" in second["error"]["message"]
    (op,) = replayer.count()["operations"]
    assert (op["answered"], op["succeeded"], op["answeredFirst"], op["unknown"]) == (2, 1, 1, 1)


def test_z6_a_recorded_repeat_is_answered_from_the_recording(tmp_path):  # Z6
    same = {"type": "call", "tool": "create_booking", "arguments": {"n": 1}}
    replayer = recorded_calls(tmp_path, {**same, "result": booked(1)},
                              {**same, "result": booked(2)})  # fmt: skip
    answers = [answer(replayer, call("create_booking", {"n": 1}, i)) for i in (1, 2, 3)]
    assert [a.get("result") for a in answers[:2]] == [booked(1), booked(2)]
    assert "error" in answers[2]
    (op,) = replayer.count()["operations"]
    assert (op["answeredFirst"], op["answeredFromRecordedRepeat"], op["unknown"]) == (1, 1, 1)


def test_z6_reads_and_idempotent_writes_repeat_the_last_answer(tmp_path):  # Z6 E1
    replayer = recorded_calls(
        tmp_path,
        {"type": "call", "tool": "put_booking", "arguments": {"n": 1}, "result": booked(1)},
        {"type": "call", "tool": "execute_sql", "arguments": {"sql": "SELECT count(*) FROM b"},
         "result": booked(2)},
        {"type": "call", "tool": "execute_sql",
         "arguments": {"sql": "INSERT INTO b (n) VALUES (1)"}, "result": booked(3)},
    )  # fmt: skip
    for i in (1, 2):
        assert answer(replayer, call("put_booking", {"n": 1}, i))["result"] == booked(1)
        poll = call("execute_sql", {"sql": "SELECT count(*) FROM b"}, 10 + i)
        assert answer(replayer, poll)["result"] == booked(2)
    insert = {"sql": "INSERT INTO b (n) VALUES (1)"}
    assert answer(replayer, call("execute_sql", insert, 20))["result"] == booked(3)
    assert "error" in answer(replayer, call("execute_sql", insert, 21))  # Z1: an INSERT
    ops = {o["arguments"].get("sql", o["tool"]): o for o in replayer.count()["operations"]}
    assert ops["put_booking"]["unknown"] == 0 and ops[insert["sql"]]["unknown"] == 1


def test_z6_idempotent_tools_flag_makes_a_repeat_answered(tmp_path):  # Z6 E1
    recorded = {"type": "call", "tool": "create_booking", "arguments": {"n": 1},
                "result": booked(1)}  # fmt: skip
    plain = recorded_calls(tmp_path, recorded)
    path = Path(plain.path)
    flagged = Replayer(load(path), str(path), idempotent_tools=("create_booking",))
    for i in (1, 2):
        assert answer(flagged, call("create_booking", {"n": 1}, i))["result"] == booked(1)
    assert parse_replay(["x.cassette", "--idempotent-tools", "create_*"]).idempotent_tools == (
        "create_*",)  # fmt: skip

"""V17: one cassette schema, checked whole before a replay serves anything, and a replay that
answers every well-formed request exactly once (one line or one JSON-RPC error), whatever its
params and `_meta` hold; the recorder writes nothing that schema refuses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.cassette import CassetteError, Replayer, load
from harness.cassette.args import parse_record
from harness.cassette.record import Recorder

HEADER = {"cassette": "agent-harness", "version": 1}
OK = {"content": [{"type": "text", "text": "booked"}]}
PROGRESS = {"method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}


def write(path: Path, *lines: Any) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def call_line(**answer: Any) -> dict[str, Any]:
    return {"type": "call", "tool": "book", "arguments": {"n": 1}, **answer}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        # A notification that carries an id and a result would be replayed as a forged answer.
        (call_line(result=OK, notifications=[{"method": "x", "id": 7, "result": OK}]),
         "a notification may not hold 'id'"),
        (call_line(result=OK, notifications=[{"id": 7, "result": OK}]),
         "a notification may not hold 'id'"),
        (call_line(result=OK, notifications=[{"method": "x", "error": {}}]),
         "a notification may not hold 'error'"),
        (call_line(result=OK, notifications=[5]), "a notification must be a JSON object"),
        (call_line(result=OK, notifications=[{"method": ""}]), "needs its method"),
        (call_line(result=OK, notifications=[{"method": "x", "params": "p"}]),
         "params must be an object or an array"),
        (call_line(result=OK, notifications={"method": "x"}), "notifications must be a list"),
        ({"type": "notification", "from": "server", "method": "x", "id": 1},
         "a notification line may not hold 'id'"),
        ({"type": "notification", "from": "server", "method": "x", "result": {}},
         "a notification line may not hold 'result'"),
        (call_line(result=5), "a result must be a JSON object"),
        (call_line(result=None), "a result must be a JSON object"),
        (call_line(result=[OK]), "a result must be a JSON object"),
        (call_line(error={}), "an error needs an integer code"),
        (call_line(error={"code": "1", "message": "no"}), "an error needs an integer code"),
        (call_line(error={"code": 1.5, "message": "no"}), "an error needs an integer code"),
        (call_line(error={"code": 1}), "an error needs a string message"),
        (call_line(error={"code": 1, "message": 5}), "an error needs a string message"),
        (call_line(error="no"), "an error must be a JSON object"),
        (call_line(result=OK, id=3), "a call line may not hold 'id'"),
        ({"type": "request", "method": "x", "params": "p", "result": {}},
         "params must be an object or an array"),
    ],
)  # fmt: skip
def test_v17_a_line_that_is_no_jsonrpc_shape_is_refused_in_one_line(tmp_path, line, message):
    # V17
    path = write(tmp_path / "bad.cassette", HEADER, call_line(result=OK), line)
    with pytest.raises(CassetteError) as caught:
        load(path)
    said = str(caught.value)
    assert said.startswith(f"{path}:3: ") and message in said, said
    assert "\n" not in said


def test_v17_a_line_that_is_not_json_deep_inside_is_refused_without_building_it(tmp_path):
    # V17: validated whole, also where a value is nested far below the first levels.
    path = tmp_path / "deep.cassette"
    bad = '{"type":"call","tool":"t","arguments":{},"result":{"x":' + "[" * 3000 + "1,]" + "]" * 2999 + "}}"  # fmt: skip
    path.write_text(json.dumps(HEADER) + "\n" + bad + "\n")
    with pytest.raises(CassetteError, match=r"deep.cassette:2: not JSON"):
        load(path)


def _replayer(tmp_path: Path) -> Replayer:
    path = write(tmp_path / "ok.cassette", HEADER,
                 {"type": "request", "method": "initialize", "params": {}, "result": {}},
                 call_line(result=OK, notifications=[PROGRESS]))  # fmt: skip
    return Replayer(load(path))


def _request(rid: Any, method: str, params: Any) -> bytes:
    body = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not ...:
        body["params"] = params
    return json.dumps(body).encode()


METAS = [None, 5, "text", [], [1], {}, {"progressToken": None}, {"progressToken": [1]}, True]


@pytest.mark.parametrize("meta", METAS)
@pytest.mark.parametrize("method", ["tools/call", "tools/list", "ping", "initialize"])
def test_v17_replay_answers_a_request_once_whatever_its_meta(tmp_path, meta, method):
    # V17: "_meta": null killed the replay with a traceback (and stopped an HTTP session).
    replayer = _replayer(tmp_path)
    params = {"_meta": meta}
    if method == "tools/call":
        params |= {"name": "book", "arguments": {"n": 1}}
    out = [json.loads(x) for x in replayer.answer_line(_request(7, method, params))]
    answers = [m for m in out if "id" in m]
    assert len(answers) == 1 and answers[0]["id"] == 7
    assert ("result" in answers[0]) != ("error" in answers[0])
    if method == "tools/call":
        assert answers[0]["result"] == OK
        # A progress notification goes only to a request that asked for progress.
        wanted = isinstance(meta, dict) and meta.get("progressToken") is not None
        notes = [m for m in out if "id" not in m]
        assert [n["params"]["progressToken"] for n in notes] == ([meta["progressToken"]] if wanted else [])


@pytest.mark.parametrize(
    ("line", "rid", "code"),
    [
        (b"[]", None, -32600),
        (b"5", None, -32600),
        (b'{"jsonrpc":"2.0","id":1}', 1, -32600),
        (b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', None, -32600),
        (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', None, -32600),
        (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', None, -32600),
        (b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":[1]}', 2, -32601),
        (b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":null}}', 3, None),
        (b"{nope", None, -32700),
    ],
)
def test_v17_replay_answers_what_is_not_a_request_with_one_jsonrpc_error(
    tmp_path, line, rid, code
):
    # V17: one line each, never nothing for a message with an id, never a traceback.
    (out,) = _replayer(tmp_path).answer_line(line)
    message = json.loads(out)
    assert message["id"] == rid
    if code is None:  # an unmatched call: a tool error, as for any call not recorded
        assert message["result"]["isError"] is True
    else:
        assert message["error"]["code"] == code


def test_v17_replay_leaves_notifications_and_answers_unanswered(tmp_path):
    replayer = _replayer(tmp_path)
    assert replayer.answer_line(b'{"jsonrpc":"2.0","method":"notifications/initialized"}') == []
    assert replayer.answer_line(b'{"jsonrpc":"2.0","id":"s1","result":{}}') == []


def test_v17_the_recorder_writes_no_answer_the_schema_refuses(tmp_path):
    # V17: one schema, so a recording always loads: an answer that is no JSON-RPC result
    # (a number, an error without a code) is forwarded, not written, and the log says so.
    config = parse_record(["--upstream-command=x", "-o", str(tmp_path / "c.cassette")])
    assert not isinstance(config, str)
    recorder, said = Recorder(config), []
    recorder.log = said.append
    for rid, answer in ((1, {"result": 5}), (2, {"error": {}}), (3, {"result": OK})):
        recorder.from_agent(json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                                        "params": {"name": "book", "arguments": {}}}).encode())  # fmt: skip
        recorder.from_upstream(json.dumps({"jsonrpc": "2.0", "id": rid, **answer}).encode())
    recorder.from_upstream(b'{"jsonrpc":"2.0","method":"notifications/message","params":"hi"}')
    path = tmp_path / "c.cassette"
    path.write_text(recorder.cassette().text())
    (kept,) = load(path).exchanges
    assert kept.result == OK
    assert len(said) == 3 and all(line.startswith("not recorded: ") for line in said)

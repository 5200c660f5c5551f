"""Round 4's fuzzing of cassettes (V17, V18, V20): a seeded generator writes valid cassettes
(tools with odd names and schemas, calls with nested, numeric and Unicode arguments, results,
errors, omitted answers, progress and log notifications) and hostile ones (each a valid one
with one line broken in one of many ways), and plays an agent against `agent-harness replay`,
a real process, over stdio and over --listen.

Whatever comes: a hostile cassette is refused before anything is served, in one line naming
its file and line; a valid one is served so that every request gets exactly one answer (the
recorded one for a recorded call, numbers by value), whatever its `_meta` holds, every
progress notification carries the agent's token and goes only to a request that asked for
progress, junk gets a JSON-RPC error, notifications get nothing, and the count file (the
ground truth of a replay) counts every call answered. Never a traceback.

Seeds: 1, 2 and 3 in `make test`; CASSETTE_FUZZ_SEED=N replays seed N alone (docs/security.md).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from harness.cassette import CassetteError, load
from tests.support.listenkit import open_session, post, proxy_process, session_headers
from tests.support.proxyproc import DEADLINE_S

pytestmark = [pytest.mark.slow, pytest.mark.anyio]
SEEDS = [int(os.environ["CASSETTE_FUZZ_SEED"])] if "CASSETTE_FUZZ_SEED" in os.environ else [1, 2, 3]
HEADER = {"cassette": "agent-harness", "version": 1}
HOSTILE_PER_SEED = 60  # checked by the loader; a few of them by a real replay too
TEXTS = ["ok", "", "é\u00e9ü", "日本語", "emoji 🎉", "quote \" and \\ backslash", "\u2028line",
         "tab\tnew\nline", "<b>html</b>", "x" * 300]  # fmt: skip


def _scalar(rng: random.Random) -> Any:
    return rng.choice([0, 1, -7, 129, 2**53 + 1, 1.5, 129.5, True, False, None, *TEXTS])


def _value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 3 or roll < 0.5:
        return _scalar(rng)
    if roll < 0.75:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(["a", "b", "key", "idempotency_key", "password", "é", "n"]) + str(i):
            _value(rng, depth + 1) for i in range(rng.randrange(4))}  # fmt: skip


def _tool(rng: random.Random, i: int) -> dict[str, Any]:
    name = rng.choice(["book", "search", "write_file", "get-x", "ns__tool", "überall"]) + f"{i}"
    schema = {"type": "object", "properties": {
        "password": {"type": "string"}, "idempotency_key": {"type": "string"},
        "amount": {"type": "number"}}}  # fmt: skip
    tool: dict[str, Any] = {"name": name, "inputSchema": schema}
    if rng.random() < 0.5:
        tool["annotations"] = {"readOnlyHint": rng.random() < 0.5,
                               "idempotentHint": rng.random() < 0.5}  # fmt: skip
    return tool


def _answer(rng: random.Random) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.65:
        result: dict[str, Any] = {"content": [{"type": "text", "text": rng.choice(TEXTS)}]}
        if rng.random() < 0.3:
            result["isError"] = True
        if rng.random() < 0.2:
            result["structuredContent"] = {"v": _value(rng)}
        return {"result": result}
    if roll < 0.9:
        error: dict[str, Any] = {"code": rng.choice([-32602, -32000, 1, 0]),
                                 "message": rng.choice(TEXTS)}  # fmt: skip
        if rng.random() < 0.5:
            error["data"] = _value(rng)
        return {"error": error}
    return {"omitted": {"bytes": rng.randrange(10**6, 10**7)}}


def valid_cassette(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The lines of a valid cassette, and the tools it lists."""
    tools = [_tool(rng, i) for i in range(rng.randrange(1, 5))]
    init = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
            "serverInfo": {"name": "fuzz", "version": "1"}}  # fmt: skip
    lines: list[dict[str, Any]] = [
        HEADER,
        {"type": "request", "method": "initialize", "params": {}, "result": init},
        {"type": "request", "method": "tools/list", "params": {}, "result": {"tools": tools}},
    ]
    seen: set[str] = set()
    for _ in range(rng.randrange(2, 9)):
        tool = rng.choice(tools)["name"]
        arguments = {"n": len(seen), **{f"k{i}": _value(rng) for i in range(rng.randrange(3))}}
        key = json.dumps([tool, arguments], sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        call: dict[str, Any] = {"type": "call", "tool": tool, "arguments": arguments,
                                **_answer(rng)}  # fmt: skip
        notes = []
        if rng.random() < 0.5:
            notes.append({"method": "notifications/progress",
                          "params": {"progressToken": "recorded", "progress": 1, "total": 2}})  # fmt: skip
        if rng.random() < 0.3:
            notes.append({"method": "notifications/message",
                          "params": {"level": "info", "data": rng.choice(TEXTS)}})  # fmt: skip
        if notes:
            call["notifications"] = notes
        lines.append(call)
        if rng.random() < 0.2:
            lines.append({"type": "notification", "from": rng.choice(["agent", "server"]),
                          "method": "notifications/x", "params": {"v": _value(rng)}})  # fmt: skip
    return lines, tools


# -- hostile: one line of a valid cassette broken, and whether the loader must refuse it ------


def _breaks(rng: random.Random) -> list[tuple[str, Any]]:
    """(what, how) pairs; `how(line)` gives the broken line's text."""
    deep = "[" * 3000 + "]" * 3000

    def with_(**members: Any) -> Any:
        return lambda line: json.dumps({**line, **members})

    def without(name: str) -> Any:
        return lambda line: json.dumps({k: v for k, v in line.items() if k != name})

    return [
        ("result 5", with_(result=5)), ("result null", with_(result=None)),
        ("result list", with_(result=[1])), ("error {}", with_(error={})),
        ("error code text", with_(error={"code": "1", "message": "m"})),
        ("error code float", with_(error={"code": 1.5, "message": "m"})),
        ("error without message", with_(error={"code": 1})),
        ("notification with id and result",
         with_(notifications=[{"method": "x", "id": 1, "result": {}}])),
        ("notification answer", with_(notifications=[{"id": 1, "result": {}}])),
        ("notification error", with_(notifications=[{"method": "x", "error": {"code": 1,
                                                                               "message": "m"}}])),
        ("notification string", with_(notifications=["x"])),
        ("notification params text", with_(notifications=[{"method": "x", "params": "p"}])),
        ("notifications object", with_(notifications={"method": "x"})),
        ("unknown member", with_(id=7)), ("answer twice", with_(result={}, error={"code": 1,
                                                                                 "message": "m"})),
        ("type unknown", with_(type="song")), ("type missing", without("type")),
        ("truncated", lambda line: json.dumps(line)[: max(1, len(json.dumps(line)) // 2)]),
        ("not utf-8", lambda line: json.dumps(line)[:-1] + "\udcff}"),
        ("deep junk", lambda line: deep + "x"),
        ("deep inside", lambda line: json.dumps(
            {**{k: v for k, v in line.items() if k not in ("error", "omitted")},
             "result": {"v": json.loads("[" * 900 + "]" * 900)}})),
        ("NaN", lambda line: json.dumps(line)[:-1] + ', "x": NaN}'),
        ("trailing data", lambda line: json.dumps(line) + " {}"),
        ("array line", lambda line: json.dumps([line])),
    ]  # fmt: skip


# Breaks that leave a valid line (the loader keeps the cassette).
STILL_VALID = {"deep inside"}


def _write(path: Path, lines: list[Any]) -> Path:
    text = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    return path


@pytest.mark.parametrize("seed", SEEDS)
def test_v17_hostile_cassettes_are_refused_in_one_line_at_their_line(
    tmp_path, agent_harness_bin, seed
):
    # V17: validated whole before use; the refusal names FILE:LINE; a real replay serves
    # nothing from a refused cassette and says so in one line.
    rng = random.Random(seed)
    breaks = _breaks(rng)
    for case in range(HOSTILE_PER_SEED):
        lines, _ = valid_cassette(rng)
        what, how = rng.choice(breaks)
        target = rng.randrange(1, len(lines))
        if lines[target].get("type") == "notification" and (
            what.startswith("notification") or what in STILL_VALID
        ):
            target = 1  # notifications and answers ride on a request or call line
        broken = [*lines]
        broken[target] = how(lines[target])
        path = _write(tmp_path / f"s{seed}-{case}.cassette", broken)
        where = f"seed {seed} case {case} ({what}, line {target + 1})"
        if what in STILL_VALID:
            load(path)
            continue
        with pytest.raises(CassetteError) as caught:
            load(path)
        said = str(caught.value)
        assert said.startswith(f"{path}:{target + 1}: ") and "\n" not in said, f"{where}: {said}"
        if case % 15 == 0:  # a real replay too: one line, exit 1, nothing served
            done = subprocess.run([str(agent_harness_bin), "replay", str(path)],
                                  input=b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n',
                                  capture_output=True, timeout=DEADLINE_S)  # fmt: skip
            err = done.stderr.decode().strip().splitlines()
            assert done.returncode == 1 and done.stdout == b"" and len(err) == 1, (where, err)


# -- valid: an agent plays against the replay ------------------------------------------------


def _meta(rng: random.Random) -> tuple[Any, Any]:
    """(the request's `_meta`, or ... for none; the progress token it asks for, or None)."""
    roll = rng.random()
    if roll < 0.3:
        return ..., None
    if roll < 0.6:
        token = rng.choice([7, "tok", 0, "é"])
        return {"progressToken": token}, token
    return rng.choice([None, 5, "x", [], [1], {}, {"other": 1}, True]), None


def _respelled(value: Any, rng: random.Random) -> Any:
    """The same arguments as an agent may spell them: whole numbers as decimals (E6)."""
    if isinstance(value, dict):
        return {k: _respelled(v, rng) for k, v in reversed(list(value.items()))}
    if isinstance(value, list):
        return [_respelled(v, rng) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**50:
        return float(value) if rng.random() < 0.5 else value
    return value


def session_script(rng: random.Random, lines: list[dict[str, Any]]) -> tuple[list[Any], dict]:
    """What the agent sends (messages, or raw text lines) and what it must get back: per
    request id, ("result", value) / ("error", code or None) / ("tool error", None), and the
    progress token it asked for."""
    sent: list[Any] = []
    expect: dict[Any, tuple[str, Any, Any]] = {}
    rid = 0

    def request(method: str, params: Any, want: tuple[str, Any]) -> None:
        nonlocal rid
        rid += 1
        meta, token = _meta(rng)
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            params = dict(params)
            if meta is not ...:
                params["_meta"] = meta
            body["params"] = params
        sent.append(body)
        expect[rid] = (*want, token)

    init = lines[1]["result"]
    request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "fuzz", "version": "1"}}, ("result", init))  # fmt: skip
    sent.append({"jsonrpc": "2.0", "method": "notifications/initialized"})
    request("tools/list", {}, ("result", lines[2]["result"]))
    calls = [x for x in lines if x.get("type") == "call"]
    rng.shuffle(calls)
    for call in calls:
        if "result" in call:
            want: tuple[str, Any] = ("result", call["result"])
        elif "error" in call:
            want = ("error", call["error"])
        else:
            want = ("error", -32603)  # omitted when recorded
        request("tools/call", {"name": call["tool"],
                               "arguments": _respelled(call["arguments"], rng)}, want)  # fmt: skip
        if rng.random() < 0.3:
            sent.append(rng.choice(["not json", "[]", "5", '{"jsonrpc":"2.0","id":null}']))
        if rng.random() < 0.2:
            request("ping", {}, ("result", {}))
    request("tools/call", {"name": "never_recorded", "arguments": {}}, ("tool error", None))
    return sent, expect


def check_answers(out: list[dict[str, Any]], expect: dict[Any, tuple[str, Any, Any]],
                  where: str) -> None:  # fmt: skip
    """Every request answered once as expected; progress only with the agent's token."""
    answered: dict[Any, dict[str, Any]] = {}
    notes: list[dict[str, Any]] = []
    for message in out:
        if isinstance(message, list):
            continue  # a batch answer to junk: not one of the script's requests
        if "id" not in message:
            notes.append(message)
            continue
        rid = message["id"]
        if rid in expect:
            assert rid not in answered, f"{where}: id {rid} answered twice"
            answered[rid] = message
            kind, value, token = expect[rid]
            progress = [n for n in notes if n.get("method") == "notifications/progress"]
            if token is None:
                assert not progress, f"{where}: progress for id {rid}, which asked for none"
            else:
                assert all(n["params"]["progressToken"] == token for n in progress), where
            notes = []
            if kind == "result":
                assert message.get("result") == value, f"{where}: id {rid}: {message}"
            elif kind == "tool error":
                assert message["result"]["isError"] is True, f"{where}: {message}"
            elif isinstance(value, dict):
                assert message.get("error") == value, f"{where}: id {rid}: {message}"
            else:
                assert message["error"]["code"] == value, f"{where}: id {rid}: {message}"
        else:  # junk: a JSON-RPC error whose id is null
            assert rid is None and "error" in message, f"{where}: {message}"
    assert set(answered) == set(expect), f"{where}: unanswered {set(expect) - set(answered)}"


def _line(message: Any) -> bytes:
    return (message if isinstance(message, str) else json.dumps(message)).encode() + b"\n"


@pytest.mark.parametrize("seed", SEEDS)
def test_v17_a_replay_answers_every_request_of_a_generated_session_once(
    tmp_path, agent_harness_bin, seed
):
    # V17 (and V20: the agent's end of input is a regular file here)
    rng = random.Random(seed * 1000)
    for case in range(4):
        lines, _ = valid_cassette(rng)
        path = _write(tmp_path / f"v{seed}-{case}.cassette", lines)
        sent, expect = session_script(rng, lines)
        count = tmp_path / f"v{seed}-{case}.count.json"
        stdin = tmp_path / f"v{seed}-{case}.in"
        stdin.write_bytes(b"".join(_line(m) for m in sent))
        with stdin.open("rb") as f:
            done = subprocess.run([str(agent_harness_bin), "replay", str(path), "--count-file",
                                   str(count)], stdin=f, capture_output=True,
                                  timeout=DEADLINE_S)  # fmt: skip
        where = f"seed {seed} case {case}"
        assert done.returncode == 0 and b"Traceback" not in done.stderr, (where, done.stderr)
        out = [json.loads(x) for x in done.stdout.splitlines()]
        check_answers(out, expect, where)
        tools_calls = sum(1 for m in sent if isinstance(m, dict) and m.get("method") == "tools/call")
        assert json.loads(count.read_text())["calls_answered"] == tools_calls, where


@pytest.mark.parametrize("seed", SEEDS)
async def test_v17_a_replay_over_listen_answers_a_generated_session(
    tmp_path, agent_harness_bin, seed
):
    # V17: over --listen too, every request of the session answered, `_meta` of any type.
    rng = random.Random(seed * 7919)
    lines, _ = valid_cassette(rng)
    path = _write(tmp_path / "l.cassette", lines)
    sent, expect = session_script(rng, lines)
    argv = [str(agent_harness_bin), "replay", str(path), "--listen", "127.0.0.1:0"]
    out: list[Any] = []
    async with proxy_process(argv) as replay, aiohttp.ClientSession() as http:
        sid = await open_session(http, replay.url)
        headers = session_headers(sid)
        for message in sent:
            if not isinstance(message, dict) or message.get("method") in (
                "initialize", "notifications/initialized"):  # the session has begun already
                continue
            status, got = await asyncio.wait_for(post(http, replay.url, message, headers),
                                                 DEADLINE_S)  # fmt: skip
            assert status in (200, 202), (seed, message, status)
            out += got
        assert "Traceback" not in replay.stderr
    expect = {rid: want for rid, want in expect.items() if rid != 1}  # initialize: above
    check_answers(out, expect, f"seed {seed}")

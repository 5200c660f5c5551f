"""V15: the one redaction step (harness/base/redact.py) by credential names and value shapes,
never by the bare word `key` and never inside a tool's schema; redacted before it is cut; an
argv's secrets by place; and a recording that keeps what a replay needs (an idempotency key,
a tool's inputSchema) while it loses what it must."""

from __future__ import annotations

import json

import pytest

from harness.base.redact import REDACTED, TextRedactor, secret_arguments, secret_name
from harness.cassette import Replayer
from harness.cassette.args import parse_record
from harness.cassette.format import load
from harness.cassette.record import Recorder


@pytest.mark.parametrize(
    ("name", "secret"),
    [("api_key", True), ("X-Api-Key", True), ("apiKey", True), ("private_key", True),
     ("client_secret", True), ("access_token", True), ("password", True), ("Cookie", True),
     ("Set-Cookie", True), ("Authorization", True), ("AWS_SECRET_ACCESS_KEY", True),
     ("idempotency_key", False), ("idempotencyKey", False), ("key", False),
     ("primary_key", False), ("sort_key", False), ("keyword", False), ("max_tokens", False),
     ("signature", False)],
)  # fmt: skip
def test_v15_names_say_secret_but_never_the_bare_word_key(name, secret):
    # V15
    assert secret_name(name) is secret


SHAPES = [
    "sk-proj-" + "Ab1" * 10,
    "sk-ant-api03-" + "Zz9" * 10,
    "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "ghp_" + "a1B2" * 9,
    "github_pat_" + "11AB" * 10,
    "AKIA" + "IOSFODNN7EXAMPLE",
    "xoxb-" + "1234-5678-abcdefgh",
    "AIza" + "SyA-" + "x" * 31,
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
]


@pytest.mark.parametrize("shape", SHAPES)
def test_v15_credential_shapes_are_redacted_wherever_they_stand(shape):
    # V15: nobody told the redactor these values; their shape is enough.
    text = TextRedactor().text(f"config: {shape}, and 'key={shape}'")
    assert text == f"config: {REDACTED}, and 'key={REDACTED}'"


@pytest.mark.parametrize("text", ["a task-list of risk-free items", "AKIAshort", "sk-short",
                                  "ghp_tooShort", "https://example.com/path"])  # fmt: skip
def test_v15_ordinary_text_near_the_shapes_is_kept(text):
    assert TextRedactor().text(text) == text


def test_v15_a_secret_across_the_cut_is_redacted_whole_before_it_is_cut():
    # V15: cut first, "agent-env-" (the first 10 characters of the secret) survived.
    secret = "agent-env-secret-0123456789"
    redactor = TextRedactor([secret])
    text = "x" * 90 + secret + " and more"
    kept = redactor.cut(text, 100)
    assert secret[:4] not in kept and kept.startswith("x" * 90)
    assert kept.endswith("[... 19 more bytes not kept]")  # "[REDACTED] and more"
    assert redactor.cut("short", 100) == "short"
    assert redactor.cut("é" * 3, 3) == "é\n[... 4 more bytes not kept]"  # no half character


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["a", "--api-key", "sk-1", "--password=hunter2"],
         ["a", "--api-key", REDACTED, f"--password={REDACTED}"]),
        (["env", "API_TOKEN=t0k", "STRIPE_KEY=k", "LANG=C", "run"],
         ["env", f"API_TOKEN={REDACTED}", f"STRIPE_KEY={REDACTED}", "LANG=C", "run"]),
        (["x", "--max-tokens", "100", "--idempotency-key", "k1", "--key", "5"],
         ["x", "--max-tokens", "100", "--idempotency-key", "k1", "--key", "5"]),
        (["x", "--token", "--verbose"], ["x", "--token", "--verbose"]),
    ],
)  # fmt: skip
def test_v15_an_argv_loses_its_secrets_by_place(argv, expected):
    # V15
    found = secret_arguments(argv)
    assert [found.get(i, a) for i, a in enumerate(argv)] == expected
    assert TextRedactor().argv(argv) == expected


TOOLS = {"tools": [{"name": "book", "inputSchema": {
    "type": "object", "required": ["password", "idempotency_key"],
    "properties": {"password": {"type": "string"}, "api_key": {"type": "string"},
                   "idempotency_key": {"type": "string"}}},
    "outputSchema": {"type": "object", "properties": {"token": {"type": "string"}}}}]}  # fmt: skip
CALL = {"name": "book", "arguments": {"idempotency_key": "order-77", "password": "hunter2-x",
                                      "key": "room-4"}}  # fmt: skip


def _recorded(tmp_path):
    config = parse_record(["--upstream-command=x", "-o", str(tmp_path / "c.cassette")])
    assert not isinstance(config, str)
    recorder = Recorder(config)
    for rid, method, params, result in (
        (1, "tools/list", {}, TOOLS),
        (2, "tools/call", CALL, {"content": [{"type": "text", "text": "booked"}]}),
    ):
        recorder.from_agent(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                                        "params": params}).encode())  # fmt: skip
        recorder.from_upstream(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode())
    path = tmp_path / "c.cassette"
    path.write_text(recorder.cassette().text())
    return path


def test_v15_a_recording_keeps_schemas_and_idempotency_keys_and_loses_passwords(tmp_path):
    # V15: recordings got `"type": "[REDACTED]"` inside inputSchema and lost every value of
    # a member named like `key`, so a keyed write could never be replayed.
    cassette = load(_recorded(tmp_path))
    listed, call = cassette.exchanges
    assert listed.result == TOOLS
    assert call.arguments == {"idempotency_key": "order-77", "password": REDACTED, "key": "room-4"}


def test_v15_a_recorded_keyed_call_is_replayed_by_its_key(tmp_path):
    # V15: the agent's call with the same idempotency key (and the password redacted, as the
    # recording has it) is answered from the recording, an exact match.
    replayer = Replayer(load(_recorded(tmp_path)))
    arguments = {**CALL["arguments"], "password": REDACTED}
    line = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                       "params": {"name": "book", "arguments": arguments}}).encode()  # fmt: skip
    answer = json.loads(replayer.answer_line(line)[-1])
    assert answer["result"]["content"][0]["text"] == "booked"
    assert [c["matched"] for c in replayer.count()["operations"]] == ["exact"]

"""One typed hand-off of a proxy's config (X1, issue 33): a program that starts
`agent-harness proxy` (the runner) writes its ProxyConfig to one file and passes
`--config FILE`; the proxy reads back exactly that config, checked as flags are (the fault plan
by the registry). The property runs over every config the parser can produce, and more.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.base.errors import UsageError
from harness.faults import ANY_TRANSPORT, FAULTS, PARAMS, users_of
from harness.proxy import ClassifierConfig, PlanConfig, ProxyConfig, parse, proxy_command
from harness.proxy.args import FLAGS
from harness.wire.http.headers import HeaderSpec, SecretValue
from harness.wire.http.limits import ListenLimits

# Free text: anything but NUL (not allowed in argv) and not empty (X1 refuses empty values).
text = st.text(st.characters(blacklist_characters="\x00"), min_size=1, max_size=12)
# A comma-list item: the parser splits on commas and strips each item.
item = text.map(lambda s: s.replace(",", "").strip()).filter(bool)
items = st.lists(item, min_size=1, max_size=3).map(tuple)
# K5: a key-field entry is FIELD or TOOL:FIELD, both parts non-empty
# (stripped again after the colon goes: "0\r:" would leave "0\r", which the parser strips)
key_part = item.map(lambda s: s.replace(":", "").strip()).filter(bool)
key_item = key_part | st.builds("{}:{}".format, key_part, key_part)
key_items = st.lists(key_item, min_size=1, max_size=3).map(tuple)
env_key = text.map(lambda s: s.replace("=", "")).filter(lambda s: s.strip() != "")
env_value = st.text(st.characters(blacklist_characters="\x00"), max_size=12)
positive = st.floats(min_value=1e-6, max_value=1e9, allow_nan=False)


@st.composite
def plans(draw: st.DrawFn) -> PlanConfig:
    kind = draw(st.sampled_from(["none", *ANY_TRANSPORT, "chaos"]))  # the fault registry
    chaos = kind == "chaos"
    faulty = kind != "none"
    params = {}
    for param in FAULTS[kind].params if kind in FAULTS else ():  # each within its bounds (H2)
        low = param.low + (1e-3 if param.low_open else 0)
        draw_value = st.integers if param.kind is int else st.floats
        params[param.field] = draw(draw_value(low, param.high))
    return PlanConfig(
        scenario=kind if kind not in ("none", "chaos") else None,
        chaos_error_rate=draw(st.floats(0, 1)) if chaos else None,
        seed=draw(st.none() | st.integers(-(2**63), 2**63)) if chaos else None,
        fault_delay_ms=draw(st.integers(0, 10**6)) if faulty else 0,
        **params,
    )


token = st.text("abcxyzABC-_0129!#$%&'*+.^`|~", min_size=1, max_size=10)
header_value = st.text(
    st.characters(blacklist_characters="\x00\r\n", blacklist_categories=("Cs",)), max_size=12
).map(str.strip)
headers = st.lists(
    st.builds(HeaderSpec, token, value=header_value.map(SecretValue))
    | st.builds(HeaderSpec, token, env=token),
    max_size=3,
    unique_by=lambda spec: spec.name.lower(),
).map(lambda specs: tuple(sorted(specs, key=lambda spec: spec.env is not None)))  # parse order
urls = st.builds(
    "{}://{}:{}/{}".format,
    st.sampled_from(["http", "https"]),
    st.sampled_from(["127.0.0.1", "localhost", "mcp.example", "[::1]"]),
    st.integers(1, 65535),
    st.sampled_from(["mcp", "", "a/b?x=1"]),
)
listens = st.none() | st.tuples(
    st.sampled_from(["127.0.0.1", "::1", "localhost", "0.0.0.0"]), st.integers(0, 65535)
)
origins = st.lists(st.sampled_from(["https://app.example", "http://localhost:3000"]),
                   max_size=2, unique=True).map(tuple)  # fmt: skip


@st.composite
def http_sides(draw: st.DrawFn) -> dict:
    """H1: an upstream URL with headers instead of a command, maybe an HTTP agent side."""
    listen = draw(listens)
    return {
        "upstream_command": None, "upstream_args": (), "upstream_cwd": None,
        "upstream_env": {}, "upstream_url": draw(urls), "upstream_headers": draw(headers),
        "listen": listen, "allowed_origins": draw(origins) if listen else (),
    }  # fmt: skip


command_configs = st.builds(
    ProxyConfig,
    upstream_command=text,
    upstream_args=st.lists(text, max_size=3).map(tuple),
    upstream_cwd=st.none() | text,
    upstream_env=st.dictionaries(env_key, env_value, max_size=3),
    plan=plans(),
    classifier=st.builds(
        ClassifierConfig,
        write_globs=st.none() | items,
        read_globs=st.just(()) | items,
        key_fields=key_items,
        keys_honoured=st.just(()) | items,
    ),
    audit_tools=st.booleans(),
    report_file=st.none() | text,
    event_log=st.none() | text,
    upstream_timeout_s=positive,
    max_message_bytes=st.integers(1024, 2**40),
    listen=listens,
    listen_limits=st.builds(  # V10: any bounds travel, not only the parser's defaults
        ListenLimits, st.integers(1, 10**6), positive, st.integers(1, 10**6), positive,
        positive, positive,
    ),  # fmt: skip
)
configs = command_configs | st.builds(
    lambda base, http: ProxyConfig(**{**base.__dict__, **http}), command_configs, http_sides()
)


def handed(config: ProxyConfig, folder: Path) -> ProxyConfig:
    """What a proxy started with `proxy_command(config)` reads: the flags after `proxy`."""
    argv = proxy_command(config, folder)
    flags = argv[argv.index("proxy") + 1 :]
    assert len(flags) == 1 and flags[0].startswith("--config=")  # one flag, one file
    parsed = parse(flags)
    assert parsed.config is not None
    return parsed.config


@settings(max_examples=300, deadline=None)
@given(configs)
def test_x1_the_config_file_gives_back_the_config_it_was_written_from(config: ProxyConfig) -> None:
    with tempfile.TemporaryDirectory() as folder:
        back = handed(config, Path(folder))
    assert back == config
    # V3: a header value given directly stays one that never shows itself
    assert all(isinstance(h.value, SecretValue) for h in back.upstream_headers if h.value)


def test_x1_every_flag_reaches_a_proxy_through_its_config_file(tmp_path: Path) -> None:  # X1
    # Every setting a flag can make travels in the file: a new flag whose setting the file
    # did not carry would be lost on the way from the runner to its proxy. The comma forms
    # are aliases of the repeatable flags; --config is the file itself.
    every = [
        ["--upstream-command=python3", "--upstream-arg=a", "--upstream-cwd=/tmp",
         "--upstream-env-var=K=V", "--mode", "chaos", "--error-rate", "0.5", "--seed", "7",
         "--fault-delay", "5", "--write-tools=w*", "--read-tools=r*", "--key-fields=k",
         "--keys-honoured=pay_*", "--idempotent-tools=put_*", "--distrust-annotations",
         "--statement-tools=execute_*", "--strict-errors", "--no-profiles",  # Z1 Z4 Z7
         "--audit-tools", "off", "--report-file=r.json", "--event-log=e.jsonl",
         "--upstream-timeout", "2.5", "--max-message-bytes", "4096", "--otel"],  # I3
        ["--upstream-url=http://127.0.0.1:8000/mcp", "--upstream-header=A: b",
         "--upstream-header-env=C=D", "--upstream-bearer-env=T", "--listen", "127.0.0.1:0",
         "--allowed-origin=https://app.example", "--max-sessions", "1",
         "--session-idle-timeout", "2", "--max-connections", "3", "--http-header-timeout", "4",
         "--http-body-timeout", "5", "--http-idle-timeout", "6", "--no-report-file"],  # Q3
        # H2: each fault parameter's flag, with a scenario that takes it (the registry)
        *(["--upstream-command=x", "--listen=127.0.0.1:0", "--scenario", users_of(param)[0],
           param.flag, param.text(param.high)] for param in PARAMS),
    ]  # fmt: skip
    given_flags = {arg.partition("=")[0] for argv in every for arg in argv if arg[:2] == "--"}
    aliases = {"--upstream-args", "--upstream-env", "--config"}
    assert given_flags == {flag.name for flag in FLAGS} - aliases
    for argv in every:
        config = parse(argv).config
        assert config is not None
        assert handed(config, tmp_path) == config


def test_x1_values_that_begin_with_dashes_travel_as_they_are(tmp_path: Path) -> None:  # X1
    config = ProxyConfig(upstream_command="--cmd", upstream_args=("--flag", "-x"))
    assert handed(config, tmp_path) == config


def test_x1_config_file_goes_alone(tmp_path: Path) -> None:  # X1
    argv = proxy_command(ProxyConfig(upstream_command="x"), tmp_path)
    with pytest.raises(UsageError, match="--scenario cannot go with it"):
        parse([argv[-1], "--scenario", "F1"])


def _refused(tmp_path: Path, body: str) -> str:
    path = tmp_path / "proxy.json"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(UsageError) as caught:
        parse(["--config", str(path)])
    message = str(caught.value)
    assert "\n" not in message and str(path) in message
    return message


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"plan": {"scenario": "F99"}}, "--scenario must be one of F1"),  # the registry
        ({"plan": {"scenario": "F2", "retry_after_s": 0}}, "--retry-after must be above 0"),
        ({"plan": {"chaos_error_rate": 2}}, "--error-rate must be between 0 and 1, got 2"),
        ({"plan": {"scenario": "F1", "chaos_error_rate": 0.5}}, "exclude each other"),
        ({"plan": {"scenaro": "F1"}}, "plan.scenaro: Unexpected keyword argument"),
        ({"classifier": {"key_fields": ["a:"]}}, "--key-fields entry 'a:'"),
        ({"upstream_timeout_s": "soon"}, "upstream_timeout_s"),
    ],
)
def test_x1_a_config_file_is_checked_as_flags_are(tmp_path: Path, change, says) -> None:  # X1
    body = json.loads(ProxyConfig(upstream_command="x").to_json())
    for key, value in change.items():
        body[key] = {**body[key], **value} if isinstance(value, dict) else value
    assert says in _refused(tmp_path, json.dumps(body))


@pytest.mark.parametrize("body", ["", "{", "[]", "null"])
def test_x1_a_file_that_is_no_config_is_one_line(tmp_path: Path, body: str) -> None:  # X1
    assert "not a proxy config" in _refused(tmp_path, body)


def test_x1_a_missing_config_file_is_one_line(tmp_path: Path) -> None:  # X1 V4
    with pytest.raises(UsageError, match="--config .*missing.json") as caught:
        parse(["--config", str(tmp_path / "missing.json")])
    assert "\n" not in str(caught.value)

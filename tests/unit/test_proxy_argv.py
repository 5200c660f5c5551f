"""`proxy_argv` inverts the flag parser (X1): parse(proxy_argv(config)) == config.

The runner starts `agent-harness proxy` from a ProxyConfig; whatever the config says must reach
the subprocess unchanged. The property runs over every config the parser can produce.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.faults import ANY_TRANSPORT, FAULTS, PARAMS, users_of
from harness.proxy import ClassifierConfig, PlanConfig, ProxyConfig, parse, proxy_argv
from harness.proxy.args import FLAGS
from harness.wire.http.headers import HeaderSpec, SecretValue
from harness.wire.http.limits import ListenLimits
from harness.wire.transport import DEFAULT_MAX_MESSAGE_BYTES

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
)
configs = command_configs | st.builds(
    lambda base, http: ProxyConfig(**{**base.__dict__, **http}), command_configs, http_sides()
)


@settings(max_examples=300, deadline=None)
@given(configs)
def test_x1_parse_of_proxy_argv_gives_back_the_config(config: ProxyConfig) -> None:  # X1
    assert parse(proxy_argv(config)).config == config


def test_x1_proxy_argv_writes_every_flag_that_sets_something() -> None:  # X1
    # A flag added to the parser but not to proxy_argv would be lost on the way to a proxy
    # subprocess. The comma forms are aliases of the repeatable flags.
    full = ProxyConfig(
        upstream_command="python3",
        upstream_args=("a",),
        upstream_cwd="/tmp",
        upstream_env={"K": "V"},
        plan=PlanConfig(chaos_error_rate=0.5, seed=7, fault_delay_ms=5),
        classifier=ClassifierConfig(
            write_globs=("w*",),
            read_globs=("r*",),
            keys_honoured=("pay_*",),
            idempotent_globs=("put_*",),
            distrust_annotations=True,
            statement_globs=("execute_*",),  # Z1
            strict_errors=True,  # Z4
            use_profiles=False,  # Z7
        ),  # fmt: skip
        report_file="r.json",
        event_log="e.jsonl",
        max_message_bytes=DEFAULT_MAX_MESSAGE_BYTES + 1,
    )
    # H2: each fault parameter's flag, from a scenario that takes it (the registry).
    faulted = [
        ProxyConfig(upstream_command="python3", plan=PlanConfig(scenario=users_of(param)[0]))
        for param in PARAMS
    ]
    http = ProxyConfig(
        upstream_url="http://127.0.0.1:8000/mcp",
        upstream_headers=(HeaderSpec("A", value=SecretValue("b")), HeaderSpec("C", env="D")),
        listen=("127.0.0.1", 0),
        allowed_origins=("https://app.example",),
        listen_limits=ListenLimits(1, 2.0, 3, 4.0, 5.0, 6.0),  # V10: none at its default
    )
    written = {
        arg.partition("=")[0]
        for config in (full, *faulted, http)
        for arg in proxy_argv(config)
        if arg.startswith("--")
    }
    aliases = {"--upstream-args", "--upstream-env"}
    assert written == {flag.name for flag in FLAGS} - aliases


def test_x1_proxy_argv_keeps_values_that_begin_with_dashes() -> None:  # X1
    config = ProxyConfig(upstream_command="--cmd", upstream_args=("--flag", "-x"))
    assert parse(proxy_argv(config)).config == config

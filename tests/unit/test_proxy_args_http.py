"""`agent-harness proxy` flags for streamable HTTP (H1): upstream URL, headers, --listen.

Table tests of the pure parser, like tests/unit/test_proxy_args.py; secrets given in header
flags must never appear in an error message or a repr.
"""

from __future__ import annotations

import pytest

from harness.base.errors import UsageError
from harness.proxy.args import ProxyConfig, help_text, parse
from harness.wire.http.headers import HeaderSpec, resolve

URL = ["--upstream-url", "http://127.0.0.1:8000/mcp"]
SECRET = "s3cr3t-token-value"


def config(*argv: str) -> ProxyConfig:
    parsed = parse(list(argv))
    assert parsed.config is not None
    return parsed.config


def refused(*argv: str) -> str:
    with pytest.raises(UsageError) as caught:
        parse(list(argv))
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_h1_upstream_url_instead_of_a_command():  # H1
    c = config(*URL)
    assert c.upstream_url == "http://127.0.0.1:8000/mcp"
    assert c.upstream_command is None
    assert c.listen is None


def test_h1_an_upstream_is_required_naming_both_ways():  # H1 X1
    message = refused("--scenario", "F1")
    assert "--upstream-command" in message and "--upstream-url" in message


def test_h1_command_and_url_exclude_each_other():  # H1
    assert "exclude" in refused(*URL, "--upstream-command", "node")


@pytest.mark.parametrize(
    "flag", ["--upstream-arg=x", "--upstream-args=a,b", "--upstream-cwd=/tmp",
             "--upstream-env=A=1", "--upstream-env-var=A=1"],
)  # fmt: skip
def test_h1_process_flags_are_refused_with_a_url(flag):  # H1
    assert "only with --upstream-command" in refused(*URL, flag)


@pytest.mark.parametrize("url", ["ftp://host/mcp", "127.0.0.1:8000/mcp", "http:///mcp",
                                 "http://host:99999/mcp"])  # fmt: skip
def test_h1_a_url_that_is_not_http_is_refused(url):  # H1
    assert "--upstream-url" in refused("--upstream-url", url)


def test_v3_a_refused_url_never_shows_its_password():  # H1 V3
    message = refused("--upstream-url", f"ftp://user:{SECRET}@host/mcp")
    assert SECRET not in message


def test_h1_headers_from_flags_and_environment():  # H1
    c = config(*URL, "--upstream-header", f"Authorization: Bearer {SECRET}",
               "--upstream-header-env", "X-Api-Key=MY_KEY")  # fmt: skip
    given, from_env = c.upstream_headers
    assert (given.name, given.value, given.env) == ("Authorization", f"Bearer {SECRET}", None)
    assert (from_env.name, from_env.value, from_env.env) == ("X-Api-Key", None, "MY_KEY")
    assert resolve(c.upstream_headers, {"MY_KEY": "k"}) == {
        "Authorization": f"Bearer {SECRET}", "X-Api-Key": "k",
    }  # fmt: skip


def test_v3_header_values_never_show_in_a_repr():  # H1 V3
    c = config(*URL, "--upstream-header", f"Authorization: Bearer {SECRET}")
    assert SECRET not in repr(c)
    assert SECRET not in repr(resolve(c.upstream_headers, {}))


def test_h1_a_missing_environment_variable_names_the_variable():  # H1
    with pytest.raises(KeyError) as caught:
        resolve((HeaderSpec("X-Api-Key", env="NOT_SET_ANYWHERE"),), {})
    assert caught.value.args == ("NOT_SET_ANYWHERE",)


@pytest.mark.parametrize("text", ["no-colon-here", "Bad Name: x", ": value"])
def test_h1_a_malformed_header_is_refused_without_echoing_its_value(text):  # H1 V3
    message = refused(*URL, "--upstream-header", text + SECRET)
    assert SECRET not in message


def test_h1_header_flags_need_a_url():  # H1
    assert "only with --upstream-url" in refused(
        "--upstream-command", "node", "--upstream-header", "A: b"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [("127.0.0.1:8765", ("127.0.0.1", 8765)), ("localhost:0", ("localhost", 0)),
     ("[::1]:9000", ("::1", 9000)), (":8000", ("127.0.0.1", 8000))],
)  # fmt: skip
def test_h1_listen_address_forms(text, expected):  # H1
    assert config(*URL, "--listen", text).listen == expected


@pytest.mark.parametrize("text", ["8000", "host:", "host:port", "host:70000"])
def test_h1_a_bad_listen_address_is_refused(text):  # H1
    assert "--listen" in refused(*URL, "--listen", text)


def test_h1_allowed_origin_needs_listen_and_a_plain_origin():  # H1
    assert "only with --listen" in refused(*URL, "--allowed-origin", "https://app.example")
    assert "--allowed-origin" in refused(
        *URL, "--listen", ":0", "--allowed-origin", "https://app.example/path"
    )
    c = config(*URL, "--listen", ":0", "--allowed-origin", "https://app.example")
    assert c.allowed_origins == ("https://app.example",)


def test_h1_help_names_every_http_flag():  # H1
    text = help_text()
    for flag in ("--upstream-url", "--upstream-header", "--upstream-header-env", "--listen",
                 "--allowed-origin"):  # fmt: skip
        assert flag in text


def test_h1_a_header_given_twice_is_refused():  # H1
    assert "more than once" in refused(
        *URL, "--upstream-header", "X-Key: a", "--upstream-header-env", "x-key=VAR"
    )


def test_i1_a_bearer_token_from_a_variable_is_sent_as_authorization() -> None:
    # Codex's bearer_token_env_var, as wrap hands it to the proxy
    config = parse([*URL, "--upstream-bearer-env", "FIGMA_TOKEN"]).config
    assert config is not None
    (spec,) = config.upstream_headers
    assert (spec.name, spec.env, spec.prefix) == ("Authorization", "FIGMA_TOKEN", "Bearer ")
    assert resolve(config.upstream_headers, {"FIGMA_TOKEN": "t0k"}) == {
        "Authorization": "Bearer t0k"
    }
    with pytest.raises(UsageError, match="--upstream-bearer-env works only with --upstream-url"):
        parse(["--upstream-command", "x", "--upstream-bearer-env", "T"])

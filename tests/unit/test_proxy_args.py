"""`agent-harness proxy` flags (X1): the strict parser as a table, plus the CLI's one-line errors.

`parse()` is pure, so every rule is a row here; the subprocess tests only check that the
installed command exits 1 with one line.
"""

from __future__ import annotations

import pytest

from harness import __version__
from harness.base.errors import UsageError
from harness.operations.classify import DEFAULT_KEY_FIELDS
from harness.proxy.args import ProxyConfig, help_text, parse
from harness.proxy.main import main
from harness.wire.transport import DEFAULT_MAX_MESSAGE_BYTES

UP = ["--upstream-command", "python3"]

# Every flag SPEC X1 names, plus the ones SPEC marks as our additions (S9 --seed, S11
# --fault-delay, X5 --upstream-timeout, X7 --max-message-bytes). Written out here, not taken
# from the parser, so that a flag dropped from the parser fails the help test.
SPEC_FLAGS = (
    "--upstream-command",
    "--upstream-arg",
    "--upstream-args",
    "--upstream-cwd",
    "--upstream-env-var",
    "--upstream-env",
    "--scenario",
    "--mode",
    "--error-rate",
    "--seed",
    "--retry-after",
    "--latency",
    "--fault-delay",
    "--write-tools",
    "--read-tools",
    "--key-fields",
    "--audit-tools",
    "--report-file",
    "--upstream-timeout",
    "--max-message-bytes",
    "--version",
    "--help",
)


def config(*argv: str) -> ProxyConfig:
    parsed = parse([*UP, *argv])
    assert parsed.config is not None
    return parsed.config


def refused(*argv: str) -> str:
    """The one-line error message parse() gives for argv."""
    with pytest.raises(UsageError) as caught:
        parse(list(argv))
    message = str(caught.value)
    assert "\n" not in message
    return message


# -- --flag v and --flag=v ------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["--upstream-command", "node", "--scenario", "F1", "--report-file", "r.json"],
        ["--upstream-command=node", "--scenario=F1", "--report-file=r.json"],
        ["--scenario=F1", "--upstream-command", "node", "--report-file=r.json"],
    ],
)
def test_x1_flag_space_value_and_flag_equals_value_mean_the_same(argv):  # X1
    parsed = parse(argv)
    assert parsed.config is not None
    assert parsed.config.upstream_command == "node"
    assert parsed.config.plan.scenario == "F1"
    assert parsed.config.report_file == "r.json"


def test_x1_defaults_without_optional_flags():  # X1 X3 X5 X7 S10 K1
    c = config()
    assert c.upstream_args == ()
    assert c.upstream_env == {}
    assert c.plan.scenario is None and c.plan.chaos_error_rate is None
    assert c.plan.retry_after_s == 60
    assert c.audit_tools is True
    assert c.report_file is None
    assert c.upstream_timeout_s == 60
    assert c.max_message_bytes == DEFAULT_MAX_MESSAGE_BYTES == 10 * 1024 * 1024
    assert c.classifier.key_fields == DEFAULT_KEY_FIELDS


def test_x1_upstream_command_is_required():  # X1
    assert "--upstream-command" in refused("--scenario", "F1")


def test_x1_equals_sign_inside_a_value_is_kept():  # X1
    assert config("--upstream-arg=--opt=a=b").upstream_args == ("--opt=a=b",)


# -- unknown flags --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "hint"),
    [
        ("--scenaro", "--scenario"),
        ("--upstream-comand", "--upstream-command"),
        ("--report-fil", "--report-file"),
        ("--audit-tool", "--audit-tools"),
    ],
)
def test_x1_unknown_flag_is_refused_with_did_you_mean(flag, hint):  # X1
    message = refused(*UP, flag, "x")
    assert f"unknown flag {flag}" in message
    assert f"did you mean {hint}?" in message


def test_x1_unknown_flag_far_from_any_gives_no_hint():  # X1
    message = refused(*UP, "--frobnicate", "x")
    assert "unknown flag --frobnicate" in message and "did you mean" not in message


def test_x1_unknown_flag_in_equals_form_is_refused():  # X1
    assert "unknown flag --scenaro" in refused(*UP, "--scenaro=F1")


@pytest.mark.parametrize("stray", ["F1", "-s", "node"])
def test_x1_a_value_without_a_flag_is_refused(stray):  # X1
    assert repr(stray) in refused(*UP, stray)


def test_x1_a_non_repeatable_flag_given_twice_is_refused():  # X1
    assert "more than once" in refused(*UP, "--scenario", "F1", "--scenario", "F2")


# -- misspelt values ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--scenario", "F10"], "--scenario"),
        (["--scenario", "F"], "--scenario"),
        (["--scenario", "F1 "], "--scenario"),
        (["--mode", "chaoss", "--error-rate", "0.5"], "--mode"),
        (["--audit-tools", "maybe"], "--audit-tools"),
        (["--audit-tools", "true"], "--audit-tools"),
        (["--scenario", "F2", "--retry-after", "soon"], "--retry-after"),
        (["--mode", "chaos", "--error-rate", "half"], "--error-rate"),
        (["--mode", "chaos", "--error-rate", "0.5", "--seed", "1.5"], "--seed"),
        (["--upstream-timeout", "ten"], "--upstream-timeout"),
        (["--max-message-bytes", "10MB"], "--max-message-bytes"),
        (["--scenario", "F1", "--fault-delay", "fast"], "--fault-delay"),
    ],
)
def test_x1_misspelt_value_is_refused_naming_the_flag(argv, flag):  # X1
    assert flag in refused(*UP, *argv)


def test_x1_misspelt_scenario_lists_the_valid_ones():  # X1
    message = refused(*UP, "--scenario", "F10")
    assert "'F10'" in message and all(f"F{n}" in message for n in range(1, 6))


@pytest.mark.parametrize(("value", "expected"), [("on", True), ("ON", True), ("Off", False),
                                                 ("OFF", False), ("off", False)])
def test_x1_audit_tools_on_off_in_any_case(value, expected):  # X1 X3
    assert config("--audit-tools", value).audit_tools is expected


@pytest.mark.parametrize("value", ["f1", "F1"])
def test_x1_scenario_in_either_case(value):  # X1
    assert config("--scenario", value).plan.scenario == "F1"


@pytest.mark.parametrize("value", ["chaos", "CHAOS", "Chaos"])
def test_x1_mode_in_any_case(value):  # X1 S9
    assert config("--mode", value, "--error-rate", "0.25").plan.chaos_error_rate == 0.25


def test_x1_mode_deterministic_alone_is_plain_pass_through():  # X1 S10
    c = config("--mode", "deterministic")
    assert c.plan.scenario is None and c.plan.chaos_error_rate is None


# -- empty values and flags without a value -------------------------------------------------


@pytest.mark.parametrize(
    "flag",
    ["--upstream-command", "--upstream-arg", "--scenario", "--report-file", "--audit-tools",
     "--write-tools", "--key-fields", "--upstream-env-var"],
)
def test_x1_empty_value_is_refused_in_both_forms(flag):  # X1
    argv = UP if flag != "--upstream-command" else []
    assert "non-empty value" in refused(*argv, flag, "")
    assert "non-empty value" in refused(*argv, f"{flag}=")


@pytest.mark.parametrize("flag", ["--scenario", "--report-file", "--upstream-arg", "--mode"])
def test_x1_flag_without_a_value_at_the_end_is_refused(flag):  # X1
    assert f"{flag} needs a value" in refused(*UP, flag)


@pytest.mark.parametrize(
    ("flag", "text"),
    [("--write-tools", "a,,b"), ("--read-tools", "a,"), ("--key-fields", ",k"),
     ("--upstream-args", "a,,b"), ("--upstream-env", "A=1,,B=2")],
)
def test_x1_empty_item_in_a_comma_list_is_refused(flag, text):  # X1
    assert "empty item" in refused(*UP, flag, text)


# -- values beginning with -- -------------------------------------------------------------


def test_x1_value_beginning_with_dashes_is_never_taken_as_a_value():  # X1
    message = refused(*UP, "--upstream-arg", "--ground-truth")
    assert "--upstream-arg needs a value" in message
    assert "--upstream-arg=--ground-truth" in message  # tells the user how to write it


def test_x1_flag_followed_by_another_flag_is_missing_its_value():  # X1
    assert "--scenario needs a value" in refused(*UP, "--scenario", "--report-file", "r.json")


def test_x1_flag_equals_dashes_value_is_accepted():  # X1
    c = config("--upstream-arg=--ground-truth", "--upstream-arg", "/tmp/gt.jsonl")
    assert c.upstream_args == ("--ground-truth", "/tmp/gt.jsonl")


def test_x1_single_dash_value_is_a_value():  # X1
    assert config("--upstream-arg", "-v").upstream_args == ("-v",)


# -- upstream args and env -----------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["--upstream-args", "a,b", "--upstream-arg", "c,d", "--upstream-arg", "e"],
        ["--upstream-arg", "c,d", "--upstream-args", "a,b", "--upstream-arg", "e"],
        ["--upstream-arg", "c,d", "--upstream-arg", "e", "--upstream-args=a,b"],
    ],
)
def test_x1_upstream_args_values_come_before_upstream_arg_values(argv):  # X1
    assert config(*argv).upstream_args == ("a", "b", "c,d", "e")


def test_x1_upstream_arg_keeps_its_order_and_commas():  # X1
    c = config("--upstream-arg", "server.js", "--upstream-arg", "x,y", "--upstream-arg", "z")
    assert c.upstream_args == ("server.js", "x,y", "z")


def test_x1_env_pairs_from_both_flags():  # X1 X2
    c = config(
        "--upstream-env", "A=1,B=two",
        "--upstream-env-var", "C=with,commas",
        "--upstream-env-var=D=x=y",
        "--upstream-env-var", "E=",
    )  # fmt: skip
    assert c.upstream_env == {"A": "1", "B": "two", "C": "with,commas", "D": "x=y", "E": ""}


@pytest.mark.parametrize(
    ("flag", "pair"),
    [("--upstream-env-var", "NOEQUALS"), ("--upstream-env-var", "=value"),
     ("--upstream-env", "A=1,B")],
)
def test_x1_env_pair_without_key_or_equals_is_refused(flag, pair):  # X1
    assert "KEY=VALUE" in refused(*UP, flag, pair)


def test_x1_upstream_cwd_is_kept():  # X1
    assert config("--upstream-cwd", "/srv/app").upstream_cwd == "/srv/app"


# -- exclusions and ranges ------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["chaos", "deterministic"])
def test_x1_mode_and_scenario_exclude_each_other(mode):  # X1
    argv = ["--mode", mode, "--scenario", "F1"]
    if mode == "chaos":
        argv += ["--error-rate", "0.5"]
    assert "exclude each other" in refused(*UP, *argv)


def test_x1_error_rate_only_with_chaos():  # X1 S9
    assert "--error-rate works only with --mode chaos" in refused(*UP, "--error-rate", "0.5")
    assert "only with --mode chaos" in refused(
        *UP, "--mode", "deterministic", "--error-rate", "0.5"
    )


def test_x1_chaos_needs_an_error_rate():  # X1 S9
    assert "--error-rate" in refused(*UP, "--mode", "chaos")


@pytest.mark.parametrize("rate", ["-0.1", "1.01", "2"])
def test_s9_error_rate_outside_zero_to_one_is_refused(rate):  # S9
    assert "between 0 and 1" in refused(*UP, "--mode", "chaos", "--error-rate", rate)


@pytest.mark.parametrize("rate", ["0", "1", "0.5"])
def test_s9_error_rate_bounds_are_accepted(rate):  # S9
    assert config("--mode", "chaos", "--error-rate", rate).plan.chaos_error_rate == float(rate)


def test_s9_seed_only_with_chaos_and_kept():  # S9
    assert "--seed works only with --mode chaos" in refused(*UP, "--seed", "7")
    assert config("--mode", "chaos", "--error-rate", "0.5", "--seed", "7").plan.seed == 7


@pytest.mark.parametrize("scenario", [None, "F1", "F3", "F4", "F5"])
def test_x1_retry_after_only_with_f2(scenario):  # X1 S3
    argv = ["--retry-after", "5"] + (["--scenario", scenario] if scenario else [])
    assert "--retry-after works only with --scenario F2" in refused(*UP, *argv)


@pytest.mark.parametrize("seconds", ["0", "-1", "86400.5", "100000"])
def test_s3_retry_after_outside_zero_to_a_day_is_refused(seconds):  # S3 X1
    assert "86400" in refused(*UP, "--scenario", "F2", "--retry-after", seconds)


@pytest.mark.parametrize(("seconds", "expected"), [("1", 1.0), ("0.5", 0.5), ("86400", 86400.0)])
def test_s3_retry_after_inside_the_range_is_kept(seconds, expected):  # S3
    assert config("--scenario", "F2", "--retry-after", seconds).plan.retry_after_s == expected


@pytest.mark.parametrize("scenario", [None, "F1", "F2", "F4"])
def test_h2_latency_only_with_f9(scenario):  # H2 X1
    argv = ["--latency", "500"] + (["--scenario", scenario] if scenario else [])
    assert "--latency works only with --scenario F9" in refused(*UP, *argv)


@pytest.mark.parametrize(
    ("ms", "why"),
    [("0", "at least 1 and at most 600000"), ("600001", "at most 600000"),
     ("1.5", "--latency must be a whole number"), ("soon", "--latency must be a whole number")],
)  # fmt: skip
def test_h2_latency_outside_its_bounds_is_refused_in_one_line(ms, why):  # H2 X1
    assert why in refused(*UP, "--scenario", "F9", "--latency", ms)


def test_h2_f9_holds_30_s_by_default_and_takes_latency_on_any_transport():  # H2 X1
    assert config("--scenario", "F9").plan.latency_ms == 30_000
    assert config("--scenario", "f9", "--latency", "1500").plan.latency_ms == 1500
    assert config("--scenario", "F9", "--listen", "127.0.0.1:0").plan.scenario == "F9"


def test_s11_fault_delay_needs_a_fault_and_is_not_negative():  # S11
    assert "only with --scenario" in refused(*UP, "--fault-delay", "100")
    assert "negative" in refused(*UP, "--scenario", "F1", "--fault-delay", "-5")
    assert config("--scenario", "F1", "--fault-delay", "250").plan.fault_delay_ms == 250


def test_x5_upstream_timeout_must_be_positive():  # X5
    assert "above 0" in refused(*UP, "--upstream-timeout", "0")
    assert "above 0" in refused(*UP, "--upstream-timeout", "nan")
    assert config("--upstream-timeout", "0.5").upstream_timeout_s == 0.5


def test_x7_max_message_bytes_has_a_floor():  # X7
    assert "at least" in refused(*UP, "--max-message-bytes", "10")
    assert config("--max-message-bytes", "2048").max_message_bytes == 2048


def test_c2_k1_tool_and_key_lists_are_split_on_commas():  # C2 K1
    c = config("--write-tools", "book*,pay", "--read-tools", "peek_*", "--key-fields", "k1, k2")
    assert c.classifier.write_globs == ("book*", "pay")
    assert c.classifier.read_globs == ("peek_*",)
    assert c.classifier.key_fields == ("k1", "k2")


def test_k5_k6_per_tool_key_fields_and_keys_honoured_are_parsed_and_checked():  # K5 K6 X1
    c = config("--key-fields", "default,create_payment:reference", "--keys-honoured", "pay_*,x")
    assert c.classifier.key_fields == ("default", "create_payment:reference")
    assert c.classifier.keys_honoured == ("pay_*", "x")
    assert "TOOL:FIELD" in refused(*UP, "--key-fields", "create_payment:")


# -- help and version -----------------------------------------------------------------------


def test_x1_help_lists_every_flag():  # X1
    assert parse(["--help"]).help is True
    text = help_text()
    missing = [flag for flag in SPEC_FLAGS if flag not in text]
    assert missing == []


def test_x1_help_wins_even_without_the_required_command():  # X1
    assert parse(["-h"]).help is True
    assert parse(["--scenario", "F1", "--help"]).help is True


def test_x1_version_flag():  # X1
    assert parse(["--version"]).version is True


def test_x1_main_prints_help_and_version_and_exits_0(capsys):  # X1 X8
    assert main(["--help"]) == 0
    assert "--upstream-command" in capsys.readouterr().out
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"agent-harness {__version__}"


@pytest.mark.parametrize(
    "argv",
    [["--scenario"], [*UP, "--scenario", "F10"], [*UP, "--bogus", "1"], [*UP, "--mode", "chaoss"]],
)
def test_x8_bad_flags_exit_1_with_one_line_on_stderr(argv, capsys):  # X1 X8
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agent-harness proxy: error: ")
    assert "Traceback" not in captured.err

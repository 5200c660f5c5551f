"""Bad flags get one line on stderr and exit code 1 (V4 V5 V6; README's exit-code table).

Typer's own usage errors are a boxed, multi-line message with exit code 2, and 2 is what
`sweep` exits with for a regression: a mistyped flag in CI must not read as one.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from runner.cli import app


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["run", "--bogus"], "agent-harness run: error: No such option: --bogus;"),
        (["sweep", "x.yaml", "--bogus"], "agent-harness sweep: error: No such option: --bogus"),
        (["run"], "agent-harness run: error: Missing argument 'spec';"),
        (["run", "x.yaml", "--concurrency", "abc"], "Invalid value for '--concurrency'"),
        (["run", "x.yaml", "--concurrency", "0"], "Invalid value for '--concurrency'"),
        (["judge", "--format", "xx", "x.jsonl"], "Invalid value for '--format'"),
        (["merge", "a.duckdb"], "agent-harness merge: error: Missing option '-o' / '--out'"),
        (["bogus"], "agent-harness: error: No such command 'bogus';"),
        (["--bogus"], "agent-harness: error: No such option: --bogus;"),
    ],
)
def test_v4_a_usage_error_is_one_line_and_exit_code_1(args, says):
    result = invoke(*args)
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert says in line and line.endswith("--help")


def test_v5_a_mistyped_sweep_flag_is_not_exit_code_2_which_means_regression():
    assert invoke("sweep", "x.yaml", "--baseline-typo", "b.json").exit_code == 1


def test_v6_a_flag_with_control_characters_is_shown_escaped():
    result = invoke("run", "x.yaml", "--\x1b]0;pwned\x07")
    assert result.exit_code == 1
    assert "\x1b" not in result.stderr and "\\x1b]0;pwned\\x07" in result.stderr


def test_help_and_version_still_exit_0():
    assert invoke("run", "--help").exit_code == 0
    assert invoke("--version").stdout.startswith("agent-harness ")
    bare = invoke()
    assert bare.exit_code == 0 and "run" in bare.stdout and bare.stderr == ""


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_g1_help_names_the_ray_extra_as_pip_takes_it(command):
    # Rich reads "[ray]" as a style tag and drops it unless it is escaped.
    text = " ".join(invoke(command, "--help").stdout.replace("│", " ").split())
    assert "pip install 'agent-harness[ray]'" in text


def test_l1_a_local_model_context_too_small_is_one_line_before_any_server_starts(capsys):
    # `--context` sizes the local model server's window (a CLI agent's prompt needs 8192)
    from runner.cli.localmodel import main

    with pytest.raises(SystemExit) as ended:
        main(["run", "never-read.yaml", "--context", "100"])
    assert ended.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()[-1:]
    assert line.endswith("--context must be at least 512 tokens, not 100")

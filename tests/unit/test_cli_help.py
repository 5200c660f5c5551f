"""`--help` of every command (issue 33): a flag takes no value, so its row names no type.

Typer's help printed `<bool>` beside every flag (`--dry-run <bool>`, `--help <bool>`), as if
it took a value. Every command of the one command line is asked, the way a user asks it.
"""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from runner.cli import app

COMMANDS = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def help_text(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--help"])
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_issue33_help_shows_no_type_beside_a_flag(command: str) -> None:
    # issue 33: `--help` names a value's type only where the option takes a value.
    text = help_text(*([command] if command else []))
    assert "Usage: agent-harness" in text
    assert "<bool>" not in text, text


def test_issue33_flags_are_still_listed_and_valued_options_keep_their_type() -> None:
    # issue 33: only the flags lose their type; the rows stay, and `--db <path>` keeps its own.
    text = help_text("run")
    for flag in ("--resume", "--no-resume", "--retry-errors", "--dry-run", "--help"):
        assert flag in text
    assert "<path>" in text and "<bool>" not in text
    assert "--version" in help_text()

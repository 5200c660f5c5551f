"""V6 through the installed command: foreign text in a spec reaches the terminal escaped.

Moved from tests/unit/test_textsafe.py (the escaping itself is tested there, in process).
"""

from __future__ import annotations

from tests.support import launcher
from tests.support.paths import BIN


def test_v6_spec_text_reaches_the_terminal_escaped_in_a_dry_run(tmp_path):
    # Names with control characters are refused at load (V2); a litellm model name is free
    # text and is printed in the matrix: escaped, never executed.
    spec = tmp_path / "exp.yaml"
    spec.write_text(
        'name: x\nmodels: ["openai/gpt\\e]0;pwned\\a\\e[2J"]\n'
        "prompts: [{name: p, text: Be careful.}]\n"
        "upstreams: [{name: b, builtin: booking}]\n"
        "conversations: [{name: c, user: Book a room.}]\n"
    )
    done = launcher.run(
        [str(BIN), "run", str(spec), "--dry-run"],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert b"\x1b" not in done.stdout and b"\x07" not in done.stdout
    assert b"openai/gpt\\x1b]0;pwned\\x07\\x1b[2J" in done.stdout

"""Bad flags to the installed command: one line on stderr and exit code 1 (V4 V5 V6).

Moved from tests/unit/test_cli_usage_errors.py, which checks the same through Typer's runner in
this process; here the real console script runs.
"""

from __future__ import annotations

from tests.support import launcher
from tests.support.paths import BIN


def test_v4_the_installed_command_prints_one_line_too():
    done = launcher.run(
        [str(BIN), "run", "--bogus"], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "agent-harness run: error: No such option: --bogus; see agent-harness run --help\n"
    )

"""V2 through the installed command: a name given as a path is one line and writes nothing.

Moved from tests/unit/test_spec_names.py (the name rules themselves are tested there).
"""

from __future__ import annotations

from pathlib import Path

from tests.support import launcher
from tests.support.paths import BIN


def test_v2_report_experiment_given_as_a_path_is_one_line_and_writes_nothing(tmp_path):
    (tmp_path / "runs.duckdb").write_bytes(b"")  # never opened: the name is refused first
    done = launcher.run(
        [str(BIN), "report", "--db", "runs.duckdb", "--experiment", "/abs/x"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr == (
        "agent-harness report: error: --experiment '/abs/x': a name must not contain the "
        "separator '/': names are used as file names and printed\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.duckdb"]
    assert not Path("/abs/x.html").exists()

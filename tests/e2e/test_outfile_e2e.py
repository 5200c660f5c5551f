"""V1: `-` as an output file is the standard output of a real process, and nothing is written.

Moved from tests/unit/test_outfile.py (the writer's other checks are tested there, in process).
"""

from __future__ import annotations

import sys

from tests.support import launcher


def test_v1_dash_is_standard_output(tmp_path):
    code = "from harness.base.outfile import write_file; write_file('-', '# report\\n')"
    done = launcher.run(
        [sys.executable, "-c", code], capture_output=True, timeout=60, cwd=tmp_path
    )
    assert done.returncode == 0 and done.stdout == b"# report\n"
    assert list(tmp_path.iterdir()) == []

"""V20: how a full disk is said, in one line naming the disk and the file (harness/base/errors.py)."""

from __future__ import annotations

import errno

from harness.base.errors import no_space


def test_v20_a_line_another_process_said_is_passed_on_as_it_was_said():
    # The proxy relays an upstream's last stderr lines joined by " | "; the line the upstream
    # wrote names the disk and the file it could not write, and must not be re-read as the
    # proxy's own error (nor lost past the runner's 300-character cut).
    said = ("python -m runner.upstreams: error: no space left on the disk mounted at /data "
            "(4,096 bytes free) to write /data/run/upstream.sqlite")  # fmt: skip
    relayed = ("[agent-harness] ERROR: the upstream did not start: the upstream exited with "
               f"code 1; its last stderr lines: {said} | more")  # fmt: skip
    expected = "no space left on the disk mounted at /data (4,096 bytes free) to write " \
        "/data/run/upstream.sqlite"
    assert no_space(relayed, "/elsewhere") == expected
    assert no_space(said + "\nnext line") == expected


def test_v20_an_error_that_says_nothing_of_space_is_none():
    assert no_space(RuntimeError("Connection closed"), "/tmp") is None
    assert no_space(OSError(errno.EACCES, "Permission denied", "/x")) is None


def test_v20_enospc_names_the_errors_own_file(tmp_path):
    line = no_space(OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "f")))
    assert line is not None and line.endswith(f"to write {tmp_path / 'f'}")
    assert line.startswith("no space left on the disk mounted at /")

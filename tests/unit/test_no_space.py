"""V20: how a full disk is said, in one line naming the disk and the file (harness/base/errors.py)."""

from __future__ import annotations

import errno
import sqlite3

import pytest

from harness.base import errors
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


@pytest.mark.parametrize(("free", "full"), [(4096, True), (50 * 1024 * 1024, False)])
def test_v20_sqlites_disk_io_error_is_a_full_disk_only_where_the_disk_is_almost_full(
    tmp_path, monkeypatch, free, full
):
    # SQLite gives no errno: a write the full disk refused reads "disk I/O error".
    monkeypatch.setattr(errors, "_free", lambda path: free)
    err = sqlite3.OperationalError("disk I/O error")
    line = no_space(err, tmp_path / "ledger.sqlite")
    if full:
        assert line is not None and line.endswith(f"(4,096 bytes free) to write {tmp_path}/ledger.sqlite")
    else:
        assert line is None
    assert no_space(err) is None  # without a path there is no disk to look at

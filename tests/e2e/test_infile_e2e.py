"""V4 through the installed command: a FIFO, /dev/zero or bad bytes as an input file is one line.

Moved from tests/unit/test_infile.py (the bounded reader itself is tested there, in process).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import launcher
from tests.support.paths import BIN


def test_v4_a_fifo_as_the_spec_gives_one_line_and_no_hang(fifo):
    # The old reader blocked in open() until someone wrote to the FIFO: a real process and a
    # bounded wait, so a regression fails on the timeout instead of hanging the suite.
    done = launcher.run(
        [str(BIN), "run", str(fifo), "--dry-run"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert (
        done.stderr
        == f"agent-harness run: error: {fifo}: the spec file is a FIFO, not a regular file\n"
    )


@pytest.mark.parametrize("kind", ["invalid-utf8", "dev-zero", "fifo"])
def test_v4_judge_on_a_bad_event_log_is_one_line(tmp_path, kind):
    path = {
        "invalid-utf8": tmp_path / "e.jsonl",
        "dev-zero": Path("/dev/zero"),
        "fifo": tmp_path / "p.jsonl",
    }[kind]
    if kind == "invalid-utf8":
        path.write_bytes(b"\xff\xfe not text\n")
    if kind == "fifo":
        os.mkfifo(path)
    done = launcher.run(
        [str(BIN), "judge", str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    expected = {
        "invalid-utf8": f"{path}:1: not UTF-8 text",
        "dev-zero": f"{path}: the event log is a character device, not a regular file",
        "fifo": f"{path}: the event log is a FIFO, not a regular file",
    }[kind]
    assert done.stderr == f"agent-harness: error: {expected}\n"

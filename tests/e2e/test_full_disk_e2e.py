"""V20: a full disk is one line naming the disk and the file, never a chained traceback, and
nothing stored is lost: the run store's disk filling up during `run`; the disk of the runs'
own folders (TMPDIR) full, in process and with real proxy processes; a report and a count
file written to a full disk.

The disk is a small tmpfs mounted for the test (that needs root, as in CI's container; the
tests skip elsewhere). Ground truth: the store read back after the failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
import yaml

from tests.support import launcher
from tests.support.paths import ROOT
from tests.support.specs import REQUEST

pytestmark = pytest.mark.slow
TRACEBACK = "Traceback"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 600 KiB file system of its own, mounted for this test."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", str(disk)],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> None:
    """Write a filler file until the disk is full."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)


def _spec(folder: Path, runs: int) -> Path:
    data = {
        "name": "fulldisk",
        "models": [{"name": "scripted/naive"}],
        "prompts": [{"name": "p", "text": "You book hotel rooms."}],
        "upstreams": [{"name": "booking", "builtin": "booking"}],
        "scenarios": ["none", "F1"],
        "conversation": {"name": "c", "user": REQUEST},
        "runs": runs,
    }
    path = folder / "fulldisk.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _cli(agent_harness_bin: Path, *args: str, cwd: Path, env: dict[str, str] | None = None,
         stdin: bytes = b"") -> subprocess.CompletedProcess[str]:  # fmt: skip
    """The command, forked warm (tests/support/launcher.py); with another TMPDIR, fresh."""
    return launcher.run([str(agent_harness_bin), *args], cwd=cwd, capture_output=True,
                        text=True, timeout=600, env=env, input=stdin.decode())  # fmt: skip


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ": error: " in line]


def _run_on_a_full_tmpdir(agent_harness_bin: Path, folder: Path, disk: Path,
                          in_process: str) -> tuple[subprocess.CompletedProcess[str], Path]:  # fmt: skip
    """`run` of two runs with TMPDIR (the runs' own folders) on `disk`, left 40 KiB free."""
    (disk / "filler").write_bytes(b"\0" * (560 * 1024))
    env = {**os.environ, "TMPDIR": str(disk)}
    db = folder / "runs.duckdb"
    done = _cli(agent_harness_bin, "run", str(_spec(folder, 1)), "--db", str(db),
                "--in-process", in_process, cwd=folder, env=env)  # fmt: skip
    return done, db


def test_v20_the_store_filling_its_disk_ends_run_in_one_line_and_keeps_what_was_stored(
    agent_harness_bin, tmp_path, small_disk
):
    # V20: a 96-line chained traceback that hid "No space left on device".
    db = small_disk / "runs.duckdb"
    done = _cli(agent_harness_bin, "run", str(_spec(tmp_path, 300)), "--db", str(db), cwd=tmp_path)
    assert done.returncode == 1 and TRACEBACK not in done.stderr, done.stderr[-3000:]
    (line,) = _errors(done.stderr)
    assert line.startswith("agent-harness run: error: cannot save runs to ")
    assert f"no space left on the disk mounted at {small_disk}" in line
    assert f"to write {db}" in line and "every run stored before is kept" in line
    # Nothing stored is lost: the store opens and holds every run committed before.
    with duckdb.connect(str(db), read_only=True) as con:
        (stored,) = con.execute("SELECT count(*) FROM runs WHERE status = 'ok'").fetchone()
    assert 0 < stored < 600


def test_v20_a_full_disk_under_the_runs_folders_fails_each_run_in_one_line(
    agent_harness_bin, tmp_path, small_disk
):
    # V20: through processes a run said "Connection closed" and an upstream's traceback.
    done, db = _run_on_a_full_tmpdir(agent_harness_bin, tmp_path, small_disk, "never")
    assert done.returncode == 3 and TRACEBACK not in done.stderr, done.stderr[-3000:]
    with duckdb.connect(str(db), read_only=True) as con:
        errors = [e for (e,) in con.execute("SELECT error FROM runs ORDER BY run_id").fetchall()]
    assert len(errors) == 2
    assert all(str(small_disk) in e and "\n" not in e for e in errors), errors
    assert any(f"no space left on the disk mounted at {small_disk}" in e for e in errors), errors


def test_v20_g3_runs_hosted_in_process_need_no_disk_under_their_folders(
    agent_harness_bin, tmp_path, small_disk
):
    # In process the ledger and the report stay in memory and no run folder is made (issue
    # 37): the same full disk costs these runs nothing (before, they waited until their time
    # limit, then failed in one line).
    done, db = _run_on_a_full_tmpdir(agent_harness_bin, tmp_path, small_disk, "always")
    assert done.returncode == 0 and TRACEBACK not in done.stderr, done.stderr[-3000:]
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT status, agreement FROM runs").fetchall()
    assert len(rows) == 2 and all(r == ("ok", "agrees") for r in rows), rows
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler"]  # no folder made


def test_v20_outputs_on_a_full_disk_are_one_line_each(agent_harness_bin, tmp_path, small_disk):
    # V20: a report and a count file.
    db = tmp_path / "runs.duckdb"
    assert _cli(agent_harness_bin, "run", str(_spec(tmp_path, 1)), "--db", str(db),
                cwd=tmp_path).returncode == 0  # fmt: skip
    fill(small_disk)
    report = _cli(agent_harness_bin, "report", "--db", str(db), "-o",
                  str(small_disk / "report.html"), cwd=tmp_path)  # fmt: skip
    (line,) = _errors(report.stderr)
    assert report.returncode == 1 and f"disk mounted at {small_disk}" in line, report.stderr
    cassette = tmp_path / "c.cassette"
    cassette.write_text(json.dumps({"cassette": "agent-harness", "version": 1}) + "\n")
    count = small_disk / "count.json"
    replay = _cli(agent_harness_bin, "replay", str(cassette), "--count-file", str(count),
                  cwd=tmp_path)  # fmt: skip
    assert replay.returncode == 1 and TRACEBACK not in replay.stderr
    assert f"disk mounted at {small_disk}" in replay.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("free_kib", [0, 16])
def test_v20_a_builtin_upstream_on_a_full_disk_exits_with_one_line_naming_disk_and_file(
    tmp_path, small_disk, free_kib
):
    # V20: the built-in upstream died with a 60-line exception-group traceback ("database or
    # disk is full", or SQLite's "disk I/O error"), which the proxy relayed cut to its last
    # lines, where neither the disk nor the file was named.
    (small_disk / "filler").write_bytes(b"\0" * ((600 - free_kib) * 1024))
    ledger = small_disk / "upstream.sqlite"
    done = subprocess.run(
        [sys.executable, "-m", "runner.upstreams", "booking", "--db", str(ledger)],
        input="", capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "TMPDIR": str(small_disk)},
    )  # fmt: skip
    assert done.returncode == 1 and TRACEBACK not in done.stderr, done.stderr[-3000:]
    (line,) = done.stderr.splitlines()
    assert line.startswith("python -m runner.upstreams: error: no space left on the disk mounted")
    assert f"mounted at {small_disk}" in line and str(small_disk) in line.split(" to write ")[1]

"""SIGTERM during `run` or `sweep` ends as Ctrl-C does (SPEC V14).

Issue 22: SIGTERM (what CI systems and `kill` send) ended `run` with exit 143, no line and no
JUnit. Now the runs stored so far are kept, one line says so, `sweep` writes the JUnit XML of
what ran, and the exit code is the documented one: 143 for SIGTERM, 130 for Ctrl-C. The signal
is sent once the command has reported its first finished run (read from its progress line,
with a bounded wait), and the store is the ground truth of what was kept.
"""

from __future__ import annotations

import queue
import signal
import subprocess
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from runner.store import Store
from tests.support.paths import BIN
from tests.support.runkit import cli_env

# Signals to a real new process: never the warm launcher.
pytestmark = [pytest.mark.slow, pytest.mark.fresh_process]

RUNS = 400  # far more than run before the signal: scripted runs take tens of milliseconds
SPEC = f"""\
name: cut
models: [scripted/careful]
prompts: [{{name: p, text: You book rooms.}}]
upstreams: [{{name: booking, builtin: booking}}]
scenarios: [F1]
conversations:
  - name: c
    user: "Please book a room. guest: Alice Example, date: 2026-12-01, nights: 2"
runs: {RUNS}
concurrency: 1
"""


def _stopped_after_the_first_run(cwd: Path, argv: list[str], sig: int) -> tuple[int, str, str]:
    proc = subprocess.Popen([str(BIN), *argv], cwd=cwd, env=cli_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    lines: queue.Queue[str | None] = queue.Queue()
    out: list[str] = []

    def read_err() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)
        lines.put(None)

    def read_out() -> None:
        assert proc.stdout is not None
        out.extend(proc.stdout)

    readers = [threading.Thread(target=f, daemon=True) for f in (read_err, read_out)]
    for reader in readers:
        reader.start()
    seen: list[str] = []
    try:
        while True:
            line = lines.get(timeout=120)  # the first progress line comes after the first run
            assert line is not None, "".join(seen)
            seen.append(line)
            if f"/{RUNS} runs" in line:
                break
        proc.send_signal(sig)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    for reader in readers:
        reader.join(timeout=30)
    while (line := lines.get(timeout=30)) is not None:
        seen.append(line)
    return proc.returncode, "".join(out), "".join(seen)


def _stored(db: Path) -> int:
    with Store.open(db, read_only=True) as store:
        return len(store.finished_run_ids("cut"))


@pytest.mark.parametrize(
    ("sig", "code", "said"),
    [(signal.SIGTERM, 143, "Terminated (SIGTERM)"), (signal.SIGINT, 130, "Interrupted")],
    ids=["SIGTERM", "SIGINT"],
)
def test_v14_a_signal_during_sweep_keeps_the_runs_says_one_line_and_writes_junit(
    tmp_path: Path, sig: int, code: int, said: str
) -> None:
    (tmp_path / "spec.yaml").write_text(SPEC)
    argv = ["sweep", "spec.yaml", "--db", "runs.duckdb", "--junit", "junit.xml", "-o", "r.html"]
    returncode, out, err = _stopped_after_the_first_run(tmp_path, argv, sig)
    assert returncode == code, (out, err)
    assert err.count(said) == 1, err
    assert f"{said}: every finished run is stored" in err
    assert "Traceback" not in err
    stored = _stored(tmp_path / "runs.duckdb")
    assert 1 <= stored < RUNS
    junit = ET.parse(tmp_path / "junit.xml").getroot()
    suite = junit.find("testsuite")
    assert suite is not None and suite.get("tests") == "1"  # the one group that ran
    assert "JUnit XML of the runs stored so far written to junit.xml" in out
    # Resuming after such a stop (no run lost, none run twice) is pinned by
    # tests/e2e/test_runner_e2e.py::test_runner_killed_mid_sweep_resumes_without_lost_or_doubled_runs.


def test_v14_sigterm_during_run_keeps_the_runs_and_says_one_line(tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(SPEC)
    argv = ["run", "spec.yaml", "--db", "runs.duckdb"]
    returncode, out, err = _stopped_after_the_first_run(tmp_path, argv, signal.SIGTERM)
    assert returncode == 143, (out, err)
    lines = [line for line in err.splitlines() if line.strip() and "/400 runs" not in line]
    assert lines[-1] == (
        "Terminated (SIGTERM): every finished run is stored; run the same command again to resume."
    ), err
    assert "Traceback" not in err
    assert 1 <= _stored(tmp_path / "runs.duckdb") < RUNS

"""`run --processes N`: runs spread over worker processes of this machine (SPEC G3).

The installed command, real worker processes. The parent alone writes the store; what the
scripted agents do is deterministic per run seed, so N processes must store exactly what one
stores (verdicts, scores, the upstream's real rows). A worker killed mid-sweep turns its runs
into errors that `--retry-errors` runs again; Ctrl-C ends every worker and stores every
finished run; a SIGKILLed parent leaves no process behind. The slow model endpoint
(bench/slow_model.py: each answer after a fixed delay) keeps runs in flight long enough for a
signal to land among them.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from bench.concurrency import tree as _tree  # `root` and every descendant, from /proc
from tests.support import launcher
from tests.support.paths import BIN
from tests.support.runkit import CLI_TIMEOUT_S, cli_env, query, scripted_sweep_spec
from tests.support.slowmodel import slow_model as slow_model_at

pytestmark = pytest.mark.slow

PROGRESS = re.compile(r"\b(\d+)/(\d+) runs\b")
GONE_TIMEOUT_S = 30.0


def _outcomes(db: Path) -> dict[str, tuple]:
    """Per run id: status, verdict, score, duplicates (judged and real), the operations with
    their real rows, the violations."""
    runs = query(
        db,
        "SELECT run_id, status, verdict, score_overall, duplicate_found, real_duplicate, "
        "patch_text, agreement FROM runs",
    )
    ops = query(
        db, "SELECT run_id, idx, tool, executions, outcome, real_rows FROM operations ORDER BY 1, 2"
    )
    codes = query(db, "SELECT run_id, code FROM violations ORDER BY 1, 2")
    per_run: dict[str, list] = {}
    for run_id, *op in ops:
        per_run.setdefault(run_id, []).append(tuple(op))
    found: dict[str, list] = {}
    for run_id, code in codes:
        found.setdefault(run_id, []).append(code)
    return {r[0]: (*r[1:], tuple(per_run.get(r[0], ())), tuple(found.get(r[0], ()))) for r in runs}


def _run(folder: Path, spec: Path, db: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return launcher.run(
        [str(BIN), "run", str(spec), "--db", str(db), *flags],
        capture_output=True, text=True, timeout=CLI_TIMEOUT_S, env=cli_env(), cwd=folder,
    )  # fmt: skip


def test_g3_runs_on_worker_processes_store_what_one_process_stores(tmp_path: Path) -> None:
    spec = tmp_path / "pool.yaml"
    spec.write_text(scripted_sweep_spec("pool", runs=2))  # 24 runs, both patch arms
    one = _run(tmp_path, spec, tmp_path / "one.duckdb", "--processes", "1")
    assert one.returncode == 0, one.stderr
    assert "worker processes" not in one.stderr
    two = _run(tmp_path, spec, tmp_path / "two.duckdb", "--processes", "2", "--concurrency", "4")
    assert two.returncode == 0, two.stderr
    assert "running on 2 worker processes" in two.stderr
    assert "24/24 runs" in two.stderr  # progress counts committed runs, as in one process
    reference = _outcomes(tmp_path / "one.duckdb")
    assert len(reference) == 24
    assert {v[0] for v in reference.values()} == {"ok"}
    assert _outcomes(tmp_path / "two.duckdb") == reference
    # The auto arms got their group's patches: the patch text is part of what is compared.
    assert any(v[5] for v in reference.values())


def test_g3_processes_with_executor_ray_is_one_line_exit_1(tmp_path: Path) -> None:
    spec = tmp_path / "pool.yaml"
    spec.write_text(scripted_sweep_spec("pool", runs=1))
    done = _run(tmp_path, spec, tmp_path / "x.duckdb", "--executor", "ray", "--processes", "2")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "agent-harness run: error: --processes works only with --executor local"
    ]
    assert not (tmp_path / "x.duckdb").exists()


def test_g3_r3_a_module_in_the_runners_folder_replaces_nothing_in_its_own_processes(
    tmp_path: Path,
) -> None:
    # `python -m` puts its working folder first on sys.path, and the runner starts the workers'
    # fork server and (here, `--in-process never`) the proxies' fork server in the folder it
    # was started in: a json.py there must not stand in for the standard library's.
    marker = tmp_path / "imported"
    (tmp_path / "json.py").write_text(
        f"open({str(marker)!r}, 'a').write('the folder json.py ran\\n')\n"
        "raise ImportError('a json.py in the working folder')\n"
    )
    spec = tmp_path / "pool.yaml"
    spec.write_text(scripted_sweep_spec("pool", runs=1))  # 12 runs
    done = _run(tmp_path, spec, tmp_path / "x.duckdb", "--processes", "2", "--in-process", "never")
    assert done.returncode == 0, done.stderr
    assert "running on 2 worker processes" in done.stderr
    assert not marker.exists(), marker.read_text()
    outcomes = _outcomes(tmp_path / "x.duckdb")
    assert len(outcomes) == 12 and {v[0] for v in outcomes.values()} == {"ok"}


# -- signals and crashes, with runs in flight on the workers ---------------------------------


@pytest.fixture
def slow_model() -> Any:
    """bench/slow_model.py answering every call after 0.5 s; its /v1 URL."""
    with slow_model_at(0.5) as url:
        yield url


def _slow_spec(folder: Path, url: str, runs: int) -> Path:
    path = folder / "slow.yaml"
    path.write_text(
        f"""\
name: slow
models:
  - name: openai/bench-model
    params: {{api_base: "{url}"}}
prompts: [{{name: plain, text: You book hotel rooms with the tools you have.}}]
patches: [none]
upstreams: [{{name: booking, builtin: booking}}]
scenarios: [F1]
conversations:
  - name: single
    user: "Please book a room for Alice Example on 2026-12-01."
runs: {runs}
concurrency: 4
limits: {{max_turns: 4, run_timeout_s: 120}}
"""
    )
    return path


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_gone(pids: list[int]) -> list[int]:
    """The pids still alive after GONE_TIMEOUT_S (polled: a process's end is no event here)."""
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while (left := [p for p in pids if _alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


class _Runner:
    """`agent-harness run` in its own session, its stderr read line by line."""

    def __init__(self, folder: Path, spec: Path, db: Path, *flags: str) -> None:
        self.proc = launcher.Popen(
            [str(BIN), "run", str(spec), "--db", str(db), *flags],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=cli_env(),
            cwd=folder, start_new_session=True,
        )  # fmt: skip
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen = ""
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in iter(self.proc.stderr.readline, ""):
            self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, pattern: re.Pattern[str]) -> re.Match[str]:
        deadline = time.monotonic() + CLI_TIMEOUT_S
        while not (found := pattern.search(self.seen)):
            line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            assert line is not None, f"the runner ended first: {self.seen}"
            self.seen += line
        return found

    def rest(self) -> str:
        self.proc.wait(timeout=CLI_TIMEOUT_S)
        while (line := self.lines.get(timeout=30)) is not None:
            self.seen += line
        return self.seen

    def workers(self) -> list[int]:
        """The worker processes: the children of the fork server, the runner's child."""
        (server,) = [p for p in _tree(self.proc.pid) if _parent(p) == self.proc.pid]
        return [p for p in _tree(server) if _parent(p) == server]


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except OSError:
        return -1


def _workers_started(runner: _Runner, count: int) -> list[int]:
    """The worker pids once `count` of them run a run: after the first run is stored, the
    parent keeps every worker busy (concurrency 4, two workers) until the last runs."""
    runner.wait_for(PROGRESS)
    workers = runner.workers()
    assert len(workers) == count, workers
    return workers


def test_g3_a_worker_killed_mid_sweep_makes_its_runs_errors_never_a_hang(
    slow_model: str, tmp_path: Path
) -> None:  # G3 V5
    spec = _slow_spec(tmp_path, slow_model, runs=16)
    db = tmp_path / "runs.duckdb"
    runner = _Runner(tmp_path, spec, db, "--processes", "2")
    try:
        victim = _workers_started(runner, 2)[0]
        os.kill(victim, signal.SIGKILL)
        out = runner.rest()
    finally:
        if runner.proc.poll() is None:
            os.killpg(runner.proc.pid, signal.SIGKILL)
    assert runner.proc.returncode == 3, out  # a run failed to run (V5)
    assert "1 worker processes ended during the sweep" in out
    rows = query(db, "SELECT status, error FROM runs")
    assert len(rows) == 16  # every run stored: the other worker took the rest
    errors = [e for s, e in rows if s == "error"]
    assert errors, "the killed worker held no run"
    assert all(f"worker process (pid {victim}) ended" in e for e in errors), errors
    # --retry-errors runs exactly those again, on fresh workers.
    again = _run(tmp_path, spec, db, "--processes", "2", "--retry-errors")
    assert again.returncode == 0, again.stderr
    assert f"{16 - len(errors)} runs were already stored" in again.stderr
    assert {s for (s,) in query(db, "SELECT status FROM runs")} == {"ok"}
    assert query(db, "SELECT count(*) FROM runs") == [(16,)]


@pytest.mark.parametrize(("sent", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_g3_ctrl_c_with_workers_stores_every_finished_run_and_ends_every_process(
    slow_model: str, tmp_path: Path, sent: signal.Signals, code: int
) -> None:  # G3 V14 R1
    spec = _slow_spec(tmp_path, slow_model, runs=16)
    db = tmp_path / "runs.duckdb"
    runner = _Runner(tmp_path, spec, db, "--processes", "2")
    try:
        _workers_started(runner, 2)
        tree = _tree(runner.proc.pid)
        os.killpg(runner.proc.pid, sent)  # as a terminal (or a supervisor) sends it: the group
        out = runner.rest()
    finally:
        if runner.proc.poll() is None:
            os.killpg(runner.proc.pid, signal.SIGKILL)
    assert runner.proc.returncode == code, out
    assert "every finished run is stored" in out
    assert _wait_gone(tree) == []  # the fork server and the workers too
    reported = max(int(m.group(1)) for m in PROGRESS.finditer(out))
    stored = query(db, "SELECT status FROM runs")
    assert reported <= len(stored) < 16  # every run reported done is stored; none half-done
    assert {s for (s,) in stored} == {"ok"}  # the workers ignore the signal: no run an error
    again = _run(tmp_path, spec, db, "--processes", "2")
    assert again.returncode == 0, again.stderr
    assert f"{len(stored)} runs were already stored" in again.stderr
    assert query(db, "SELECT count(*), count(DISTINCT run_id) FROM runs") == [(16, 16)]


def test_g3_a_sigkilled_runner_leaves_no_worker_behind(slow_model: str, tmp_path: Path) -> None:
    # G3 V7
    spec = _slow_spec(tmp_path, slow_model, runs=16)
    runner = _Runner(tmp_path, spec, tmp_path / "runs.duckdb", "--processes", "2")
    try:
        _workers_started(runner, 2)
        tree = _tree(runner.proc.pid)
        assert len(tree) >= 4  # the runner, the fork server, two workers
        os.kill(runner.proc.pid, signal.SIGKILL)  # the runner alone, not its group
        runner.proc.wait(timeout=30)
        left = _wait_gone(tree)
    finally:
        with contextlib.suppress(ProcessLookupError):  # whatever is left, not to leak it
            os.killpg(runner.proc.pid, signal.SIGKILL)
    assert left == []

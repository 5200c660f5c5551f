"""R3/G3: the runner's temporary folders. A run's working folder and the fork server's socket
folder carry the pid of the process that made them; a runner or worker killed by SIGKILL
leaves them behind, and the next `run` removes those whose process is gone (and that no one
changed for an hour), never a folder of a live process, another user's, or a link."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner.processes.workdirs import (
    _NAME,
    STALE_AFTER_S,
    UnmadeFolder,
    run_workdir,
    socket_folder,
    sweep_stale,
)
from tests.support.paths import BIN
from tests.support.specs import write_spec

pytestmark = pytest.mark.fresh_process


def dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def folder(root: Path, name: str, *, age_s: float) -> Path:
    path = root / name
    path.mkdir()
    (path / "upstream.sqlite").write_bytes(b"ledger")
    old = time.time() - age_s
    for p in (path / "upstream.sqlite", path):
        os.utime(p, (old, old))
    return path


def test_g3_the_folders_of_gone_processes_are_swept_and_nothing_else(tmp_path):
    gone, alive = dead_pid(), os.getppid()
    old = STALE_AFTER_S + 60
    stale_run = folder(tmp_path, f"agent-harness-0123456789abcdef-p{gone}-ab_c9", age_s=old)
    stale_forks = folder(tmp_path, f"agent-harness-forks-p{gone}-x1y2", age_s=old)
    live = folder(tmp_path, f"agent-harness-0123456789abcdef-p{alive}-zz", age_s=old)
    recent = folder(tmp_path, f"agent-harness-fedcba9876543210-p{gone}-qq", age_s=60)
    other = folder(tmp_path, f"someone-else-p{gone}-qq", age_s=old)
    target = folder(tmp_path, "target", age_s=old)
    link = tmp_path / f"agent-harness-forks-p{gone}-link"
    link.symlink_to(target)

    assert sweep_stale(str(tmp_path)) == 2

    assert not stale_run.exists() and not stale_forks.exists()
    assert live.exists() and recent.exists() and other.exists()
    assert link.is_symlink() and (target / "upstream.sqlite").exists()


def test_g3_a_folder_written_within_the_hour_is_kept_whatever_its_own_time(tmp_path):
    # A long run's folder: created long ago, its ledger written a minute ago.
    path = folder(tmp_path, f"agent-harness-0123456789abcdef-p{dead_pid()}-ab", age_s=7200)
    os.utime(path / "upstream.sqlite", (time.time() - 60, time.time() - 60))
    assert sweep_stale(str(tmp_path)) == 0 and path.exists()


def test_g3_the_names_carry_this_processes_pid(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    with run_workdir("0123456789abcdef") as name:
        assert Path(name).name.startswith(f"agent-harness-0123456789abcdef-p{os.getpid()}-")
        assert sweep_stale(str(tmp_path), now=time.time() + 10 * STALE_AFTER_S) == 0
    forks = Path(socket_folder())
    assert forks.name.startswith(f"agent-harness-forks-p{os.getpid()}-")
    forks.rmdir()
    # A folder made only if a run in process needs it: the same shape, swept the same way.
    unmade = UnmadeFolder("0123456789abcdef")
    assert not unmade.made() and Path(unmade.name).parent == tmp_path
    unmade.make()
    assert unmade.made() and _NAME.match(Path(unmade.name).name)
    assert sweep_stale(str(tmp_path), now=time.time() + 10 * STALE_AFTER_S) == 0  # ours: live
    unmade.cleanup()
    assert not unmade.made()


def test_g3_run_sweeps_a_killed_runners_folders_and_leaves_none_of_its_own(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    left = folder(
        tmp, f"agent-harness-0123456789abcdef-p{dead_pid()}-k1ll", age_s=2 * STALE_AFTER_S
    )
    spec = write_spec(tmp_path, "one", models=["scripted/naive"], runs=2)
    env = {**os.environ, "TMPDIR": str(tmp), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [str(BIN), "run", str(spec), "--db", str(tmp_path / "x.duckdb"), "--in-process", "never"],
        capture_output=True, text=True, env=env, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not left.exists()
    assert [p.name for p in tmp.iterdir() if p.name.startswith("agent-harness-")] == []


@pytest.mark.anyio
async def test_g3_a_run_in_process_leaves_no_folder_and_a_kept_one_is_removed(
    tmp_path, monkeypatch
):
    # A run in process keeps its ledger and report in memory (issue 37): it makes no folder
    # at all, and one made to be kept is removed before execute_run returns, not left to the
    # sweep or the garbage collector: 200 runs in flight keep at most 200 folders.
    import runner.execute.run as runmod
    from runner.execute import execute_run
    from runner.experiment import load_spec
    from runner.experiment.matrix import expand

    made: list[UnmadeFolder] = []

    def recording_folder(run_id: str) -> UnmadeFolder:
        made.append(UnmadeFolder(run_id))
        return made[-1]

    monkeypatch.setattr(runmod, "UnmadeFolder", recording_folder)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    spec = load_spec(write_spec(tmp_path, "gone", models=["scripted/naive"]))
    record = await execute_run(expand(spec)[0], spec, in_process="always")
    assert record.status == "ok", record.error
    assert record.report_json and record.real_duplicate  # the run really ran and was judged
    assert len(made) == 1 and list((tmp_path / "tmp").iterdir()) == []
    kept = await execute_run(expand(spec)[0], spec, in_process="always", keep_dir=tmp_path / "k")
    assert (tmp_path / "k" / kept.run_id / "report.json").exists()
    assert len(made) == 2 and not made[1].made() and list((tmp_path / "tmp").iterdir()) == []


@pytest.mark.anyio
async def test_g3_a_run_cancelled_in_its_conversation_removes_its_folder(tmp_path):
    # A run cancelled while it talks to its proxy (a stopped sweep, a run timeout from outside)
    # still removes its folder before the cancellation reaches its caller, not when the garbage
    # collector finds the TemporaryDirectory.
    import asyncio
    import contextlib

    from runner.execute import execute_run
    from runner.experiment import load_spec
    from runner.experiment.matrix import expand

    entered = asyncio.Event()
    seen: list[Path] = []

    @contextlib.asynccontextmanager
    async def connection_that_never_answers(target, workdir):
        (workdir / "ledger.sqlite").write_text("state")  # the run's files exist
        seen.append(workdir)
        entered.set()
        await asyncio.Event().wait()  # the conversation goes on until it is cancelled
        yield  # pragma: no cover

    spec = load_spec(write_spec(tmp_path, "cancelled", models=["scripted/naive"]))
    run = asyncio.create_task(
        execute_run(expand(spec)[0], spec, connect=connection_that_never_answers)
    )
    await entered.wait()
    assert seen[0].exists()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert not seen[0].exists()

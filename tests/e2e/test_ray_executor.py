"""Sweeps on Ray (SPEC G1): a 2-node cluster on this machine, one node killed mid-sweep.

One cluster serves the whole module (Ray takes seconds to start): a head node with one CPU,
where the driver (this test process) attaches, and worker nodes added per test. Runs are Ray
tasks; their records come back to the driver, the only writer of the DuckDB store. What the
scripted agents do is deterministic per run seed, so a sweep on Ray must store exactly what a
local sweep stores: the same run ids, verdicts, scores and the upstream's real rows.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import ray
from ray.cluster_utils import Cluster

from runner.execute import run_sweep
from runner.execute.ray_executor import RayExecutor
from runner.execute.sweep import Progress
from runner.experiment import load_spec
from runner.experiment.matrix import expand
from runner.experiment.records import RunRecord
from runner.store import Store
from tests.support import launcher
from tests.support.paths import BIN, ROOT
from tests.support.runkit import scripted_sweep_spec

pytestmark = pytest.mark.slow

MB = 1024 * 1024
SPEC = scripted_sweep_spec("on-ray", runs=3)  # shard 1/2 holds 12 of the 36 runs, 2/2 the rest


@pytest.fixture(scope="module")
def spec_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ray-spec") / "on-ray.yaml"
    path.write_text(SPEC)
    return path


@pytest.fixture(scope="module")
def cluster() -> Any:
    """Head node only: the driver's node. Quick failure detection, small object stores."""
    head = {
        "num_cpus": 1,
        "object_store_memory": 100 * MB,
        "include_dashboard": False,
        "_system_config": {
            # A killed node is noticed in ~2 s instead of ~30 s.
            "health_check_initial_delay_ms": 0,
            "health_check_period_ms": 500,
            "health_check_failure_threshold": 4,
            # Ray starts workers at niceness 15: on a machine busy with other work they get
            # almost no CPU, and runs would hit their deadline (run_timeout_s). Every node
            # takes this from the head.
            "worker_niceness": 0,
        },
    }
    made = Cluster(initialize_head=True, head_node_args=head)
    yield made
    if ray.is_initialized():
        ray.shutdown()
    made.shutdown()


def outcomes(db: Path, experiment: str = "on-ray") -> dict[str, tuple]:
    """Per run id: what the harness judged and what the upstream really holds."""
    with Store.open(db, read_only=True) as store:
        runs = store.load_runs(experiment)
        ops = store.load_children("operations", runs["run_id"].to_list())
        findings = store.load_children("violations", runs["run_id"].to_list())
    per_run: dict[str, list] = {}
    for op in ops.iter_rows(named=True):
        per_run.setdefault(op["run_id"], []).append(
            (op["idx"], op["tool"], op["executions"], op["outcome"], op["real_rows"])
        )
    violations: dict[str, list] = {}
    for f in findings.iter_rows(named=True):
        violations.setdefault(f["run_id"], []).append(f["code"])
    return {
        r["run_id"]: (
            r["status"], r["verdict"], r["score_overall"], r["duplicate_found"],
            r["real_duplicate"], r["patch_text"], tuple(per_run.get(r["run_id"], ())),
            tuple(violations.get(r["run_id"], ())),
        )
        for r in runs.iter_rows(named=True)
    }  # fmt: skip


@pytest.fixture(scope="module")
def local(spec_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple]:
    """The same experiment run in this process, the reference for every Ray sweep."""
    db = tmp_path_factory.mktemp("local") / "local.duckdb"
    spec = load_spec(spec_path)
    with Store.open(db) as store:
        result = asyncio.run(run_sweep(spec, expand(spec), store))
    assert (result.ran, result.errors) == (len(expand(spec)), 0)
    found = outcomes(db)
    assert len(found) == len(expand(spec))
    return found


def test_g1_a_node_killed_mid_sweep_loses_no_run_and_stores_none_twice(  # G1
    cluster: Any, spec_path: Path, local: dict[str, tuple], tmp_path: Path
) -> None:
    # The worker node's runs block once started (ray_worker_hook._hold_runs): it dies with runs
    # on it, never after finishing them; the head's 1 CPU runs the rest.
    worker = cluster.add_node(
        num_cpus=2, object_store_memory=100 * MB, env_vars={"AGENT_HARNESS_TEST_HOLD_RUNS": "1"}
    )
    cluster.wait_for_nodes()
    marks = tmp_path / "marks"
    marks.mkdir()
    ray.init(
        address=cluster.address,
        log_to_driver=False,
        runtime_env={
            "worker_process_setup_hook": "tests.support.ray_worker_hook.forbid_store",
            "env_vars": {"AGENT_HARNESS_TEST_MARKS": str(marks), "PYTHONPATH": str(ROOT)},
        },
    )
    spec = load_spec(spec_path)
    cells = expand(spec)
    executor = RayExecutor()
    killer: list[threading.Thread] = []
    reported: list[RunRecord] = []  # each run reported done (a few: this sweep is small)

    def kill_when_under_way(progress: Progress, record: RunRecord) -> None:
        reported.append(record)
        # Killed once a run is known to be held on the worker node: it dies with runs on it.
        if not killer and any(marks.glob("held-*")):
            killer.append(threading.Thread(target=cluster.remove_node, args=(worker, False)))
            killer[0].start()

    db = tmp_path / "ray.duckdb"
    try:
        with Store.open(db) as store:
            result = asyncio.run(
                run_sweep(
                    spec, cells, store, concurrency=4, execute=executor,
                    on_progress=kill_when_under_way,
                )
            )  # fmt: skip
    finally:
        for thread in killer:
            thread.join(timeout=60)
        ray.shutdown()
    assert killer, "the sweep ended before the node was killed"
    assert executor.lost >= 1, "no run was lost with the killed node"
    assert [r.error for r in reported if r.status != "ok"] == []
    # No run lost, none stored twice: one row per run of the matrix, and the same results.
    assert sorted(r.run_id for r in reported) == sorted(c.run_id for c in cells)
    assert (result.ran, result.errors) == (len(cells), 0)
    assert outcomes(db) == local
    # The workers ran the runs but never opened a store: only the driver wrote it.
    assert list(marks.glob("worker-*")), "the worker hook did not run"
    assert list(marks.glob("store-*")) == []


# Three CLI calls on a Ray cluster beside the rest of the suite: 83-197 s in the fresh-clone
# CIs of stops 30-31, 300 s (the suite's default timeout) once when the whole suite ran at half
# speed (ci28: most slow tests 2-2.5x their time in ci26). Each call is bounded by its own
# 600 s; a hang still fails, just not the slowness of a shared 2-core machine.
@pytest.mark.timeout(900)
def test_g1_run_and_sweep_on_ray_store_what_a_local_run_stores(  # G1 G2 R1
    cluster: Any, spec_path: Path, local: dict[str, tuple], tmp_path: Path
) -> None:
    cluster.add_node(num_cpus=1, object_store_memory=100 * MB)
    cluster.wait_for_nodes()
    db = tmp_path / "cli.duckdb"
    on_ray = ["--db", str(db), "--executor", "ray", "--address", cluster.address,
              "--concurrency", "3"]  # fmt: skip

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [str(BIN), *args, str(spec_path), *on_ray]
        return launcher.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)

    # Half the matrix with `run --shard`, the rest by `sweep`, which resumes as locally.
    first = cli("run", "--shard", "1/2")
    assert first.returncode == 0, first.stderr
    assert "running on Ray (2 nodes, 2 CPUs" in first.stderr
    part = len(outcomes(db))
    assert 0 < part < len(local)
    assert f"{part}/{part} runs" in first.stderr  # the progress line, as locally
    assert "scripted/" in first.stdout  # the summary table, as locally
    swept = cli("sweep", "-o", str(tmp_path / "on-ray.html"))
    assert swept.returncode == 0, swept.stderr
    assert "running on Ray (2 nodes, 2 CPUs" in swept.stderr
    assert f"{part} runs were already stored" in swept.stderr
    assert outcomes(db) == local
    # Nothing left: the driver finds every run stored and sends none.
    again = cli("sweep", "-o", str(tmp_path / "on-ray.html"))
    assert again.returncode == 0, again.stderr
    assert f"{len(local)} runs were already stored" in again.stderr
    assert outcomes(db) == local


@pytest.mark.fresh_process  # what a command imports
def test_g1_a_run_without_executor_ray_never_imports_ray(spec_path: Path, tmp_path: Path) -> None:
    # Ray is an optional extra: `agent-harness run` must work without it installed.
    probe = (
        "import sys\n"
        "from pathlib import Path\n"
        "from runner.execute.experiment import run_experiment\n"
        f"code = run_experiment(Path({str(spec_path)!r}), db=Path('x.duckdb'), concurrency=None,"
        " resume=True, retry_errors=False, only=['model=scripted/careful', 'scenario=F4',"
        " 'patch=none'], dry_run=False, in_process=None)\n"
        "assert code == 0, code\n"
        "assert 'ray' not in sys.modules, 'ray was imported'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

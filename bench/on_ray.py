"""Benchmark (G1): the same scripted sweep locally and on Ray with 1 and 2 nodes on this machine.

    .venv/bin/python bench/on_ray.py [--runs 25] [--concurrency 4] [--modes local,ray1,ray2]

A benchmark script, not a test: it prints the figures. The experiment is bench/runner.py's
(example.yaml's design with five scripted models, 40 cells x `--runs` = 1,000 runs; proxy and
built-in upstream in process), run three times into three fresh DuckDB files:

- local: `run_sweep` in this process, as `agent-harness run` does;
- ray1: a Ray cluster of one node (`ray.cluster_utils.Cluster`, `--concurrency` CPUs), every
  run a Ray task, the records sent back to this process, the store's only writer;
- ray2: two nodes on this machine sharing those CPUs (each half), the same tasks.

Ray's workers run at `--worker-niceness` (0 here; Ray's default is 15, under which they lose
every CPU contest with other work on a shared machine: measured that way at load 13-33, 200
runs took 7 times as long as locally and 4 of them ended as errors).

Every mode keeps the same number of runs in flight (`--concurrency`), so the difference in wall
time per run is what the engine costs: a task's scheduling, the spec and cell sent to the
worker, the record sent back. Cluster start-up is timed apart and not in the sweep's time;
the first tasks on each worker process pay its imports (litellm, 3-4 s), which is in it. The
stored results of the Ray modes are checked against the local ones (run ids and verdicts).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

MB = 1024 * 1024


def _bench_runner() -> Any:
    # bench/runner.py by path: its name clashes with the `runner` package.
    path = Path(__file__).resolve().parent / "runner.py"
    spec = importlib.util.spec_from_file_location("bench_runner", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def outcomes(db: Path, experiment: str) -> dict[str, tuple]:
    """run id -> (status, verdict, score), what must not depend on where a run ran."""
    from runner.store import Store

    with Store.open(db, read_only=True) as store:
        runs = store.load_runs(experiment, columns=["run_id", "status", "verdict", "score_overall"])
    return {r[0]: r[1:] for r in runs.iter_rows()}


def sweep(spec: Any, cells: list, db: Path, concurrency: int, execute: Any = None) -> tuple:
    """Run every cell into a fresh store; (wall seconds, CPU seconds of this process, records)."""
    from runner.execute import run_sweep
    from runner.store import Store

    extra = {"execute": execute} if execute is not None else {}
    records: list[Any] = []  # the sweep keeps none (issue 37)
    with Store.open(db) as store:
        t0, cpu0 = time.perf_counter(), time.process_time()
        asyncio.run(
            run_sweep(
                spec, cells, store, concurrency=concurrency, resume=False,
                on_progress=lambda _progress, record: records.append(record), **extra,
            )
        )  # fmt: skip
        return time.perf_counter() - t0, time.process_time() - cpu0, records


def on_ray(nodes: int, cpus: int, niceness: int, spec: Any, cells: list, db: Path) -> tuple:
    """The sweep on a cluster of `nodes` nodes sharing `cpus` CPUs; (start s, sweep's figures)."""
    import ray
    from ray.cluster_utils import Cluster

    from runner.execute.ray_executor import RayExecutor

    share = [cpus // nodes + (i < cpus % nodes) for i in range(nodes)]
    t0 = time.perf_counter()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": share[0], "object_store_memory": 200 * MB,
                        "include_dashboard": False,
                        "_system_config": {"worker_niceness": niceness}},
    )  # fmt: skip
    for n in share[1:]:
        cluster.add_node(num_cpus=n, object_store_memory=200 * MB)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    start_s = time.perf_counter() - t0
    try:
        executor = RayExecutor()
        figures = sweep(spec, cells, db, cpus, execute=executor)
        if executor.lost:
            print(f"  {executor.lost} tasks lost and sent again")
    finally:
        ray.shutdown()
        cluster.shutdown()
    return start_s, figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=25, help="repetitions per cell (40 cells)")
    parser.add_argument("--concurrency", type=int, default=4, help="runs in flight, every mode")
    parser.add_argument("--modes", default="local,ray1,ray2")
    parser.add_argument(
        "--worker-niceness", type=int, default=0,
        help="Ray's workers' niceness (Ray's own default is 15: on a machine busy with other "
        "work they then get almost no CPU, which is not the engine's cost)",
    )  # fmt: skip
    args = parser.parse_args()
    bench = _bench_runner()

    print(f"machine: {bench.machine()}")
    from runner.experiment import load_spec
    from runner.experiment.matrix import expand
    from runner.models.scripted import register_scripted_provider

    register_scripted_provider()
    with tempfile.TemporaryDirectory(prefix="agent-harness-bench-ray-") as tmp:
        folder = Path(tmp)
        spec = load_spec(bench.write_spec(folder, args.runs, args.concurrency))
        cells = expand(spec)
        n = len(cells)
        print(f"{n} runs ({n // spec.runs} cells x {spec.runs}), {args.concurrency} in flight, "
              f"Ray workers at niceness {args.worker_niceness}")  # fmt: skip
        walls: dict[str, float] = {}
        found: dict[str, dict] = {}
        for mode in args.modes.split(","):
            db = folder / f"{mode}.duckdb"
            if mode == "local":
                wall_s, cpu_s, records = sweep(spec, cells, db, args.concurrency)
                start = ""
            else:
                nodes = int(mode.removeprefix("ray"))
                niceness = args.worker_niceness
                start_s, (wall_s, cpu_s, records) = on_ray(
                    nodes, args.concurrency, niceness, spec, cells, db
                )
                start = f"; cluster start {start_s:.1f} s (not counted)"
            errors = sum(r.status == "error" for r in records)
            for message, count in Counter(r.error for r in records if r.error).most_common(3):
                print(f"  error x{count}: {message[:300]}")
            walls[mode], found[mode] = wall_s, outcomes(db, spec.name)
            print(
                f"{mode}: {len(records)} runs ({errors} errors) in {wall_s:.1f} s, "
                f"{len(records) / wall_s:.1f} runs/s, {wall_s / n * 1000:.0f} ms per run, "
                f"load average after {os.getloadavg()[0]:.1f}{start}"
            )
            # Locally this is every run's own work too; on Ray only the driver's: sending
            # tasks, receiving records, storing them. Its inverse bounds a sweep's runs/s.
            print(f"  CPU of this process (the driver): {cpu_s / n * 1000:.1f} ms per run")
        if "local" in walls:
            for mode, wall_s in walls.items():
                if mode == "local":
                    continue
                same = "same" if found[mode] == found["local"] else "DIFFERENT"
                extra_ms = (wall_s - walls["local"]) / n * 1000
                print(f"{mode} vs local: {extra_ms:+.0f} ms per run of wall time "
                      f"({args.concurrency} in flight); run ids and verdicts: {same}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

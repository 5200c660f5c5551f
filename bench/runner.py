"""Benchmark (N2): 1,000 scripted runs with the built-in upstreams in process, stored in DuckDB.

    .venv/bin/python bench/runner.py [--runs 25] [--concurrency 4] [--processes N] [--db PATH]
        [--profile OUT]
    .venv/bin/python bench/runner.py --litellm-floor [--repeat 5]

A benchmark script, not a test: it prints the figures. The experiment is the design of
experiments/example.yaml (F1, booking and booking-nosearch, with and without "please try
again", patch arms none and auto) with a fifth scripted model (parallel-naive): 5 models x
2 patch arms x 2 upstreams x 2 conversations = 40 cells, x `--runs` (25) = 1,000 runs. The
spec is generated in a temporary folder; nothing under the repository is written.

The runs go to worker processes as `agent-harness run` sends them (`--processes`, default as
`run` chooses: one per core for 1,000 runs; 1 runs them in this process, the earlier figures).

Figures:
- start-up: the imports (with worker processes: until every worker is ready, the fork
  server's import of litellm included);
- sweep: wall time of `run_sweep` (every run executed and stored the moment it ends, as
  `agent-harness run` does), runs/s;
- store inside the sweep: the wall time spent in `Store.save_runs` during the sweep (each
  finished run is committed before it counts as done, several runs finishing together in one
  transaction; the writes run in a worker thread beside the runs);
- store alone: the same 1,000 records written again into a fresh DuckDB file, one transaction
  per run and then as one batch.

The target (SPEC N2) is under 2 minutes for 1,000 runs on 2 cores.

`--litellm-floor` measures what litellm alone costs per call and per run instead: it records
the model calls of one run per cell (40 runs, in process), then replays them in this process,
`--repeat` times each, timing CPU (`time.process_time`, litellm's logging tasks included):
  - the calls as the runner makes them (`litellm.acompletion` to the scripted provider);
  - the same calls answered by a provider that returns the scripted model's answer prepared
    beforehand (a copy per call): litellm's own work per call, the scripted model excluded;
  - the scripted provider called directly, without litellm (the model's own decision).
Nothing optional is turned on: no callbacks, the cost stated on the response.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import platform
import pstats
import resource
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import yaml  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "experiments" / "example.yaml"
TARGET_S = 120.0


def write_spec(folder: Path, runs: int, concurrency: int) -> Path:
    """example.yaml's design, scaled to `runs` repetitions per cell, as a file in `folder`."""
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    data["name"] = "bench-runner"
    data["runs"] = runs
    data["concurrency"] = concurrency
    data["models"] = [*data["models"], "scripted/parallel-naive"]
    # Inline the prompt: the spec lives in a temp folder, not next to experiments/prompts/.
    prompts = []
    for prompt in data["prompts"]:
        if "file" in prompt:
            text = (EXAMPLE.parent / prompt["file"]).read_text(encoding="utf-8")
            prompt = {"name": prompt["name"], "text": text}
        prompts.append(prompt)
    data["prompts"] = prompts
    data.setdefault("proxy", {})["in_process"] = "always"
    path = folder / "bench-runner.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


class TimedStore:
    """The real store, with the time spent saving runs added up (the sweep saves in batches)."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.save_s = 0.0
        self.save_cpu_s = 0.0  # CPU of the writing thread (time.thread_time)
        self.batches: list[int] = []

    def save_runs(self, records: list[Any]) -> None:
        started, cpu = time.perf_counter(), time.thread_time()
        self._store.save_runs(records)
        self.save_s += time.perf_counter() - started
        self.save_cpu_s += time.thread_time() - cpu
        self.batches.append(len(records))

    def save_run(self, record: Any) -> None:
        self.save_runs([record])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def machine() -> str:
    """CPU model, cores, load, Python: enough to compare figures between machines."""
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return (
        f"{cpu}, {cores} cores usable, load average {load}, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=25, help="repetitions per cell (40 cells)")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--db", type=Path, help="DuckDB file (default: a temp file)")
    parser.add_argument("--profile", type=Path, help="write cProfile stats of the sweep here")
    parser.add_argument(
        "--processes", type=int, help="worker processes (default: as `run` chooses; 1: none)"
    )
    parser.add_argument(
        "--litellm-floor", action="store_true",
        help="measure litellm's CPU per call and per run instead of a sweep",
    )  # fmt: skip
    parser.add_argument("--repeat", type=int, default=5, help="passes for --litellm-floor")
    args = parser.parse_args()

    print(f"machine: {machine()}")
    if args.litellm_floor:
        return litellm_floor(args.repeat)
    started, cpu_started = time.perf_counter(), time.process_time()
    from runner.execute import run_sweep
    from runner.execute.pool import ProcessPool, processes_for
    from runner.experiment import load_spec
    from runner.experiment.matrix import expand
    from runner.store import Store

    own_s, own_cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
    folder = Path(tempfile.mkdtemp(prefix="agent-harness-bench-"))
    spec = load_spec(write_spec(folder, args.runs, args.concurrency))
    cells = expand(spec)
    processes = processes_for(len(cells), args.processes)
    pool = ProcessPool(spec, processes) if processes > 1 else None
    if pool is None:
        from runner.models.scripted import register_scripted_provider

        register_scripted_provider()  # imports litellm: start-up, not part of the sweep
    litellm_s = time.perf_counter() - started - own_s
    litellm_cpu_s = time.process_time() - cpu_started - own_cpu_s

    records: list[Any] = []  # the sweep keeps none (issue 37): this benchmark stores them again

    async def sweep(store: Any) -> tuple[Any, float, float, float]:
        if pool is not None:
            await pool.ready()  # the fork server's imports: start-up, not part of the sweep
        ready_s = time.perf_counter() - started
        t0, cpu0 = time.perf_counter(), time.process_time()
        result = await run_sweep(
            spec, cells, store, resume=False, **({"execute": pool} if pool else {}),
            on_progress=lambda _progress, record: records.append(record),
        )  # fmt: skip
        return result, ready_s, time.perf_counter() - t0, time.process_time() - cpu0

    try:
        db = args.db or folder / "runs.duckdb"
        store = TimedStore(Store.open(db))
        profiler = cProfile.Profile() if args.profile else None
        if profiler:
            profiler.enable()
        children_cpu0 = _children_cpu_s()
        result, import_s, sweep_s, sweep_cpu_s = asyncio.run(sweep(store))
        load_after = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        if pool is not None:
            pool.close()  # the workers' CPU counts once they are waited for
        workers_cpu_s = _children_cpu_s() - children_cpu0
        if profiler:
            profiler.disable()
            profiler.dump_stats(str(args.profile))
        where = f"on {processes} worker processes" if pool else "in process"
        print(
            f"{len(cells)} runs ({len(cells) // spec.runs} cells x {spec.runs}), "
            f"concurrency {spec.concurrency}, {where}; start-up (imports) {import_s:.1f} s: "
            f"the runner's {own_s:.2f} s ({own_cpu_s:.2f} s CPU), then "
            + (
                f"{import_s - own_s:.2f} s until the workers were ready (the fork server imports "
                "litellm)"
                if pool
                else f"litellm's {litellm_s:.2f} s ({litellm_cpu_s:.2f} s CPU)"
            )
        )
        statuses = Counter(r.status for r in records)
        verdicts = Counter(r.verdict for r in records)
        errors = Counter(r.error for r in records if r.error)

        # Storing alone, into a fresh file: per-run transactions, then one batch.
        with Store.open(folder / "store-per-run.duckdb") as fresh:
            t0 = time.perf_counter()
            for record in records:
                fresh.save_run(record)
            per_run_s = time.perf_counter() - t0
        with Store.open(folder / "store-batch.duckdb") as fresh:
            t0 = time.perf_counter()
            fresh.save_runs(records)
            batch_s = time.perf_counter() - t0
        store.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    n = len(records)
    print(f"runs finished: {n} ({dict(statuses)}); verdicts: {dict(verdicts)}")
    for message, count in errors.most_common(3):
        print(f"  error x{count}: {message}")
    print(f"sweep: {sweep_s:.1f} s total, {n / sweep_s:.1f} runs/s, "
          f"{sweep_s / max(n, 1) * 1000:.0f} ms per run")  # fmt: skip
    # CPU seconds depend far less on what else the machine runs than wall time does.
    print(
        f"  CPU of this process during the sweep: {sweep_cpu_s:.1f} s (all threads), "
        f"{sweep_cpu_s / max(n, 1) * 1000:.0f} ms per run; load average after: {load_after:.2f}"
    )
    if pool is not None:
        print(
            f"  CPU of the fork server and workers: {workers_cpu_s:.1f} s (start-up included), "
            f"{workers_cpu_s / max(n, 1) * 1000:.0f} ms per run"
        )
    batches = store.batches
    print(
        f"  storing during the sweep: {store.save_s:.1f} s in {len(batches)} transactions "
        f"(mean {n / max(len(batches), 1):.1f} runs each), in a worker thread beside the runs: "
        f"{store.save_s / max(n, 1) * 1000:.1f} ms per run amortised "
        f"({store.save_cpu_s / max(n, 1) * 1000:.1f} ms CPU)"
    )
    print(f"store alone, fresh file: {per_run_s:.1f} s one transaction per run "
          f"({per_run_s / max(n, 1) * 1000:.1f} ms each), {batch_s:.2f} s as one batch")  # fmt: skip
    verdict = "met" if sweep_s < TARGET_S and n == len(cells) else "NOT met"
    print(f"target N2 (1,000 runs under {TARGET_S:.0f} s on 2 cores): {verdict}")
    if args.profile:
        stats = pstats.Stats(str(args.profile))
        stats.sort_stats("tottime").print_stats(25)
    return 0 if n == len(cells) and statuses.get("error", 0) == 0 else 1


def litellm_floor(repeat: int) -> int:
    """CPU per litellm call to the scripted models, replaying one sweep's calls (module doc)."""
    import copy

    from runner.execute import run_sweep
    from runner.experiment import load_spec
    from runner.experiment.matrix import expand
    from runner.models import _provider
    from runner.models.scripted import register_scripted_provider
    from runner.store import Store

    register_scripted_provider()
    import litellm

    calls: list[dict[str, Any]] = []
    real = litellm.acompletion

    async def recording(**kwargs: Any) -> Any:
        calls.append(copy.deepcopy(kwargs))
        return await real(**kwargs)

    folder = Path(tempfile.mkdtemp(prefix="agent-harness-bench-"))
    try:
        spec = load_spec(write_spec(folder, 1, 4))
        cells = expand(spec)
        litellm.acompletion = recording
        with Store.open(folder / "runs.duckdb") as store:
            asyncio.run(run_sweep(spec, cells, store, resume=False))
    finally:
        litellm.acompletion = real
        shutil.rmtree(folder, ignore_errors=True)
    per_run = len(calls) / len(cells)

    handler = _provider.HANDLER
    scripted = handler.acompletion
    answers: list[Any] = []  # in the order of `calls`, which each pass replays in turn
    served = [0]

    async def prepared(model: str, messages: list, *args: Any, **kwargs: Any) -> Any:
        answer = answers[served[0] % len(answers)]
        served[0] += 1
        return answer.model_copy(deep=True)

    async def through_litellm() -> None:
        for kwargs in calls:
            await litellm.acompletion(**kwargs)

    async def provider_alone() -> None:
        for kwargs in calls:
            skip = ("model", "messages", "timeout", "max_retries", "num_retries")
            optional = {k: v for k, v in kwargs.items() if k not in skip}
            await scripted(kwargs["model"].split("/", 1)[1], kwargs["messages"],
                           optional_params=optional)  # fmt: skip

    async def measure(step: Any) -> list[float]:
        await step()  # a first pass warms litellm's caches
        figures = []
        for _ in range(repeat):
            cpu = time.process_time()
            await step()
            for _ in range(20):  # litellm's success logging runs as tasks a little later
                await asyncio.sleep(0)
            figures.append((time.process_time() - cpu) / len(calls) * 1000)
        return figures

    async def all_three() -> dict[str, list[float]]:
        figures = {"litellm + scripted model": await measure(through_litellm)}
        for kwargs in calls:  # the answers, prepared once, outside the timing
            model = kwargs["model"].split("/", 1)[1]
            skip = ("model", "messages", "timeout", "max_retries", "num_retries")
            optional = {k: v for k, v in kwargs.items() if k not in skip}
            answers.append(await scripted(model, kwargs["messages"], optional_params=optional))
        handler.acompletion = prepared  # type: ignore[method-assign]
        try:
            figures["litellm alone (prepared answers)"] = await measure(through_litellm)
        finally:
            handler.acompletion = scripted  # type: ignore[method-assign]
        figures["scripted model alone"] = await measure(provider_alone)
        return figures

    figures = asyncio.run(all_three())
    print(f"{len(calls)} model calls from {len(cells)} runs ({per_run:.2f} per run), "
          f"{repeat} passes each; CPU ms per call (min / median), then per run at the minimum:")  # fmt: skip
    for name, values in figures.items():
        values = sorted(values)
        low, mid = values[0], values[len(values) // 2]
        print(f"  {name}: {low:.2f} / {mid:.2f} ms per call, {low * per_run:.1f} ms per run")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

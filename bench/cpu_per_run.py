"""Benchmark (issue 37): CPU per scripted run with two model calls, and whose code spends it.

    .venv/bin/python bench/cpu_per_run.py [--runs 400] [--repeat 3] [--split-runs 400]

A benchmark script, not a test: it prints the figures. The run: scripted/careful against the
built-in booking upstream, no fault, one user message, so two model calls (the booking, then
its answer in words) and one tool call, hosted in process as `run` hosts a built-in upstream
by default, concurrency 4.

- All processes: `agent-harness run` as a user runs it, once with `--runs` runs and once with
  a tenth of them, alternately, `--repeat` times, both with `--processes` (default: one per
  core, as `run` spreads a large sweep; else the small command would run in process and the
  large one pay the fork server's start-up); the CPU of the runner and of every process
  it started (the fork server and its workers included, RUSAGE_CHILDREN), the difference
  divided by the difference in runs: the start-up (the imports, litellm's, the fork server's
  warm-up) falls out. Figures: the median, and min-max.
- Whose code: `--split-runs` of the same runs in this one process (`run_sweep`, as `run
  --processes 1`), after a warm-up, sampled by SIGPROF every millisecond of the process's CPU.
  Each sample weighs each thread's CPU since the last one (its schedstat) and goes to the
  innermost frame of the thread's stack that belongs to ours (harness/, runner/), litellm,
  the MCP SDK (mcp, mcp_types), the openai SDK or DuckDB; the standard library and other
  packages (pydantic, anyio, ...) count for whoever called them, and a stack with none of
  them (the event loop's own turns) counts as the event loop. What no Python thread shows
  (DuckDB's own threads) is "native threads". Ours is split again by room, the built-in
  upstream apart.
- Start-up (`--startup N`): from the exec of `agent-harness run` of a tenth of `--runs` to
  its first run stored (the store's earliest `finished_at`), beside a bare `import litellm` in a
  fresh Python (issue 37's goal: the first stored run within litellm's import + 0.5 s), N times
  alternately. Wall time: the machine's load moves it.
- litellm's settings (`--settings N`): the CPU of one `litellm.acompletion` to scripted/careful
  (one user message, answered in words) with each of litellm's public settings that touch its
  per-call work, each in a fresh process (some are read at import), N calls after a warm-up,
  alternating with the defaults `--repeat` times. For scale, the last row skips litellm's
  success logging through its private internal-call context: not a setting, and never used by
  the runner (it would also silence a user's own litellm callbacks).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent / "agent-harness"
sys.path.insert(0, str(REPO))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

SITE = f"{os.sep}site-packages{os.sep}"
OURS = (str(REPO / "harness") + os.sep, str(REPO / "runner") + os.sep)
THIRD = {"litellm": "litellm", "mcp": "MCP SDK", "mcp_types": "MCP SDK", "openai": "openai SDK"}
THIRD |= {"duckdb": "DuckDB"}


def spec(runs: int) -> dict[str, Any]:
    """The one-cell experiment: a 2-call scripted run, `runs` times."""
    return {
        "name": "bench-cpu-per-run",
        "models": ["scripted/careful"],
        "prompts": [{"name": "p", "text": "You book hotel rooms with the tools you have."}],
        "patches": ["none"],
        "upstreams": [{"name": "booking", "builtin": "booking"}],
        "scenarios": ["none"],
        "conversations": [
            {"name": "c", "user": "Please book a room. guest: Alice Example, date: 2026-12-01, "
             "nights: 2"}
        ],
        "runs": runs,
        "concurrency": 4,
        "proxy": {"audit_tools": "off"},
    }  # fmt: skip


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def command_cpu(folder: Path, runs: int, n: int, processes: int) -> float:
    """CPU seconds of one `agent-harness run` of `runs` runs and everything it started."""
    path = folder / f"spec-{runs}-{n}.yaml"
    path.write_text(yaml.safe_dump(spec(runs), sort_keys=False), encoding="utf-8")
    before = children_cpu_s()
    done = subprocess.run(
        [str(BIN), "run", str(path), "--db", str(folder / f"runs-{runs}-{n}.duckdb"),
         "--processes", str(processes)],
        cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"run failed ({done.returncode}): {done.stderr[-2000:]}")
    return children_cpu_s() - before


def first_stored_s(folder: Path, runs: int, n: int) -> float:
    """Seconds from the exec of `agent-harness run` to its first run stored."""
    import duckdb

    path = folder / f"first-{runs}-{n}.yaml"
    db = folder / f"first-{runs}-{n}.duckdb"
    path.write_text(yaml.safe_dump(spec(runs), sort_keys=False), encoding="utf-8")
    started = time.time()
    subprocess.run(
        [str(BIN), "run", str(path), "--db", str(db)], cwd=folder, check=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )  # fmt: skip
    con = duckdb.connect(str(db), read_only=True)
    try:
        (first,) = con.execute("SELECT epoch(min(finished_at)) FROM runs").fetchone()
    finally:
        con.close()
    return float(first) - started


def litellm_import_s() -> float:
    """Seconds of a fresh Python that imports litellm and exits."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "import litellm"], check=True,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )  # fmt: skip
    return time.perf_counter() - started


def startup(runs: int, repeat: int) -> tuple[list[float], list[float]]:
    """(first run stored, litellm's import) in seconds, alternately, `repeat` times each."""
    firsts, imports = [], []
    with tempfile.TemporaryDirectory(prefix="agent-harness-cpu-") as tmp:
        for n in range(repeat):
            imports.append(litellm_import_s())
            firsts.append(first_stored_s(Path(tmp), runs, n))
    return sorted(firsts), sorted(imports)


def all_processes(runs: int, repeat: int, processes: int) -> list[float]:
    """ms of CPU per run, all processes, start-up taken out (module doc), one per repetition."""
    few = max(1, runs // 10)
    figures = []
    with tempfile.TemporaryDirectory(prefix="agent-harness-cpu-") as tmp:
        for n in range(repeat):
            small = command_cpu(Path(tmp), few, n, processes)
            large = command_cpu(Path(tmp), runs, n, processes)
            figures.append((large - small) / (runs - few) * 1000)
    return figures


# -- whose code ------------------------------------------------------------------------------


def owner(frame: FrameType | None) -> tuple[str, str]:
    """(whose code, which room of ours) for a stack: its innermost frame of a known owner."""
    while frame is not None:
        file = frame.f_code.co_filename
        if file.startswith(OURS):
            room = os.path.relpath(file, REPO).split(os.sep)
            return "ours", "/".join(room[:2])
        if SITE in file:
            package = file.split(SITE, 1)[1].split(os.sep, 1)[0].removesuffix(".py")
            if package in THIRD:
                return THIRD[package], ""
        frame = frame.f_back
    return "event loop and other", ""


def thread_cpu_ns(native_id: int) -> int:
    try:
        with open(f"/proc/self/task/{native_id}/schedstat") as f:
            return int(f.read().split()[0])
    except OSError:
        return 0


class Sampler:
    """SIGPROF every millisecond of the process's CPU; each Python thread's CPU since the last
    sample, credited to the owner of its stack (module doc)."""

    def __init__(self) -> None:
        self.by_owner: Counter[str] = Counter()
        self.by_room: Counter[str] = Counter()
        self._last: dict[int, int] = {}

    def _tick(self, signum: int, frame: FrameType | None) -> None:
        frames = sys._current_frames()
        for thread in threading.enumerate():
            native = thread.native_id
            if native is None or thread.ident is None:
                continue
            now = thread_cpu_ns(native)
            spent = now - self._last.get(native, now)
            self._last[native] = now
            if spent <= 0:
                continue
            stack = frame if thread is threading.main_thread() else frames.get(thread.ident)
            who, room = owner(stack)
            self.by_owner[who] += spent
            if room:
                self.by_room[room] += spent

    def __enter__(self) -> Sampler:
        for thread in threading.enumerate():
            if thread.native_id is not None:
                self._last[thread.native_id] = thread_cpu_ns(thread.native_id)
        signal.signal(signal.SIGPROF, self._tick)
        signal.setitimer(signal.ITIMER_PROF, 0.001, 0.001)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        signal.signal(signal.SIGPROF, signal.SIG_DFL)


def split(runs: int) -> tuple[float, Counter[str], Counter[str]]:
    """CPU ms per run of `runs` runs in this process, and the ms per run by owner and room."""
    from runner.execute import run_sweep
    from runner.experiment import load_spec
    from runner.experiment.matrix import expand
    from runner.models.scripted import register_scripted_provider
    from runner.store import Store

    register_scripted_provider()
    with tempfile.TemporaryDirectory(prefix="agent-harness-cpu-") as tmp:
        path = Path(tmp) / "spec.yaml"
        path.write_text(yaml.safe_dump(spec(runs), sort_keys=False), encoding="utf-8")
        loaded = load_spec(path)
        cells = expand(loaded)

        async def sweep() -> tuple[float, Sampler]:
            with Store.open(Path(tmp) / "warm.duckdb") as store:  # the first runs load modules
                await run_sweep(loaded, cells[:20], store, resume=False)
            bad: list[str | None] = []  # the errors of the runs that failed

            def failed(_progress: Any, record: Any) -> None:
                if record.status != "ok":
                    bad.append(record.error)

            with Store.open(Path(tmp) / "runs.duckdb") as store:
                with Sampler() as sampler:
                    cpu = time.process_time()
                    result = await run_sweep(loaded, cells, store, resume=False, on_progress=failed)
                    cpu = time.process_time() - cpu
            if bad or result.ran != runs:
                raise SystemExit(f"{len(bad)} runs failed: {bad[:3]}")
            return cpu, sampler

        cpu, sampler = asyncio.run(sweep())
    per_run = cpu / runs * 1000
    scale = 1e-6 / runs  # ns in total -> ms per run
    owners = Counter({k: v * scale for k, v in sampler.by_owner.items()})
    owners["native threads (DuckDB)"] = max(0.0, per_run - sum(owners.values()))
    rooms = Counter({k: v * scale for k, v in sampler.by_room.items()})
    return per_run, owners, rooms


# -- litellm's settings -----------------------------------------------------------------------

# name -> (environment before the import, module attributes, keyword arguments per call)
SETTINGS: dict[str, tuple[dict[str, str], dict[str, Any], dict[str, Any]]] = {
    "defaults": ({}, {}, {}),
    "`no-log=True` per call": ({}, {}, {"no-log": True}),
    "litellm.turn_off_message_logging": ({}, {"turn_off_message_logging": True}, {}),
    "litellm.disable_token_counter": ({}, {"disable_token_counter": True}, {}),
    "LITELLM_DISABLE_REDACT_SECRETS=true": ({"LITELLM_DISABLE_REDACT_SECRETS": "true"}, {}, {}),
    "(private) internal-call context: no success logging": ({}, {}, {}),
}


def one_setting(name: str, calls: int) -> float:
    """ms of CPU per litellm.acompletion call with one setting, in this (fresh) process."""
    env, attributes, kwargs = SETTINGS[name]
    os.environ.update(env)
    from runner.models.calls import litellm_quietly
    from runner.models.scripted import register_scripted_provider

    litellm = litellm_quietly()
    register_scripted_provider()
    for key, value in attributes.items():
        setattr(litellm, key, value)
    messages = [{"role": "user", "content": spec(1)["conversations"][0]["user"]}]

    async def go() -> float:
        if name.startswith("(private)"):
            from litellm._internal_context import is_internal_call

            is_internal_call.set(True)
        from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER

        for _ in range(50):  # the first calls load modules
            await litellm.acompletion(model="scripted/careful", messages=messages, **kwargs)
        await GLOBAL_LOGGING_WORKER.flush()
        cpu = time.process_time()
        for _ in range(calls):
            await litellm.acompletion(model="scripted/careful", messages=messages, **kwargs)
        await GLOBAL_LOGGING_WORKER.flush()  # the success logging queued behind the calls
        return (time.process_time() - cpu) / calls * 1000

    return asyncio.run(go())


def settings(calls: int, repeat: int) -> dict[str, list[float]]:
    """ms per call with each setting, each in its own process, alternating, `repeat` times."""
    figures: dict[str, list[float]] = {name: [] for name in SETTINGS}
    for _ in range(repeat):
        for name in SETTINGS:
            done = subprocess.run(
                [sys.executable, __file__, "--one-setting", name, "--settings", str(calls)],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            figures[name].append(float(done.stdout.split()[-1]))
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400, help="runs of the larger command")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--processes", type=int, default=os.cpu_count() or 1,
        help="run's --processes for both commands (default: one per core, as run spreads "
        "a large sweep)",
    )  # fmt: skip
    parser.add_argument("--split-runs", type=int, default=400, help="0: no split")
    parser.add_argument(
        "--settings", type=int, default=0, help="calls per litellm setting (0: none); --runs 0 "
        "and --split-runs 0 leave only these rows",
    )  # fmt: skip
    parser.add_argument("--startup", type=int, default=3, help="start-up pairs (0: none)")
    parser.add_argument("--one-setting", choices=list(SETTINGS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_setting:
        print(f"{one_setting(args.one_setting, args.settings):.4f}")
        return 0
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{os.cpu_count()} CPUs, load average {load} before")
    if args.runs:
        figures = sorted(all_processes(args.runs, args.repeat, args.processes))
        print(
            f"CPU per scripted run (2 model calls), all processes, `agent-harness run` of "
            f"{args.runs} runs less {max(1, args.runs // 10)}, --processes {args.processes}: median "
            f"{statistics.median(figures):.1f} ms (min {figures[0]:.1f}, max {figures[-1]:.1f}; "
            f"{args.repeat} pairs)"
        )
    if args.startup:
        firsts, imports = startup(max(1, args.runs // 10), args.startup)
        first, imported = statistics.median(firsts), statistics.median(imports)
        print(
            f"start-up: the first stored run {first:.2f} s after the exec of `agent-harness run` "
            f"(min {firsts[0]:.2f}, max {firsts[-1]:.2f}); `import litellm` alone {imported:.2f} s "
            f"(min {imports[0]:.2f}, max {imports[-1]:.2f}): litellm's import + "
            f"{first - imported:.2f} s (medians of {args.startup})"
        )
    if args.split_runs:
        per_run, owners, rooms = split(args.split_runs)
        print(f"in one process, {args.split_runs} runs: {per_run:.1f} ms of CPU per run, of which")
        for who, ms in owners.most_common():
            print(f"  {who}: {ms:.2f} ms")
        print("  ours by room: " + ", ".join(f"{r} {ms:.2f}" for r, ms in rooms.most_common()))
    if args.settings:
        print(
            f"litellm.acompletion, ms of CPU per call ({args.settings} calls, median of "
            f"{args.repeat} processes, min-max):"
        )
        for name, values in settings(args.settings, args.repeat).items():
            values.sort()
            print(f"  {name}: {statistics.median(values):.3f} ({values[0]:.3f}-{values[-1]:.3f})")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average {load} after")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

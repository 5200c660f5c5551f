"""Benchmark (issues 24, 37): N runs in flight against a model that answers after a fixed delay.

    .venv/bin/python bench/concurrency.py [--n 10 50 200] [--modes subprocess in-process]
        [--delay 1.0] [--cases 500:5 200:1] [--runs-per-slot 3] [--max-rss-gb 8] [--processes N]

A benchmark script, not a test: it prints one row per (mode, N). Each row runs
`agent-harness run` as a user does, against bench/slow_model.py (an OpenAI-compatible endpoint
in its own process: one `create_booking` tool call, then words, each after `--delay` seconds,
so a run spends 2 x delay in its model) and the built-in booking upstream under F1, with
`--concurrency N` and N x `--runs-per-slot` runs, for each N of `--n` at `--delay`, or for each
`N:DELAY` of `--cases` (issue 37's rows: `500:5` and `200:1`):

- subprocess: `--in-process never`, a real `agent-harness proxy` and upstream process per run
  (what `run` does for any upstream that is not built in);
- in-process: `--in-process always`, the same proxy code and upstream in the runner's process
  (or in its worker processes: `run` spreads the runs over one per core from 40 runs per
  process; `--processes N` passes its flag, 1 keeps every run in the runner's process).

Figures: runs/hour once the first run has ended (the runs started after it, over the time
from it to the last finish, read from the store: the runner's start-up and the first wave's
warm-up are not in it) and over the whole command; the ideal, N x 3600 / (2 x delay);
their ratio; peak resident memory (sum of VmRSS over the runner and every descendant) and
that divided by N (MB per run in flight); peak open descriptors of the tree and the fullest
process's against its own soft limit (RLIMIT_NOFILE, from /proc), sampled every 0.2 s; CPU seconds of the whole tree per run
(start-up included), which sets the ceiling: one runner process uses at most one core for
its Python, so it completes at most about 1 / (CPU per run) runs a second. A tree over `--max-rss-gb` is stopped
(the row says so): the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent / "agent-harness"
CALLS_PER_RUN = 2  # the endpoint's tool call, then its answer in words


def spec(url: str, runs: int, concurrency: int) -> dict:
    return {
        "name": "bench-concurrency",
        "models": [{"name": "openai/bench-model", "params": {"api_base": url}}],
        "prompts": [{"name": "plain", "text": "You book hotel rooms with the tools you have."}],
        "patches": ["none"],
        "upstreams": [{"name": "booking", "builtin": "booking"}],
        "scenarios": ["F1"],
        "conversations": [
            {"name": "single", "user": "Please book a room for Alice Example on 2026-12-01."}
        ],
        "runs": runs,
        "concurrency": concurrency,
        "limits": {"max_turns": 4, "model_timeout_s": 120, "run_timeout_s": 600},
        "proxy": {"audit_tools": "off"},
    }


def tree(root: int) -> list[int]:
    """The pid and every descendant of it, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def soft_fd_limit(pid: int) -> int:
    """A process's soft limit of open descriptors (0 if it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                soft = line.split()[3]
                return 1 << 62 if soft == "unlimited" else int(soft)
    except OSError:
        pass
    return 0


def cpu_ticks(pid: int) -> tuple[int, int] | None:
    """(parent pid, user + system clock ticks) of a process, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), int(fields[11]) + int(fields[12])


@dataclass
class Peak:
    rss_kb: int = 0
    fds: int = 0
    # the fullest process against its soft limit: (its descriptors, its soft limit)
    fullest: tuple[int, int] = (0, 1)
    processes: int = 0
    over_cap: bool = False
    # the last CPU seen of each process (parent pid, ticks), the runner's tree and the endpoint
    cpu: dict[int, tuple[int, int]] = field(default_factory=dict)


def watch(
    procs: list[subprocess.Popen], peak: Peak, cap_kb: int, stop: threading.Event,
    extra: tuple[int, ...] = (),
) -> None:  # fmt: skip
    while not stop.wait(0.2):
        pids = [pid for proc in procs for pid in tree(proc.pid)]
        for pid in [*pids, *extra]:
            if (seen := cpu_ticks(pid)) is not None:
                peak.cpu[pid] = seen
        rss = sum(rss_kb(p) for p in pids)
        peak.rss_kb = max(peak.rss_kb, rss)
        counts = {p: fds(p) for p in pids}
        peak.fds = max(peak.fds, sum(counts.values()))
        for p, count in counts.items():
            limit = soft_fd_limit(p)
            if limit and count / limit > peak.fullest[0] / peak.fullest[1]:
                peak.fullest = (count, limit)
        peak.processes = max(peak.processes, len(pids))
        if rss > cap_kb and not peak.over_cap:
            peak.over_cap = True
            for proc in procs:
                os.killpg(proc.pid, signal.SIGKILL)


def start_model(delay: float) -> tuple[subprocess.Popen, str]:
    model = subprocess.Popen(
        [sys.executable, str(REPO / "bench" / "slow_model.py"), "--delay", str(delay)],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = model.stdout.readline() if model.stdout else ""
    found = re.search(r"listening on (\S+)", line)
    if not found:
        model.kill()
        raise SystemExit(f"the model endpoint did not start: {line!r}")
    return model, found.group(1)


def steady_rate(db: Path) -> tuple[int, int, float, float]:
    """Runs stored, runs that ended in an error, and runs per hour once the first run ended:
    the runs started after that moment over the time from it to the last finish (the first
    wave also pays litellm's first call, which loads its OpenAI client); and the mean time
    from start to finish of those runs (with N always in flight, runs per second are at most
    N / that time: how much of the ratio the runs' own slowness takes, apart from the ramps)."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        n, errors, first_end, last_end = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE status = 'error'), min(finished_at), "
            "max(finished_at) FROM runs"
        ).fetchone()
        later = con.execute(
            "SELECT count(*), avg(epoch(finished_at) - epoch(started_at)) FROM runs "
            "WHERE started_at >= ?",
            [first_end],
        ).fetchone()
    finally:
        con.close()
    span = (last_end - first_end).total_seconds() if n else 0.0
    rate = later[0] / span * 3600 if span > 0 else float("nan")
    return int(n), int(errors), rate, float(later[1] or "nan")


def _children_cpu_s() -> float:
    """CPU seconds of every finished child process and its descendants (the runner's tree)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_by_process(
    peak: Peak, roots: list[int], model: int, model_cpu: tuple[int, int] | None
) -> str:
    """The CPU seconds of each process by its place in the tree (as last seen, every 0.2 s):
    the runner, what it started (the fork server), their children (the workers)..., and the
    model endpoint's (which competes for the same cores, though a remote model would not)."""
    tick = os.sysconf("SC_CLK_TCK")
    depth = {pid: 0 for pid in roots}
    for _ in range(4):
        for pid, (ppid, _ticks) in peak.cpu.items():
            if ppid in depth and pid not in depth:
                depth[pid] = depth[ppid] + 1
    names = {0: "runner", 1: "fork server", 2: "workers"}
    parts: dict[str, list[float]] = {}
    for pid, level in sorted(depth.items(), key=lambda item: item[1]):
        if pid in peak.cpu:
            parts.setdefault(names.get(level, f"depth {level}"), []).append(peak.cpu[pid][1] / tick)
    parts["model endpoint"] = [(model_cpu or peak.cpu.get(model, (0, 0)))[1] / tick]
    return "; ".join(
        f"{name} {' + '.join(f'{s:.2f}' for s in sorted(values, reverse=True)[:4])}"
        + (f" (+{len(values) - 4} more: {sum(sorted(values, reverse=True)[4:]):.2f})"
           if len(values) > 4 else "")
        for name, values in parts.items()
    )  # fmt: skip


def one(
    mode: str, n: int, delay: float, args: argparse.Namespace, folder: Path, notes: list[str]
) -> str:
    runs = n * args.runs_per_slot
    url_model, url = start_model(delay)
    try:
        path = folder / f"{mode}-{n}-{delay:g}.yaml"
        path.write_text(yaml.safe_dump(spec(url, runs, n), sort_keys=False), encoding="utf-8")
        in_process = "never" if mode == "subprocess" else "always"
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        peak, stop = Peak(), threading.Event()
        started = time.perf_counter()
        cpu_before = _children_cpu_s()
        shards = args.shards if mode == "in-process" else 1
        procs, dbs = [], []
        for i in range(1, shards + 1):
            # Each shard: its own process and store, its share of the runs and of N.
            db = folder / f"{mode}-{n}-{delay:g}-{i}.duckdb"
            part = ["--shard", f"{i}/{shards}", "--concurrency", str(n // shards)]
            command = [str(BIN), "run", str(path), "--db", str(db), "--in-process", in_process]
            if args.processes is not None:
                command += ["--processes", str(args.processes)]
            err = (folder / f"{mode}-{n}-{delay:g}-{i}.err").open("w")
            procs.append(
                subprocess.Popen(
                    command + (part if shards > 1 else []),
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                    env=env,
                    cwd=folder,
                    start_new_session=True,
                )
            )
            dbs.append(db)
        watcher = threading.Thread(
            target=watch,
            args=(procs, peak, int(args.max_rss_gb * 1024 * 1024), stop, (url_model.pid,)),
        )
        watcher.start()
        code = max(proc.wait() for proc in procs)
        wall = time.perf_counter() - started
        cpu = _children_cpu_s() - cpu_before
        stop.set()
        watcher.join()
        model_cpu = cpu_ticks(url_model.pid)
    finally:
        url_model.terminate()
        url_model.wait()
    ideal = n * 3600 / (CALLS_PER_RUN * delay)
    if args.processes is not None:
        mode = f"{mode}, --processes {args.processes}"
    if peak.over_cap:
        return (
            f"| {mode} | {n} | {delay:g} s | stopped: the tree passed {args.max_rss_gb:g} GB of "
            f"RSS ({peak.processes} processes, {peak.fds} descriptors) | | | | | | |"
        )
    rates = [steady_rate(db) for db in dbs]
    stored, errors = sum(r[0] for r in rates), sum(r[1] for r in rates)
    per_hour = sum(r[2] for r in rates)
    if shards > 1:
        mode = f"{mode}, {shards} shards"
    whole = stored / wall * 3600
    by_process = cpu_by_process(peak, [proc.pid for proc in procs], url_model.pid, model_cpu)
    took = sum(r[3] for r in rates) / len(rates)
    notes.append(
        f"{mode}, N = {n}, {delay:g} s answers: {wall:.1f} s; a run took {took:.2f} s on average "
        f"once the first ended ({CALLS_PER_RUN * delay:g} s of model time: at most "
        f"{CALLS_PER_RUN * delay / took:.2f} of the ideal with N always in flight); "
        f"CPU by process (s): {by_process}"
    )
    return (
        f"| {mode} | {n} | {delay:g} s | {stored} ({errors} errors, exit {code}) | "
        f"{per_hour:,.0f} ({whole:,.0f} with start-up) | {ideal:,.0f} | {per_hour / ideal:.2f} | "
        f"{peak.rss_kb / 1024:,.0f} MB, {peak.processes} processes | "
        f"{peak.rss_kb / 1024 / n:.2f} MB | {peak.fds}; fullest process {peak.fullest[0]} of "
        f"{peak.fullest[1]} | {cpu / max(stored, 1) * 1000:.0f} ms |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[10, 50, 200])
    parser.add_argument(
        "--modes", nargs="+", default=["in-process", "subprocess"],
        choices=["in-process", "subprocess"],
    )  # fmt: skip
    parser.add_argument("--delay", type=float, default=1.0, help="seconds per model answer")
    parser.add_argument(
        "--cases", nargs="+", metavar="N:DELAY", help="instead of --n and --delay: N runs in "
        "flight with DELAY-second answers, for each",
    )  # fmt: skip
    parser.add_argument("--runs-per-slot", type=int, default=5, help="runs = N x this")
    parser.add_argument("--max-rss-gb", type=float, default=8.0)
    parser.add_argument(
        "--shards", type=int, default=1,
        help="in-process: split the runs over this many runner processes (run --shard i/K)",
    )  # fmt: skip
    parser.add_argument(
        "--processes", type=int, help="pass `--processes N` to run (default: run's own choice)"
    )
    parser.add_argument("--keep", type=Path, help="keep specs, stores and stderr in this folder")
    args = parser.parse_args()
    try:
        cases = [
            (int(n), float(delay)) for n, delay in (case.split(":") for case in args.cases or [])
        ] or [(n, args.delay) for n in args.n]
    except ValueError:
        parser.error(f"--cases takes N:DELAY, such as 500:5, not {args.cases}")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    print(f"{os.cpu_count()} CPUs, load average {load} before; descriptor limit {limit}")
    print(
        "| mode | N | answers | runs stored | runs/hour | ideal | ratio | peak RSS of the tree "
        "| per run in flight | peak fds | CPU per run |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="agent-harness-conc-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for mode in args.modes:
            for n, delay in cases:
                print(one(mode, n, delay, args, folder, notes), flush=True)
    for note in notes:
        print(note)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average {load} after")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark (issue 24, SPEC N1): N pipelined writes through `agent-harness proxy`, wall and memory.

    .venv/bin/python bench/proxy_pipelined.py                 # 50,000 writes, report file on
    .venv/bin/python bench/proxy_pipelined.py --writes 5000 --runs 3
    .venv/bin/python bench/proxy_pipelined.py --heap 20       # tracemalloc top 20, in process

A benchmark script, not a test: it prints one line per run and the medians. The agent's side is
a file: the handshake and N distinct `create_booking` writes (C4) are written first, then the
installed `agent-harness proxy --audit-tools off --report-file ...` reads it as stdin in front
of bench/fast_upstream.py and writes its answers to a file. Wall time is from start to exit;
peak RSS is the proxy process's own peak resident set size (VmHWM, polled every 50 ms, whose
last reading is its highest), so the upstream's memory is not counted. `--heap N` runs the
same session in this process under tracemalloc instead (slower: not a timing) and prints the
N biggest allocation sites still alive at the end, grouped by traceback, when the report file
has just been written.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
UPSTREAM = HERE / "fast_upstream.py"
AGENT_HARNESS = Path(sys.executable).parent / "agent-harness"


def write_input(path: Path, writes: int) -> None:
    """The agent's side as a file: handshake, then `writes` distinct create_booking calls."""
    lines = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
    ]  # fmt: skip
    with path.open("w") as out:
        for line in lines:
            out.write(json.dumps(line) + "\n")
        for i in range(writes):
            arguments = {"guest": f"guest-{i}", "date": "2026-12-01", "nights": i % 7 + 1}
            call = {"jsonrpc": "2.0", "id": i + 2, "method": "tools/call",
                    "params": {"name": "create_booking", "arguments": arguments}}  # fmt: skip
            out.write(json.dumps(call) + "\n")


def proxy_argv(report: Path) -> list[str]:
    return [
        str(AGENT_HARNESS), "proxy", "--upstream-command", sys.executable,
        "--upstream-arg", str(UPSTREAM), "--audit-tools", "off", "--report-file", str(report),
    ]  # fmt: skip


def vm_hwm_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def run_once(folder: Path, source: Path, writes: int) -> tuple[float, float, int]:
    """(wall seconds, proxy peak RSS in MB, answers written) for one pipelined session."""
    # Every run in a folder of its own: a report file's event log left beside it by an earlier
    # run would make the proxy continue that session (X14), not start a new one.
    folder = Path(tempfile.mkdtemp(prefix="run-", dir=folder))
    report, answers = folder / "report.json", folder / "answers.jsonl"
    started = time.perf_counter()
    with source.open("rb") as stdin, answers.open("wb") as stdout:
        proc = subprocess.Popen(
            proxy_argv(report), stdin=stdin, stdout=stdout, stderr=subprocess.DEVNULL
        )
        peak = 0
        while proc.poll() is None:
            peak = max(peak, vm_hwm_kb(proc.pid) or 0)
            time.sleep(0.05)
    wall = time.perf_counter() - started
    with answers.open("rb") as lines:
        count = sum(1 for _ in lines)
    if proc.returncode != 0 or count < writes + 2:
        sys.exit(f"proxy exited {proc.returncode} with {count} answers for {writes + 2} requests")
    return wall, peak / 1024, count


def heap_profile(folder: Path, source: Path, top: int) -> None:
    """Run the proxy in a child Python under tracemalloc; print the biggest live allocation sites
    at the moment the session ends (its report file written, the session still held)."""
    argv = [sys.executable, __file__, "--heap-child", str(top), *proxy_argv(folder / "r.json")[2:]]
    with source.open("rb") as stdin:
        subprocess.run(argv, stdin=stdin, stdout=subprocess.DEVNULL, check=True)


def heap_child(top: int, argv: list[str]) -> None:
    import tracemalloc

    from harness.proxy import main as proxy_main
    from harness.report.file import ReportFile

    snapshots: list[tracemalloc.Snapshot] = []
    release = ReportFile.release

    def snapshot_then_release(self: ReportFile) -> None:
        if not snapshots:
            snapshots.append(tracemalloc.take_snapshot())
        release(self)

    ReportFile.release = snapshot_then_release  # type: ignore[method-assign]
    tracemalloc.start(12)
    proxy_main.main(argv)
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    snapshot = snapshots[0].filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
    total = sum(stat.size for stat in snapshot.statistics("filename"))
    out = sys.stderr
    print(f"tracemalloc: {total / 1e6:.1f} MB live as the session ends, "
          f"{peak / 1e6:.1f} MB peak", file=out)  # fmt: skip
    for stat in snapshot.statistics("traceback")[:top]:
        ours = [f for f in stat.traceback if "/harness/" in f.filename] or list(stat.traceback)
        frames = [f"{'/'.join(Path(f.filename).parts[-2:])}:{f.lineno}" for f in ours][-4:]
        frames.reverse()  # the innermost of the project's frames first
        print(f"{stat.size / 1e6:7.1f} MB {stat.count:>8,} blocks  {' <- '.join(frames)}", file=out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--heap", type=int, default=0, metavar="N",
                        help="in process under tracemalloc; print the N biggest sites")  # fmt: skip
    parser.add_argument("--heap-child", type=int, default=0, help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args()
    if args.heap_child:
        heap_child(args.heap_child, rest)
        return
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if not AGENT_HARNESS.exists():
        sys.exit(f"{AGENT_HARNESS} not found: install the project first (make setup)")
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        source = folder / "requests.jsonl"
        write_input(source, args.writes)
        if args.heap:
            heap_profile(folder, source, args.heap)
            return
        print(f"{args.writes:,} pipelined writes through the proxy, report file on; "
              f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} at start")  # fmt: skip
        walls, peaks = [], []
        for _ in range(args.runs):
            wall, peak, _count = run_once(folder, source, args.writes)
            walls.append(wall)
            peaks.append(peak)
            print(f"  {wall:6.1f} s wall, {peak:6.1f} MB peak RSS (proxy), "
                  f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
        print(f"median: {statistics.median(walls):.1f} s, {statistics.median(peaks):.1f} MB")


if __name__ == "__main__":
    main()

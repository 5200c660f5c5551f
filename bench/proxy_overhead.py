"""Benchmark (SPEC N1): latency the proxy adds per call, proxy versus direct, same upstream.

    .venv/bin/python bench/proxy_overhead.py            # 100, 5,000 and 50,000 writes
    .venv/bin/python bench/proxy_overhead.py --quick    # 100 and 5,000 only

A benchmark script, not a test: it prints a table. Two copies of the same minimal upstream
(bench/fast_upstream.py, microseconds per call, no SDK) run side by side, one spoken to
directly, one through the installed `agent-harness proxy --audit-tools off`. A raw JSON-RPC
client (blocking pipes, no SDK) sends distinct `create_booking` writes, alternating which path
goes first, so each proxied call has a direct twin sent at the same moment and at the same
session length. `added` is the per-pair difference (proxied minus direct); its median and 90th
percentile are taken over a window of calls ending at each session length: calls 1-100, then
the last 1,000 calls before 5,000 and before 50,000. The whole run happens once without and
once with `--report-file` (O3: the report is rewritten before each call goes upstream and
before each answer). Targets (N1): median added under 1 ms without a report file, under 3 ms
with, at 5,000 writes, and flat as the session grows.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
UPSTREAM = HERE / "fast_upstream.py"
AGENT_HARNESS = Path(sys.executable).parent / "agent-harness"
WARMUP_READS = 200
WINDOW = 1000


class Endpoint:
    """A stdio MCP peer spoken to with blocking pipes: one request, one answer at a time."""

    def __init__(self, argv: list[str], name: str) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in, self._out = self.proc.stdin, self.proc.stdout
        self._next = 0

    def request(self, method: str, params: dict) -> tuple[dict, int]:
        """Send one request; the answer and the round trip in nanoseconds."""
        self._next += 1
        rpc_id = self._next
        line = json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params})
        start = time.perf_counter_ns()
        self._in.write(line.encode() + b"\n")
        self._in.flush()
        while True:
            raw = self._out.readline()
            if not raw:
                raise RuntimeError(f"{self.name} closed its output")
            message = json.loads(raw)
            if message.get("id") == rpc_id and "method" not in message:
                return message, time.perf_counter_ns() - start

    def notify(self, method: str) -> None:
        self._in.write(json.dumps({"jsonrpc": "2.0", "method": method}).encode() + b"\n")
        self._in.flush()

    def handshake(self) -> None:
        self.request("initialize", {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        })  # fmt: skip
        self.notify("notifications/initialized")
        self.request("tools/list", {})

    def close(self) -> None:
        self._in.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@dataclass
class Samples:
    direct: list[int] = field(default_factory=list)
    proxied: list[int] = field(default_factory=list)

    def window(self, end: int) -> tuple[float, float, float, float]:
        """(median direct, median proxied, median added, p90 added) in ms, calls end-W+1..end."""
        start = 0 if end <= WINDOW else end - WINDOW
        direct, proxied = self.direct[start:end], self.proxied[start:end]
        added = sorted(p - d for p, d in zip(proxied, direct, strict=True))
        p90 = added[min(len(added) - 1, int(0.9 * len(added)))]
        ms = 1e-6
        return (
            statistics.median(direct) * ms,
            statistics.median(proxied) * ms,
            statistics.median(added) * ms,
            p90 * ms,
        )


def run_session(
    calls: int, report_file: Path | None, profile: Path | None = None
) -> tuple[Samples, float]:
    """One proxied and one direct session of `calls` distinct writes; samples and wall time."""
    upstream = [sys.executable, str(UPSTREAM)]
    profiler = [sys.executable, "-m", "cProfile", "-o", str(profile)] if profile else []
    proxy_argv = [
        *profiler, str(AGENT_HARNESS), "proxy", "--upstream-command", sys.executable,
        "--upstream-arg", str(UPSTREAM), "--audit-tools", "off",
    ]  # fmt: skip
    # "report file off" is --no-report-file: without either flag the proxy keeps a default one
    proxy_argv += ["--report-file", str(report_file)] if report_file else ["--no-report-file"]
    direct, proxied = Endpoint(upstream, "direct upstream"), Endpoint(proxy_argv, "proxy")
    samples = Samples()
    started = time.perf_counter()
    try:
        for endpoint in (direct, proxied):
            endpoint.handshake()
        for i in range(WARMUP_READS):  # reads: warm both paths without adding write operations
            for endpoint in (direct, proxied):
                endpoint.request("tools/call", {"name": "search_bookings",
                                                "arguments": {"guest": f"w{i}"}})
        for i in range(calls):
            arguments = {"guest": f"guest-{i}", "date": "2026-12-01", "nights": i % 7 + 1}
            params = {"name": "create_booking", "arguments": arguments}
            order = (direct, proxied) if i % 2 == 0 else (proxied, direct)
            for endpoint in order:
                answer, took = endpoint.request("tools/call", params)
                if answer.get("result", {}).get("isError"):
                    raise RuntimeError(f"{endpoint.name} answered an error: {answer}")
                (samples.direct if endpoint is direct else samples.proxied).append(took)
    finally:
        direct.close()
        proxied.close()
    return samples, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 and 5,000 writes only")
    parser.add_argument(
        "--report-dir", type=Path, default=None,
        help="folder for the report file (default: a temporary folder)",
    )  # fmt: skip
    parser.add_argument(
        "--only", choices=("on", "off"), default=None,
        help="run only with (on) or without (off) the report file",
    )  # fmt: skip
    parser.add_argument(
        "--profile", type=Path, default=None,
        help="run the proxy under cProfile and write its stats here (one mode: use --only)",
    )  # fmt: skip
    args = parser.parse_args()
    sizes = [100, 5_000] if args.quick else [100, 5_000, 50_000]
    if not AGENT_HARNESS.exists():
        sys.exit(f"{AGENT_HARNESS} not found: install the project first (make setup)")

    print(f"proxy overhead, {platform.python_implementation()} {platform.python_version()}, "
          f"{platform.machine()}, {os.cpu_count()} CPUs; upstream: bench/fast_upstream.py")
    header = (f"{'report file':<12} {'calls':>7} {'window':>13} {'direct ms':>10} "
              f"{'via proxy ms':>13} {'added ms':>9} {'p90 added':>10}")
    rows = []
    with tempfile.TemporaryDirectory(dir=args.report_dir) as folder:
        modes = {"off": (False,), "on": (True,), None: (False, True)}[args.only]
        for with_report in modes:
            report = Path(folder) / "report.json" if with_report else None
            samples, wall = run_session(sizes[-1], report, args.profile)
            size = report.stat().st_size if report is not None else 0
            for end in sizes:
                first = 1 if end <= WINDOW else end - WINDOW + 1
                d, p, added, p90 = samples.window(end)
                rows.append(
                    f"{'on' if with_report else 'off':<12} {end:>7,} {f'{first:,}-{end:,}':>13} "
                    f"{d:>10.3f} {p:>13.3f} {added:>9.3f} {p90:>10.3f}"
                )
            note = f", final report {size / 1e6:.1f} MB" if report is not None else ""
            rows.append(f"{'':<12} ({sizes[-1]:,} writes per path in {wall:.0f} s{note})")
    print(header)
    print("\n".join(rows))
    print("Targets (N1): added < 1 ms without report file, < 3 ms with, flat as calls grow.")


if __name__ == "__main__":
    main()

"""Benchmark (V7): what the upstream's group supervisor adds to the proxy's start.

    .venv/bin/python bench/proxy_startup.py [--runs N]

A benchmark script, not a test: it prints medians. The proxy starts the upstream, then a
supervisor (harness/wire/supervisor.py: /bin/sh holding a pipe) that ends the upstream's process
group should the proxy die. Measured here, in one asyncio process like the proxy's:

- `upstream`: starting the upstream alone (asyncio subprocess of bench/fast_upstream.py,
  until the process exists; its interpreter start-up runs on after that);
- `supervisor`: starting the supervisor for it, the cost the proxy now adds in line;
- `stop`: stopping the supervisor at an orderly end.

And for scale, `agent-harness proxy` from exec to its answer to `initialize` (the whole
start-up a client waits for, supervisor included).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness.wire.supervisor import GroupSupervisor

HERE = Path(__file__).resolve().parent
UPSTREAM = HERE / "fast_upstream.py"
AGENT_HARNESS = Path(sys.executable).parent / "agent-harness"


async def one_start() -> tuple[float, float, float]:
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(UPSTREAM), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    t1 = time.perf_counter()
    supervisor = await GroupSupervisor.start(proc.pid)
    t2 = time.perf_counter()
    assert supervisor is not None
    await supervisor.stop()
    t3 = time.perf_counter()
    proc.kill()
    await proc.wait()
    return (t1 - t0) * 1000, (t2 - t1) * 1000, (t3 - t2) * 1000


def proxy_to_initialize() -> float:
    argv = [str(AGENT_HARNESS), "proxy", "--upstream-command", sys.executable,
            "--upstream-arg", str(UPSTREAM), "--audit-tools", "off", "--no-report-file"]
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "bench", "version": "0"}}}
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(init).encode() + b"\n")
    proc.stdin.flush()
    proc.stdout.readline()
    elapsed = (time.perf_counter() - t0) * 1000
    proc.stdin.close()
    proc.wait(timeout=30)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    runs = parser.parse_args().runs
    load = os.getloadavg()[0]
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, load {load:.1f} at start; {runs} runs")
    samples = [asyncio.run(one_start()) for _ in range(runs)]
    for i, name in enumerate(("upstream", "supervisor", "stop")):
        values = sorted(s[i] for s in samples)
        print(f"{name:>10}: median {statistics.median(values):.2f} ms, "
              f"90th percentile {values[int(len(values) * 0.9) - 1]:.2f} ms")
    whole = sorted(proxy_to_initialize() for _ in range(max(runs // 5, 3)))
    print(f"proxy exec to initialize answered: median {statistics.median(whole):.0f} ms")


if __name__ == "__main__":
    main()

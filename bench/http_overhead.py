"""Benchmark (SPEC N1, H1): latency the proxy adds per call over streamable HTTP, beside stdio.

    .venv/bin/python bench/http_overhead.py              # 5,000 writes per path and pair
    .venv/bin/python bench/http_overhead.py --calls 1000

A benchmark script, not a test: it prints a table. Like bench/proxy_overhead.py: two copies of
the minimal upstream (bench/fast_upstream.py, over stdio or over HTTP with plain JSON answers)
run side by side, one spoken to directly, one through the installed `agent-harness proxy
--audit-tools off`; a raw client (blocking, no SDK) sends distinct `create_booking` writes,
alternating which path goes first, and `added` is the per-pair difference. Four pairs of
agent side and upstream side:

- stdio - stdio: the proxy as before (direct: stdio to the upstream);
- HTTP - HTTP: `--listen` and `--upstream-url` (direct: HTTP to the upstream);
- stdio - HTTP: `--upstream-url` (direct: HTTP to the upstream);
- HTTP - stdio: `--listen` and `--upstream-command` (direct: stdio to the upstream, so
  `added` includes the HTTP hop itself, which a stdio upstream cannot be spoken to without).

Medians over calls 1-100 and over the last 1,000 calls. No report file (N1's first target).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from proxy_overhead import AGENT_HARNESS, UPSTREAM, WARMUP_READS, Endpoint, Samples  # noqa: E402

INIT = {"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"}}  # fmt: skip
_URL = re.compile(rb"listening on (http://\S+)")


def _listening(argv: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    """Start a process that prints 'listening on URL' on stderr; the process and the URL."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stderr is not None
    while line := proc.stderr.readline():
        if found := _URL.search(line):
            # Keep reading stderr in the background so the process never blocks on it.
            subprocess.Popen(["cat"], stdin=proc.stderr, stdout=subprocess.DEVNULL)
            return proc, found.group(1).decode()
    raise RuntimeError(f"{argv[0]} ended without listening")


class HttpEndpoint:
    """A streamable HTTP MCP endpoint spoken to with one keep-alive connection."""

    def __init__(self, argv: list[str], name: str) -> None:
        self.name = name
        self.proc, url = _listening(argv)
        parts = urlsplit(url)
        self.path = parts.path
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        self.headers = {"Content-Type": "application/json",
                        "Accept": "application/json, text/event-stream"}  # fmt: skip
        self._next = 0

    def _post(self, body: dict) -> tuple[http.client.HTTPResponse, bytes]:
        self.conn.request("POST", self.path, json.dumps(body), self.headers)
        resp = self.conn.getresponse()
        return resp, resp.read()

    def request(self, method: str, params: dict) -> tuple[dict, int]:
        """Send one request; the answer and the round trip in nanoseconds."""
        self._next += 1
        body = {"jsonrpc": "2.0", "id": self._next, "method": method, "params": params}
        start = time.perf_counter_ns()
        resp, data = self._post(body)
        took = time.perf_counter_ns() - start
        if resp.getheader("Content-Type", "").startswith("text/event-stream"):
            data = next(line[6:] for line in data.splitlines() if line.startswith(b"data: {"))
        return json.loads(data), took

    def handshake(self) -> None:
        resp, _ = self._post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT})
        if session := resp.getheader("Mcp-Session-Id"):
            self.headers["Mcp-Session-Id"] = session
        self.headers["MCP-Protocol-Version"] = INIT["protocolVersion"]
        self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.request("tools/list", {})

    def close(self) -> None:
        self.conn.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def endpoints(pair: str) -> tuple[object, object]:
    """(direct, proxied) for an agent side - upstream side pair."""
    stdio_up = [sys.executable, str(UPSTREAM)]
    http_up = [sys.executable, str(UPSTREAM), "--http", "127.0.0.1:0"]
    proxy = [str(AGENT_HARNESS), "proxy", "--audit-tools", "off", "--no-report-file"]
    agent, upstream = pair.split("-")
    if upstream == "http":
        direct: object = HttpEndpoint(http_up, "direct HTTP upstream")
        behind, url = _listening(http_up)
        proxy += ["--upstream-url", url]
    else:
        direct = Endpoint(stdio_up, "direct stdio upstream")
        behind = None
        proxy += ["--upstream-command", sys.executable, "--upstream-arg", str(UPSTREAM)]
    if agent == "http":
        proxied: object = HttpEndpoint([*proxy, "--listen", "127.0.0.1:0"], "proxy")
    else:
        proxied = Endpoint(proxy, "proxy")
    proxied.behind = behind  # type: ignore[attr-defined]
    return direct, proxied


def run_pair(pair: str, calls: int) -> tuple[Samples, float]:
    direct, proxied = endpoints(pair)
    samples = Samples()
    started = time.perf_counter()
    try:
        for endpoint in (direct, proxied):
            endpoint.handshake()  # type: ignore[attr-defined]
        for i in range(WARMUP_READS):
            for endpoint in (direct, proxied):
                endpoint.request("tools/call", {"name": "search_bookings",  # type: ignore[attr-defined]
                                                "arguments": {"guest": f"w{i}"}})
        for i in range(calls):
            arguments = {"guest": f"guest-{i}", "date": "2026-12-01", "nights": i % 7 + 1}
            params = {"name": "create_booking", "arguments": arguments}
            for endpoint in (direct, proxied) if i % 2 == 0 else (proxied, direct):
                answer, took = endpoint.request("tools/call", params)  # type: ignore[attr-defined]
                if "result" not in answer or answer["result"].get("isError"):
                    raise RuntimeError(f"{pair}: an error answer: {answer}")
                (samples.direct if endpoint is direct else samples.proxied).append(took)
    finally:
        for endpoint in (direct, proxied):
            endpoint.close()  # type: ignore[attr-defined]
        behind = getattr(proxied, "behind", None)
        if behind is not None:
            behind.terminate()
            behind.wait()
    return samples, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5_000, help="writes per path and pair")
    parser.add_argument("--pairs", default="stdio-stdio,http-http,stdio-http,http-stdio")
    args = parser.parse_args()
    if not AGENT_HARNESS.exists():
        sys.exit(f"{AGENT_HARNESS} not found: install the project first (make setup)")
    print(f"HTTP proxy overhead, {platform.python_implementation()} {platform.python_version()}, "
          f"{platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; "
          f"upstream: bench/fast_upstream.py")  # fmt: skip
    print(f"{'agent-upstream':<15} {'window':>13} {'direct ms':>10} {'via proxy ms':>13} "
          f"{'added ms':>9} {'p90 added':>10}")  # fmt: skip
    ends = sorted({min(100, args.calls), args.calls})
    for pair in args.pairs.split(","):
        samples, wall = run_pair(pair, args.calls)
        for end in ends:
            first = 1 if end <= 1000 else end - 1000 + 1
            d, p, added, p90 = samples.window(end)
            print(f"{pair:<15} {f'{first:,}-{end:,}':>13} {d:>10.3f} {p:>13.3f} "
                  f"{added:>9.3f} {p90:>10.3f}")  # fmt: skip
        print(f"{'':<15} ({args.calls:,} writes per path in {wall:.0f} s)")
    print("Target (N1): added < 1 ms per call without a report file.")


if __name__ == "__main__":
    main()

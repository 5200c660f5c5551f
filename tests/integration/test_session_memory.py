"""Memory of a judged session as it grows (issue 24, N1): measured, never timed.

A fresh Python process runs one Session the way the proxy with a report file does (per
write: the call, the report's pieces, the upstream's answer, the answer, the report's pieces
again) and prints its peak resident set size (VmHWM from /proc) before and after. Two lengths, 2,000
and 6,000 distinct writes: what the session keeps per write is their difference over 4,000.

Measured on the development machine (2 cores, load 10-13 from other work): peak growth 1.0 MB
at 2,000 writes and 4.1-4.4 MB at 6,000 (2.3-2.4 and 5.4-5.6 MB with __pycache__ warm, as in
`make test`: stop 30, Intel host), 0.77-0.81 KB per write, since the judge packs each
settled operation into bytes (every attempt answered and certain, no key, no spelling pair, not
a J9/J10 candidate) and keeps no report bytes of its own, and the report's settled chunks are
kept as their joined bytes alone (issue 24); 1.42 KB before the packing, 1.97 KB before the
judge stopped keeping report bytes, 3.1 KB before the operations kept their arguments, entry and observations as JSON bytes,
4.3 KB before operations gave their J9/J10 folded values back. The session still keeps each
operation's report bytes (operations[] shows every operation, O1), its packed state and its id
(a repeat may come at any time, K2), so the growth is bounded per write, not flat.

The verdict line a proxy says at its end (Q3) is measured in process with tracemalloc: the
heap's peak while it is said, 3 KB after 300 writes and after 3,000 alike; 0.96 and 7.5-10 MB
when it built the whole report to read three fields from it.
"""

from __future__ import annotations

import subprocess
import sys
import tracemalloc

import pytest

PER_WRITE_KB = 0.95  # measured 0.77-0.81 KB: a 17 % margin (1.42 KB without packing fails it)
# At 6,000 writes, over the session's start: 5.4-5.6 MB measured with the sources compiled
# beforehand, as `make test` does (compileall); 4.0-4.4 MB when the process compiles them
# itself, whose freed memory the session then reuses. 5.5 was set on the latter and failed
# one fresh-clone CI with 5.57 (stop 30); the per-write bound below is the one that pins
# what a write keeps.
PEAK_GROWTH_MB = 6.5

SCRIPT = r"""
import re, sys
from pathlib import Path
from harness.benchmark.simulate import BOOKING_TOOLS
from harness.session import Session

def peak_mb():
    status = Path("/proc/self/status").read_text()
    return int(re.search(r"^VmHWM:\s+(\d+) kB", status, re.M).group(1)) / 1024

session = Session()
session.tools_listed(BOOKING_TOOLS)
start = peak_mb()
for i in range(int(sys.argv[1])):
    arguments = {"guest": f"guest-{i}", "date": "2026-12-01", "nights": i % 7 + 1}
    ticket = session.begin_call("create_booking", arguments, rpc_id=i)
    session.report_file_pieces("running")
    result = {"content": [{"type": "text", "text": f"booked {i}"}],
              "structuredContent": {"id": f"b{i}"}}
    session.upstream_result(ticket, result)
    session.answered(ticket, is_error=False)
    session.report_file_pieces("running")
session.end("done")
print(start, peak_mb())
"""


def _peak_growth_mb(writes: int) -> float:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(writes)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    start, peak = (float(x) for x in out.split())
    return peak - start


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_n1_session_memory_grows_by_a_bounded_amount_per_write():
    short, long = _peak_growth_mb(2_000), _peak_growth_mb(6_000)
    per_write_kb = (long - short) * 1024 / 4_000
    assert long < PEAK_GROWTH_MB, f"peak grew {long:.1f} MB over 6,000 writes"
    assert per_write_kb < PER_WRITE_KB, f"{per_write_kb:.2f} KB kept per write"


def _verdict_line_peak_kb(writes: int, report_file: str) -> float:
    """The heap's peak (tracemalloc, KB) while a proxy started from flags says its verdict line
    after a session of `writes` distinct writes, its report file's last pieces just taken."""
    from harness.benchmark.simulate import BOOKING_TOOLS
    from harness.proxy.args import ProxyConfig
    from harness.proxy.main import _said
    from harness.session import Session

    session = Session()
    session.tools_listed(BOOKING_TOOLS)
    for i in range(writes):
        arguments = {"guest": f"guest-{i}", "date": "2026-12-01", "nights": i % 7 + 1}
        ticket = session.begin_call("create_booking", arguments, rpc_id=i)
        session.upstream_result(ticket, {"content": [{"type": "text", "text": f"booked {i}"}]})
        session.answered(ticket, is_error=False)
    session.end("done")
    session.report_file_pieces("finished")  # the report file's last write, as at the proxy's end
    tracemalloc.start()
    try:
        assert _said(0, session, ProxyConfig(report_file=report_file)) == 0
        return tracemalloc.get_traced_memory()[1] / 1024
    finally:
        tracemalloc.stop()


def test_n1_q3_the_verdict_line_at_the_end_costs_no_more_for_a_longer_session(tmp_path, capsys):
    # N1, Q3: the verdict line reads the verdict and score the report text keeps; building the
    # whole report for it (every operation unpacked and derived) took the proxy of a 50,000-write
    # session from 93 to 214 MB at its end. Counted in bytes allocated, never timed.
    report = str(tmp_path / "report.json")
    short, long = _verdict_line_peak_kb(300, report), _verdict_line_peak_kb(3_000, report)
    said = capsys.readouterr().err.splitlines()
    assert said[-1].startswith("[agent-harness] verdict: PASS") and said[-1].endswith(
        f"report: {report}"
    )
    assert long < short + 64, f"{short:.0f} KB at 300 writes, {long:.0f} KB at 3,000"

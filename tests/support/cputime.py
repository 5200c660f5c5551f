"""CPU per test, for finding what makes `make test` slow on 2 cores (not loaded by default).

    TEST_CPU_DIR=/tmp/cpu .venv/bin/pytest -p tests.support.cputime ...
    .venv/bin/python -m tests.support.cputime /tmp/cpu      # per file, most CPU first

Per test (setup + call + teardown, so a module fixture counts on the test that built it) it
writes one JSON line: wall seconds, the CPU of the worker itself and of the children it waited
for (resource.getrusage SELF and CHILDREN deltas), and the `agent-harness` subprocesses the
test started (argv[1]: run, sweep, proxy, ...) and its outcome. A child that is never waited for (a daemon
left running) is not counted; everything a test starts here is waited for by its fixtures.
A command the warm launcher ran (tests/support/launcher.py) is a child of the fork server, not
of the worker: its CPU, as the server relays it, counts under "launched" and its name under
"started" with " (warm)" after it; the server's own imports are not counted (once per worker).
"""

from __future__ import annotations

import collections
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

_started: list[str] = []
_OUTCOME = pytest.StashKey[str]()


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def _command(args: object) -> str:
    """A short name for a process: 'agent-harness run', 'python -m harness', 'node', ..."""
    argv = [str(a) for a in args] if isinstance(args, (list, tuple)) else [str(args)]
    name = os.path.basename(argv[0]) if argv else "?"
    if name == "agent-harness":
        return f"agent-harness {argv[1] if len(argv) > 1 else ''}".strip()
    if name.startswith("python"):
        if len(argv) > 2 and argv[1] == "-m":
            return f"python -m {argv[2]}"
        return f"python {os.path.basename(argv[1]) if len(argv) > 1 else ''}".strip()
    return name


def _launched() -> list[float]:
    """The CPU of every command the warm launcher ran in this worker (appended as they end)."""
    launcher = sys.modules.get("tests.support.launcher")
    return launcher.LAUNCHED_CPU if launcher is not None else []


def started_warm(args: object) -> None:
    """Called by the launcher for a command it runs from its fork server."""
    _started.append(_command(args) + " (warm)")


_execute_child = subprocess.Popen._execute_child  # type: ignore[attr-defined]


def _counting_execute_child(self, args, *rest, **kw):  # type: ignore[no-untyped-def]
    _started.append(_command(args))
    return _execute_child(self, args, *rest, **kw)


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("TEST_CPU_DIR"):
        subprocess.Popen._execute_child = _counting_execute_child  # type: ignore[attr-defined]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # type: ignore[no-untyped-def]
    report = (yield).get_result()
    if report.failed or (report.skipped and call.when != "teardown"):
        item.stash[_OUTCOME] = report.outcome


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):  # type: ignore[no-untyped-def]
    out = os.environ.get("TEST_CPU_DIR")
    if not out:
        yield
        return
    _started.clear()
    launched = _launched()
    wall0, (own0, kids0), warm0 = time.monotonic(), _cpu(), len(launched)
    yield
    wall1, (own1, kids1) = time.monotonic(), _cpu()
    warm_cpu = round(sum(launched[warm0:]), 3)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    record = {
        "nodeid": item.nodeid,
        "file": item.nodeid.split("::")[0],
        "wall": round(wall1 - wall0, 3),
        "self": round(own1 - own0, 3),
        "children": round(kids1 - kids0, 3),
        "launched": warm_cpu,
        "started": dict(collections.Counter(_started)),
        "worker": worker,
        "outcome": item.stash.get(_OUTCOME, "passed"),
    }
    Path(out).mkdir(parents=True, exist_ok=True)
    with open(Path(out) / f"{worker}.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def summary(folder: Path, top: int = 15) -> str:
    """Per file, most CPU first: CPU (worker + children), wall, tests, commands started."""
    files: dict[str, dict] = {}
    started: collections.Counter[str] = collections.Counter()
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            f = files.setdefault(r["file"], {"cpu": 0.0, "wall": 0.0, "tests": 0, "cmds": 0})
            f["cpu"] += r["self"] + r["children"] + r.get("launched", 0.0)
            f["wall"] += r["wall"]
            f["tests"] += 1
            f["cmds"] += sum(n for c, n in r["started"].items() if c.startswith("agent-harness"))
            started.update(r["started"])
    total_cpu = sum(f["cpu"] for f in files.values())
    total_wall = sum(f["wall"] for f in files.values())
    rows = sorted(files.items(), key=lambda kv: -kv[1]["cpu"])
    lines = [
        f"{len(files)} files, CPU {total_cpu:.0f} s, wall (summed over workers) {total_wall:.0f} s",
        "| file | CPU s | wall s | tests | agent-harness processes |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, f in rows[:top]:
        lines.append(f"| {name} | {f['cpu']:.1f} | {f['wall']:.1f} | {f['tests']} | {f['cmds']} |")
    lines.append("")
    lines.append("started: " + ", ".join(f"{c} x{n}" for c, n in started.most_common()))
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 15))

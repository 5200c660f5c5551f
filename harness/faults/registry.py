"""The registry: every fault by name, and what places that name faults read from it.

Flags and --help (harness.proxy.args), the event log's names (harness.events), spec
validation (runner.spec), the plan, the judge, the demo, the benchmark and the docs' fault
table all read `FAULTS`, so adding a fault means adding its class (one module of this
package) and listing it here.
"""

from __future__ import annotations

from harness.faults.base import Fault, Param
from harness.faults.chaos import ChaosError
from harness.faults.f1_ghost_timeout import GhostTimeout
from harness.faults.f2_rate_limited import RateLimited
from harness.faults.f3_truncated_json import TruncatedJson
from harness.faults.f4_pass_through import PassThrough
from harness.faults.f5_server_error import ServerError
from harness.faults.f6_stream_cut import StreamCut
from harness.faults.f7_session_expired import SessionExpired
from harness.faults.f8_unavailable import Unavailable
from harness.faults.f9_added_latency import AddedLatency

# The registry: every fault by name, in the order tables show them.
FAULTS: dict[str, type[Fault]] = {
    f.name: f for f in (GhostTimeout, RateLimited, TruncatedJson, PassThrough, ServerError,
                        StreamCut, SessionExpired, Unavailable, AddedLatency, ChaosError)
}  # fmt: skip
SCENARIOS = tuple(name for name, f in FAULTS.items() if f.scenario)
# Every parameter once, in the order the faults declare them (F2 and F8 share retry_after).
PARAMS: tuple[Param, ...] = tuple({p.field: p for f in FAULTS.values() for p in f.params}.values())
INJECTING = frozenset(name for name, f in FAULTS.items() if f.injects)
GHOSTS = frozenset(name for name, f in FAULTS.items() if f.ghost)
RETRY_WINDOWS = frozenset(name for name, f in FAULTS.items() if f.retry_window)
REPEATED = frozenset(name for name, f in FAULTS.items() if f.writes > 1)
HTTP_ONLY = frozenset(name for name, f in FAULTS.items() if f.http_only)
ANY_TRANSPORT = tuple(name for name in SCENARIOS if name not in HTTP_ONLY)  # stdio agents too
SIMULATED = tuple(name for name in SCENARIOS if FAULTS[name].simulated)  # demo and benchmark


def users_of(param: Param) -> tuple[str, ...]:
    """The scenarios that take `param`."""
    return tuple(name for name in SCENARIOS if param in FAULTS[name].params)


def scenario_help() -> str:
    """The scenarios for --help: `F1 timeout after ..., F2 429 ...`."""
    return ", ".join(f"{name} {FAULTS[name].brief}" for name in SCENARIOS)


def scenario_range() -> str:
    """`F1..F5`: the scenario names as a metavar."""
    return f"{SCENARIOS[0]}..{SCENARIOS[-1]}"

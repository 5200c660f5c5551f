"""The registry: every fault by name, and what places that name faults read from it.

Flags and --help (harness.proxy.args), the event log's names (harness.events), spec
validation (runner.experiment), the plan, the judge, the demo, the benchmark and the docs' fault
table all read `FAULTS`, so adding a fault means adding its class (one module of this
package) and listing it here, or, for a fault that lives elsewhere (a plug-in, a test's
scratch fault), calling `register()` before the rest of the harness is imported.
"""

from __future__ import annotations

import sys

from harness.base.errors import ConfigError
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

# What follows from the registry; `_derive()` sets it again when a fault is registered.
SCENARIOS: tuple[str, ...] = ()  # chosen with --scenario (chaos is a mode of its own)
PARAMS: tuple[Param, ...] = ()  # every parameter once (F2 and F8 share retry_after)
INJECTING: frozenset[str] = frozenset()
GHOSTS: frozenset[str] = frozenset()
RETRY_WINDOWS: frozenset[str] = frozenset()
REPEATED: frozenset[str] = frozenset()
HTTP_ONLY: frozenset[str] = frozenset()
ANY_TRANSPORT: tuple[str, ...] = ()  # stdio agents too
SIMULATED: tuple[str, ...] = ()  # the demo and the benchmark play these
DERIVED = ("SCENARIOS", "PARAMS", "INJECTING", "GHOSTS", "RETRY_WINDOWS", "REPEATED",
           "HTTP_ONLY", "ANY_TRANSPORT", "SIMULATED")  # fmt: skip


def _derive() -> None:
    global SCENARIOS, PARAMS, INJECTING, GHOSTS, RETRY_WINDOWS, REPEATED, HTTP_ONLY
    global ANY_TRANSPORT, SIMULATED
    SCENARIOS = tuple(name for name, f in FAULTS.items() if f.scenario)
    PARAMS = tuple({p.field: p for f in FAULTS.values() for p in f.params}.values())
    INJECTING = frozenset(name for name, f in FAULTS.items() if f.injects)
    GHOSTS = frozenset(name for name, f in FAULTS.items() if f.ghost)
    RETRY_WINDOWS = frozenset(name for name, f in FAULTS.items() if f.retry_window)
    REPEATED = frozenset(name for name, f in FAULTS.items() if f.writes > 1)
    HTTP_ONLY = frozenset(name for name, f in FAULTS.items() if f.http_only)
    ANY_TRANSPORT = tuple(name for name in SCENARIOS if name not in HTTP_ONLY)
    SIMULATED = tuple(name for name in SCENARIOS if FAULTS[name].simulated)


_derive()


def register(kind: type[Fault]) -> None:
    """Add a fault (a subclass of Fault, in a module of its own) to the registry, after the
    built-in ones: flags, --help, the event log's names, spec validation, the plan, the judge,
    the demo, the benchmark and the docs' table then know it.

    Those read the registry when they are imported, so register before importing any other
    part of the harness (the faults and `harness.base` aside); ConfigError otherwise, or when
    the name is taken. A fault with a parameter of its own needs its field in PlanConfig and
    in the event log's SessionStarted as well.
    """
    read = sorted(
        name for name in sys.modules
        if name.startswith("harness.") and not name.startswith(("harness.faults", "harness.base"))
    )  # fmt: skip
    if read:
        raise ConfigError(
            f"register fault {kind.name} before importing the rest of the harness: {read[0]} "
            "has read the fault registry already"
        )
    if kind.name in FAULTS:
        raise ConfigError(f"a fault named {kind.name} is registered already")
    FAULTS[kind.name] = kind
    _derive()


def users_of(param: Param) -> tuple[str, ...]:
    """The scenarios that take `param`."""
    return tuple(name for name in SCENARIOS if param in FAULTS[name].params)


def scenario_help() -> str:
    """The scenarios for --help: `F1 timeout after ..., F2 429 ...`."""
    return ", ".join(f"{name} {FAULTS[name].brief}" for name in SCENARIOS)


def scenario_range() -> str:
    """`F1..F5`: the scenario names as a metavar."""
    return f"{SCENARIOS[0]}..{SCENARIOS[-1]}"

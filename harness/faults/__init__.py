"""The faults F1-F9 and chaos (S1-S11, H2): one class per fault, one module each, and the
registry every place that names faults reads.

Each fault is one class: its name, its one-line summary (for --help, the demo and the docs),
its parameters (`Param`: flag, spec key, type, bounds, default, help) and its behaviour (does
the call run upstream first, is it applied only once the upstream executed it, does the harness
inject an answer, is the answer a ghost write's, is the real answer held back, does it open a
retry window, how many writes it takes). `FAULTS` (harness.faults.registry) lists them; flags,
help, spec validation, the plan, the events' names and the judge read from it, so adding a
fault touches its class and its tests.

    base        Fault, HttpFault, Param
    f1_... f9_..., chaos     one module per fault
    registry    FAULTS, the sets derived from it, and register() for a fault from elsewhere
    plan        PlanConfig (the fault flags) and FaultPlan (which call gets which fault)
    table       the docs' fault table
"""

from harness.faults import registry
from harness.faults.base import (
    MAX_LATENCY_MS,
    MAX_RETRY_AFTER_S,
    RETRY_AFTER,
    SESSION_REVISIONS,
    Fault,
    HttpFault,
    Param,
    Wire,
)
from harness.faults.chaos import ChaosError
from harness.faults.f1_ghost_timeout import GhostTimeout
from harness.faults.f2_rate_limited import RateLimited
from harness.faults.f3_truncated_json import TruncatedJson
from harness.faults.f4_pass_through import PassThrough
from harness.faults.f5_server_error import ServerError
from harness.faults.f6_stream_cut import StreamCut
from harness.faults.f7_session_expired import SessionExpired
from harness.faults.f8_unavailable import Unavailable
from harness.faults.f9_added_latency import LATENCY, AddedLatency
from harness.faults.plan import FaultPlan, PlanConfig, error_rate_problem
from harness.faults.registry import FAULTS, register, scenario_help, scenario_range, users_of
from harness.faults.table import fault_table_markdown

__all__ = [
    "ANY_TRANSPORT",
    "FAULTS",
    "GHOSTS",
    "HTTP_ONLY",
    "INJECTING",
    "LATENCY",
    "MAX_LATENCY_MS",
    "MAX_RETRY_AFTER_S",
    "PARAMS",
    "REPEATED",
    "RETRY_AFTER",
    "RETRY_WINDOWS",
    "SCENARIOS",
    "SESSION_REVISIONS",
    "SIMULATED",
    "AddedLatency",
    "ChaosError",
    "Fault",
    "FaultPlan",
    "GhostTimeout",
    "HttpFault",
    "Param",
    "PassThrough",
    "PlanConfig",
    "RateLimited",
    "ServerError",
    "SessionExpired",
    "StreamCut",
    "TruncatedJson",
    "Unavailable",
    "Wire",
    "error_rate_problem",
    "fault_table_markdown",
    "scenario_help",
    "scenario_range",
    "register",
    "users_of",
]


def __getattr__(name: str) -> object:
    """The sets that follow from the registry (SCENARIOS, PARAMS, INJECTING, ...), as they are
    now: `register()` may have added a fault since this module was imported."""
    if name in registry.DERIVED:
        return getattr(registry, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

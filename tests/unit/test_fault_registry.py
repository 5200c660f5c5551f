"""One fault registry (H2): every place that names faults reads them from `harness.faults.FAULTS`.

Adding a fault then means adding its class (and its tests): flags, help, the demo, the events'
names, spec validation and the judge follow.
"""

from __future__ import annotations

from typing import get_args

import pytest
from pydantic import ValidationError

from harness.base.errors import UsageError
from harness.demo.tools import SCENARIO_TABLE, TOOLS
from harness.events import FaultApplied, SessionStarted
from harness.faults import (
    FAULTS,
    GHOSTS,
    HTTP_ONLY,
    INJECTING,
    LATENCY,
    PARAMS,
    RETRY_AFTER,
    RETRY_WINDOWS,
    SCENARIOS,
    SIMULATED,
    AddedLatency,
    FaultPlan,
    PlanConfig,
    users_of,
)
from harness.proxy.args import help_text, parse
from runner.experiment import load_spec
from runner.experiment._environment import Scenario, ScenarioKind


def test_h2_every_fault_is_one_class_with_its_words_and_behaviour() -> None:
    for name, kind in FAULTS.items():
        assert kind.name == name
        assert kind.brief and kind.summary.endswith(".") and kind.duplicate_when
        assert kind.executes_upstream or kind.injects  # a fault that does nothing is no fault
    assert SCENARIOS == ("F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8", "F9")
    assert GHOSTS == {"F1", "F6"} and RETRY_WINDOWS == {"F2", "F8"} and "F4" not in INJECTING
    assert HTTP_ONLY == {"F6", "F7", "F8"}
    assert SIMULATED == ("F1", "F2", "F3", "F4", "F5")  # the demo and the benchmark play these


def test_h2_f9_is_a_real_execution_whose_real_answer_is_held() -> None:  # H2 J11
    # It runs upstream, only once the upstream executed it (S7); it is no ghost (the agent gets
    # the real answer) and answers nothing of its own, but it is a fault (not a baseline).
    f9 = FAULTS["F9"]
    assert f9.executes_upstream and f9.after_execution and not f9.ghost and f9.injects
    assert f9 in (AddedLatency,) and f9.params == (LATENCY,) and not f9.http_only
    fault = AddedLatency(latency_ms=1500)
    assert fault.answer() is None and fault.hold_ms() == 1500 and fault.values() == {
        "latency_ms": 1500
    }
    assert all(FAULTS[name]().hold_ms() == 0 for name in SCENARIOS if name != "F9")


def test_h2_each_parameter_is_declared_once_with_its_flag_bounds_and_users() -> None:
    assert PARAMS == (RETRY_AFTER, LATENCY)
    assert users_of(RETRY_AFTER) == ("F2", "F8") and users_of(LATENCY) == ("F9",)
    assert LATENCY.problem(0) == "--latency must be at least 1 and at most 600000 milliseconds, got 0"
    assert LATENCY.problem(1.5) == "--latency must be a whole number of milliseconds, got 1.5"
    assert RETRY_AFTER.problem(float("nan")) is not None and RETRY_AFTER.problem(0.5) is None
    with pytest.raises(UsageError, match="--latency must be at least 1"):
        PlanConfig(scenario="F9", latency_ms=0)
    assert FaultPlan(PlanConfig(scenario="F9", latency_ms=7)).decide(1, "write", True) == (
        AddedLatency(latency_ms=7)
    )
    assert FaultPlan(PlanConfig(scenario="F8", retry_after_s=3)).decide(1, "write", True) == (
        FAULTS["F8"](retry_after_s=3)
    )


def test_h2_help_flags_and_demo_read_the_registry() -> None:
    text = help_text()
    for name in SCENARIOS:
        assert f"{name} {FAULTS[name].brief}" in text
        argv = ["--upstream-command", "x", "--scenario", name.lower()]
        argv += ["--listen", "127.0.0.1:0"] if name in HTTP_ONLY else []
        assert parse(argv).config.plan.scenario == name
    demo = [name for name, f in FAULTS.items() if f.simulated]  # stdio, answers at once
    assert "F9" not in demo and "chaos" in demo
    for param in PARAMS:  # each parameter's flag, with the scenarios that take it
        assert f"  {param.flag} {param.metavar}\n      With --scenario {'/'.join(users_of(param))}" in text
    assert [row[0] for row in SCENARIO_TABLE] == demo
    assert TOOLS["start_session"][1]["properties"]["scenario"]["enum"] == [*demo, "none"]


def test_h2_events_and_spec_accept_exactly_the_registry_names() -> None:
    for name in FAULTS:
        FaultApplied(t_ns=0, seq=1, fault=name, executes_upstream=False)
    with pytest.raises(ValidationError):
        FaultApplied(t_ns=0, seq=1, fault="F10", executes_upstream=False)
    for name in SCENARIOS:
        SessionStarted(t_ns=0, harness_version="x", scenario=name)
        assert Scenario.model_validate(name).kind == name
    assert get_args(ScenarioKind) == ("none", *SCENARIOS, "chaos")


@pytest.mark.parametrize("name", SCENARIOS)
def test_h2_the_plan_applies_each_scenario_as_its_class_says(name: str) -> None:
    plan = FaultPlan(PlanConfig(scenario=name))
    kind = FAULTS[name]
    faults = [plan.decide(seq, "write", listed=True) for seq in range(1, 4)]
    if kind.after_execution:  # waits for the upstream's answer before it is used up
        assert faults[1:] == [None, None]  # S8: the writes meanwhile are not the first
        assert plan.upstream_answered(1, executed=True)
    applied = [f for f in faults if f is not None]
    assert [type(f) for f in applied] == [kind] * kind.writes
    assert all(f.executes_upstream == kind.executes_upstream for f in applied)


def test_h2_a_spec_with_an_http_only_fault_needs_an_http_agent(tmp_path) -> None:
    from tests.support.specs import load_error, plan_as_flags, spec_text, write

    stdio = write(tmp_path, spec_text(scenarios="\n  - F1\n  - F7"))
    assert "scenarios[1]: F7 exists only over HTTP: set proxy.agent: http" in load_error(stdio)
    http = write(tmp_path, spec_text(scenarios="\n  - F7", proxy="\n  agent: http"), "http.yaml")
    handed, flagged = plan_as_flags(load_spec(http), tmp_path, "F7", ("--scenario", "F7"))
    assert handed == flagged


def test_h2_x11_only_f7_needs_a_session_and_the_plan_spends_it_where_it_cannot_apply() -> None:
    assert {name for name, kind in FAULTS.items() if kind.needs_session} == {"F7"}
    f7 = FAULTS["F7"]()
    assert f7.inapplicable(None) is None  # an agent with a session (2025-06-18, 2025-11-25)
    assert f7.inapplicable("2026-07-28") == (
        "F7 needs a session (protocol revisions 2025-06-18, 2025-11-25); the agent speaks "
        "2026-07-28, which has none"
    )
    assert FAULTS["F1"]().inapplicable("2026-07-28") is None
    plan = FaultPlan(PlanConfig(scenario="F7"))
    assert plan.decide(1, "write", True) is not None
    plan.not_applied(1)
    assert plan.decide(2, "write", True) is None  # one fault per run: not moved to a later call

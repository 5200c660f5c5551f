"""One fault registry (H2): every place that names faults reads them from `harness.faults.FAULTS`.

Adding a fault then means adding its class (and its tests): flags, help, the demo, the events'
names, spec validation and the judge follow.
"""

from __future__ import annotations

from typing import get_args

import pytest
from pydantic import ValidationError

from harness.demo.tools import SCENARIO_TABLE, TOOLS
from harness.events import FaultApplied, SessionStarted
from harness.faults import (
    FAULTS,
    GHOSTS,
    INJECTING,
    RETRY_WINDOWS,
    SCENARIOS,
    FaultPlan,
    PlanConfig,
)
from harness.proxy.args import help_text, parse
from runner.spec._environment import Scenario, ScenarioKind


def test_h2_every_fault_is_one_class_with_its_words_and_behaviour() -> None:
    for name, kind in FAULTS.items():
        assert kind.name == name
        assert kind.brief and kind.summary.endswith(".") and kind.duplicate_when
        assert kind.executes_upstream or kind.injects  # a fault that does nothing is no fault
    assert SCENARIOS == ("F1", "F2", "F3", "F4", "F5")
    assert GHOSTS == {"F1"} and RETRY_WINDOWS == {"F2"} and "F4" not in INJECTING


def test_h2_help_flags_and_demo_read_the_registry() -> None:
    text = help_text()
    for name in SCENARIOS:
        assert f"{name} {FAULTS[name].brief}" in text
        assert parse(["--upstream-command", "x", "--scenario", name.lower()]).config.plan.scenario == name
    assert [row[0] for row in SCENARIO_TABLE] == list(FAULTS)
    assert TOOLS["start_session"][1]["properties"]["scenario"]["enum"] == [*FAULTS, "none"]


def test_h2_events_and_spec_accept_exactly_the_registry_names() -> None:
    for name in FAULTS:
        FaultApplied(t_ns=0, seq=1, fault=name, executes_upstream=False)
    with pytest.raises(ValidationError):
        FaultApplied(t_ns=0, seq=1, fault="F9", executes_upstream=False)
    for name in SCENARIOS:
        SessionStarted(t_ns=0, harness_version="x", scenario=name)
        assert Scenario.model_validate(name).proxy_args()[:2] == ("--scenario", name)
    assert get_args(ScenarioKind) == ("none", *SCENARIOS, "chaos")


@pytest.mark.parametrize("name", SCENARIOS)
def test_h2_the_plan_applies_each_scenario_as_its_class_says(name: str) -> None:
    plan = FaultPlan(PlanConfig(scenario=name))
    kind = FAULTS[name]
    faults = [plan.decide(seq, "write", listed=True) for seq in range(1, 4)]
    if kind.ghost:  # waits for the upstream's answer before it is used up
        assert plan.upstream_answered(1, executed=True)
    applied = [f for f in faults if f is not None]
    assert [type(f) for f in applied] == [kind] * kind.writes
    assert all(f.executes_upstream == kind.executes_upstream for f in applied)

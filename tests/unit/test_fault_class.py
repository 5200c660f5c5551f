"""A fault is one class (H2, B1): what it does on the wire, its hold, and the verdicts the
self-test's reference agents must get under it live on the class; the rest reads them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import ClassVar

import pytest

from harness.base.errors import ConfigError
from harness.benchmark import CAREFUL, NAIVE, main
from harness.benchmark.agents import ReferenceAgent, play_careful
from harness.faults import FAULTS, SIMULATED, AddedLatency, Fault, Wire, register

WIRES = {
    "F1": Wire.REPLACES, "F2": Wire.ANSWERS, "F3": Wire.ANSWERS, "F4": Wire.PASSES,
    "F5": Wire.ANSWERS, "F6": Wire.CUTS, "F7": Wire.ANSWERS, "F8": Wire.ANSWERS,
    "F9": Wire.HOLDS, "chaos": Wire.ANSWERS,
}  # fmt: skip
# B1, written out here rather than read from the classes, so a changed expectation shows up.
VERDICTS = {
    "F1": {"CAREFUL": "PASS", "NAIVE": "FAIL"}, "F2": {"CAREFUL": "PASS", "NAIVE": "FAIL"},
    "F3": {"CAREFUL": "PASS", "NAIVE": "PASS"}, "F4": {"CAREFUL": "PASS", "NAIVE": "FAIL"},
    "F5": {"CAREFUL": "PASS", "NAIVE": "PASS"},
    "F6": {}, "F7": {}, "F8": {}, "F9": {}, "chaos": {},  # not played by the benchmark
}  # fmt: skip


@pytest.mark.parametrize("name", FAULTS)
def test_h2_each_fault_says_what_it_does_on_the_wire_and_its_flags_follow(name):
    kind = FAULTS[name]
    assert kind.wire is WIRES[name]
    # forwards first; decided once the upstream answered; changes what the agent gets; a ghost
    assert (kind.executes_upstream, kind.after_execution, kind.injects, kind.ghost) == {
        Wire.ANSWERS: (False, False, True, False),
        Wire.REPLACES: (True, True, True, True),
        Wire.CUTS: (True, True, True, True),
        Wire.HOLDS: (True, True, True, False),
        Wire.PASSES: (True, False, False, False),
    }[kind.wire]


def test_h2_f9_holds_the_real_answer_on_its_class_until_its_time_or_a_cancellation():  # X15
    async def held(fault: Fault, cancel: bool) -> bool:
        cancelled = asyncio.Event()
        if cancel:
            cancelled.set()
        return await fault.hold(cancelled)

    assert asyncio.run(held(AddedLatency(latency_ms=1), cancel=False)) is True
    assert asyncio.run(held(AddedLatency(latency_ms=600_000), cancel=True)) is False
    assert asyncio.run(held(FAULTS["F1"](), cancel=False)) is True  # no hold: at once


@pytest.mark.parametrize("name", FAULTS)
def test_b1_each_fault_says_which_verdict_each_reference_agent_must_get(name):
    assert dict(FAULTS[name].reference_verdicts) == VERDICTS[name]
    if name in SIMULATED:  # played by the benchmark
        assert (CAREFUL.expected(name), NAIVE.expected(name)) == (
            VERDICTS[name]["CAREFUL"], VERDICTS[name]["NAIVE"],
        )  # fmt: skip


def test_b1_an_agent_no_fault_names_is_one_clear_line_not_a_keyerror(tmp_path):
    cautious = ReferenceAgent("cautious", "CAUTIOUS", "checks twice", play_careful)
    lines: list[str] = []
    report = tmp_path / "benchmark-report.json"
    with pytest.raises(ConfigError) as caught:
        main("F1,F3", agents=[CAREFUL, cautious], report_path=report, echo=lines.append)
    assert str(caught.value) == (
        "the self-test cannot judge CAUTIOUS in F1: its class GhostTimeout does not say which "
        "verdict CAUTIOUS must get (reference_verdicts)"
    )
    assert not report.exists() and lines == []  # refused before any run


def test_b1_a_verdict_that_is_none_of_the_three_is_refused_too(monkeypatch):
    monkeypatch.setattr(FAULTS["F3"], "reference_verdicts", {"CAREFUL": "PASSED"})
    with pytest.raises(ConfigError, match="TruncatedJson expects 'PASSED', not one of PASS"):
        CAREFUL.expected("F3")


def test_h2_a_fault_registered_after_the_harness_read_the_registry_is_refused():
    @dataclass(frozen=True)
    class Late(Fault):
        name: ClassVar[str] = "F10"
        brief: ClassVar[str] = "too late"
        summary: ClassVar[str] = "Never registered."
        wire: ClassVar[Wire] = Wire.ANSWERS

    before = dict(FAULTS)
    with pytest.raises(ConfigError, match="register fault F10 before importing the rest"):
        register(Late)
    assert FAULTS == before

"""The collector while runs execute in a process (issue 24, SPEC N2): lighter, then as before."""

from __future__ import annotations

import gc

from runner.execute.collector import THRESHOLD, fewer_collections


def test_n2_runs_freeze_and_raise_the_threshold_until_the_last_block_ends_then_restore() -> None:
    before, frozen_before = gc.get_threshold(), gc.get_freeze_count()
    with fewer_collections():
        assert gc.get_threshold() == THRESHOLD
        assert gc.get_freeze_count() > frozen_before
        with fewer_collections():  # a second sweep side by side
            pass
        assert gc.get_threshold() == THRESHOLD  # the first is still running
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == frozen_before == 0  # what was frozen is collectable again


def test_n2_a_failing_sweep_restores_the_collector_too() -> None:
    before = gc.get_threshold()
    try:
        with fewer_collections():
            raise RuntimeError("a run's bug")
    except RuntimeError:
        pass
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0

"""`sweep --baseline` validates the whole baseline before any run (SPEC V13).

Issue 22: a `version: 2` or k > n baseline was noticed only after every run (and then with no
JUnit), a group listed twice kept the last (a regression hidden, exit 0), k=5 with n=0 was
accepted, and a 200,000-deep JSON ended in a RecursionError traceback. Each is now one line and
exit code 1 before the first run: no store is created, no run is started.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest

from runner.analysis.regression import MAX_BASELINE_DEPTH, export_summary, load_summary
from runner.store import Store, StoreError
from tests.support import launcher
from tests.support.paths import BIN
from tests.support.runkit import cli_env
from tests.support.storekit import make_run

SPEC = """\
name: nightly
models: [scripted/careful]
prompts: [{name: p, text: You book rooms.}]
upstreams: [{name: booking, builtin: booking}]
scenarios: [F1]
conversations: [{name: c, user: "Please book a room. guest: Alice Example, date: 2026-12-01, nights: 2"}]
"""


def _group(**fields: Any) -> dict[str, Any]:
    base = {"model": "scripted/careful", "prompt": "p", "upstream": "booking",
            "conversation": "c", "scenario": "F1", "patch_arm": "none",
            "runs": 10, "errors": 0, "k": 2, "n": 10}  # fmt: skip
    return {**base, **fields}


GOOD: dict[str, Any] = {
    "format": "agent-harness-summary", "version": 1, "generated_at": "2026-11-01T00:00:00",
    "experiments": ["nightly"], "harness_versions": ["0.1.0"], "groups": [_group()],
}  # fmt: skip


def _variant(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(GOOD)
    data.update(changes)
    return data


BAD_BASELINES: dict[str, tuple[str, str]] = {
    "version 3": (json.dumps(_variant(version=3)), "summary version 3"),  # Q5: 1 and 2 read
    "k above n": (json.dumps(_variant(groups=[_group(k=7, n=5)])), "k = 7 is more than n = 5"),
    "k=5, n=0": (json.dumps(_variant(groups=[_group(k=5, n=0)])), "n = 0"),
    "n=0": (json.dumps(_variant(groups=[_group(k=0, n=0)])), "at least one judged run"),
    "a group twice": (
        json.dumps(_variant(groups=[_group(k=0), _group(k=9)])),
        "listed twice (also groups[0])",
    ),
    "negative counts": (json.dumps(_variant(groups=[_group(k=-1)])), "must not be negative"),
    "n beyond runs": (json.dumps(_variant(groups=[_group(runs=3, n=10, k=1)])), "do not fit"),
    "200,000 deep": ("[" * 200_000 + "]" * 200_000, f"deeper than {MAX_BASELINE_DEPTH} levels"),
    "a count that is text": (json.dumps(_variant(groups=[_group(k="many")])), "groups[0].k"),
}


@pytest.mark.parametrize("case", list(BAD_BASELINES))
def test_v13_a_bad_baseline_stops_the_sweep_before_any_run(tmp_path: Path, case: str) -> None:
    text, fragment = BAD_BASELINES[case]
    (tmp_path / "spec.yaml").write_text(SPEC)
    (tmp_path / "baseline.json").write_text(text)
    done = launcher.run(
        [str(BIN), "sweep", "spec.yaml", "--baseline", "baseline.json", "--db", "runs.duckdb",
         "--junit", "junit.xml"],
        cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, (case, done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and fragment in lines[0], (case, done.stderr)
    assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr
    assert not (tmp_path / "runs.duckdb").exists()  # no run started, nothing stored
    assert "Experiment nightly" not in done.stderr


def test_v13_a_good_baseline_still_loads(tmp_path: Path) -> None:  # V13, R8
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(GOOD))
    assert [g.k for g in load_summary(path).groups] == [2]


def test_v13_the_depth_check_reads_a_deep_text_in_one_pass(tmp_path: Path) -> None:  # V13
    # 64 MB is the size limit; a text near it, nested all the way, must be one clear error.
    path = tmp_path / "deep.json"
    path.write_text("[" * 30_000_000)
    started = time.process_time()
    with pytest.raises(StoreError, match="deeper than") as err:
        load_summary(path)
    assert "\n" not in str(err.value)
    print(f"30 MB of '[': refused in {time.process_time() - started:.2f} s CPU")


def test_v13_the_exported_baseline_leaves_out_groups_without_a_judged_run(
    tmp_path: Path,
) -> None:  # V13
    db = tmp_path / "runs.duckdb"
    with Store.open(db) as store:
        store.save_runs(
            [make_run(f"ok{i}", "nightly") for i in range(3)]
            + [
                make_run(
                    f"err{i}",
                    "nightly",
                    scenario="F2",
                    status="error",
                    verdict=None,
                    duplicate_found=None,
                )
                for i in range(2)
            ]  # fmt: skip
        )
    exported = export_summary(db)
    assert [(g["scenario"], g["n"]) for g in exported["groups"]] == [("F1", 3)]
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(exported))
    assert [g.n for g in load_summary(path).groups] == [3]  # its own export always loads
    assert [g.n for g in load_summary(db).groups] == [3]  # a store as baseline: the same

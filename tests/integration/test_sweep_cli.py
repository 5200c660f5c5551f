"""`agent-harness sweep`: regression against a baseline, JUnit XML, exit codes (R8)."""

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support import launcher

pytestmark = pytest.mark.slow

SPEC = """\
name: nightly-check
models: [scripted/naive]
prompts:
  - name: plain
    text: You are a hotel booking assistant.
upstreams:
  - name: booking
    builtin: booking
scenarios: [F1]
conversations:
  - name: single
    user: "Please book a room. guest: Alice Example, date: 2026-12-01, nights: 2"
runs: 3
"""


def sweep(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "agent-harness"
    return launcher.run(
        [str(exe), "sweep", "spec.yaml", *args], cwd=root, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("sweep")
    (root / "spec.yaml").write_text(SPEC)
    made = sweep(root, "--db", "base.duckdb", "--export-baseline", "baseline.json")
    assert made.returncode == 0, made.stderr
    assert "No --baseline given" in made.stdout
    summary = json.loads((root / "baseline.json").read_text())
    (group,) = summary["groups"]
    assert (group["k"], group["n"]) == (3, 3)  # the naive agent books twice after every timeout
    return root, summary


def failures(junit: Path) -> list[ET.Element]:
    return ET.parse(junit).getroot().findall(".//testcase/failure")


def test_r8_same_behaviour_as_the_baseline_is_no_regression(baseline):
    root, _ = baseline
    done = sweep(root, "--db", "same.duckdb", "--baseline", "baseline.json", "--junit", "same.xml")
    assert done.returncode == 0, done.stderr
    assert "No regression" in done.stdout
    assert ET.parse(root / "same.xml").getroot().find("testsuite").get("tests") == "1"
    assert failures(root / "same.xml") == []
    assert (root / "reports" / "nightly-check.html").exists()


def test_r8_duplicate_rate_above_the_baseline_interval_is_a_regression(baseline):
    root, summary = baseline
    clean = json.loads(json.dumps(summary))
    clean["groups"][0].update(k=0, rate=0.0)  # a baseline where the agent never booked twice
    (root / "clean.json").write_text(json.dumps(clean))
    done = sweep(root, "--db", "worse.duckdb", "--baseline", "clean.json", "--junit", "worse.xml")
    assert done.returncode == 2, done.stderr
    assert "REGRESSION" in done.stdout and "regressed" in done.stderr
    (failure,) = failures(root / "worse.xml")
    assert "3 of 3" in failure.get("message")


def test_r8_a_missing_baseline_file_is_one_clear_error(baseline):
    root, _ = baseline
    done = sweep(root, "--baseline", "nope.json")
    assert done.returncode == 1
    assert "baseline not found" in done.stderr and done.stderr.count("\n") == 1

"""`runs-needed` at the edges through the installed command (issue 22): a significance level
below what a double can carry is one clear line; small rates keep their digits.

Moved from tests/unit/test_runs_needed_bounds.py (these start the command: unit tests do not).
"""

from __future__ import annotations

import subprocess

import pytest

from tests.support import launcher
from tests.support.paths import BIN


def runs_needed(*args: str) -> subprocess.CompletedProcess[str]:
    return launcher.run([str(BIN), "runs-needed", *args], capture_output=True, text=True,
                          timeout=120)  # fmt: skip


@pytest.mark.parametrize(
    ("flag", "value", "fragment"),
    [
        ("--alpha", "1e-17", "alpha must lie in [1e-10, 1), got 1e-17"),
        ("--alpha", "0", "alpha must lie in [1e-10, 1), got 0"),
        ("--power", "0.99999999999999999", "power must lie in (0, 1 - 1e-10], got 1"),
    ],  # fmt: skip
)
def test_v4_an_alpha_or_power_beyond_a_double_is_one_clean_line(
    flag: str, value: str, fragment: str
) -> None:
    done = runs_needed("--baseline", "0.5", "--target", "0.3", flag, value)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == f"agent-harness runs-needed: error: {fragment}\n", done.stderr


def test_v4_the_smallest_alpha_still_plans() -> None:
    done = runs_needed("--baseline", "0.5", "--target", "0.3", "--alpha", "1e-10")
    assert done.returncode == 0, done.stderr
    assert "alpha 1e-10" in done.stdout


def test_small_rates_keep_their_digits() -> None:
    done = runs_needed("--baseline", "0.0001", "--target", "0.0002")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Duplicate rate 0.01% without the patch vs 0.02% with it;")
    runs = runs_needed("--baseline", "0.0001", "--target", "0.0002", "--runs", "100")
    assert "power below 0.01% (exact)" in runs.stdout  # never a false "0%"
    assert "12.5% without" in runs_needed("--baseline", "0.125", "--target", "0.5").stdout

"""The pytest plugin (I2): a proxy in front of a test's upstream, the typed report after its
agent ran, a marker over scenarios and runs, cassettes recorded once and replayed offline.

`plugin.py` is what pytest loads (entry point `pytest11`): it imports nothing of the harness,
so a suite that does not use it pays nothing for it. The rest is loaded by a test that asks
for the `agent_harness` fixture or imports `assert_pass`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.testing.assertions import assert_pass, assert_verdict, failure_text
    from harness.testing.run import HarnessRun

_WHERE = {
    "assert_pass": "harness.testing.assertions",
    "assert_verdict": "harness.testing.assertions",
    "failure_text": "harness.testing.assertions",
    "HarnessRun": "harness.testing.run",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'harness.testing' has no attribute {name!r}")
    return getattr(importlib.import_module(where), name)


__all__ = ["HarnessRun", "assert_pass", "assert_verdict", "failure_text"]

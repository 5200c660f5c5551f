"""bench/slow_model.py for tests: an OpenAI-compatible endpoint that answers every call after
a fixed delay (one `create_booking` tool call, then words), so a sweep's runs stay in flight
long enough for a signal or a kill to land among them. The delay is the model's, never a wait
of the test's own: the test still waits on what the runner prints or stores.

    with slow_model(0.5) as url:
        write_spec(folder, "x", models=[slow_model_entry(url)], ...)
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

from tests.support.paths import ROOT


@contextlib.contextmanager
def slow_model(delay_s: float) -> Iterator[str]:
    """The endpoint running, answering after `delay_s`; its /v1 URL."""
    model = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "slow_model.py"), "--delay", str(delay_s)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert model.stdout is not None
        line = model.stdout.readline()
        found = re.search(r"listening on (\S+)", line)
        assert found, line
        yield found.group(1)
    finally:
        model.terminate()
        model.wait(timeout=30)


def slow_model_entry(url: str) -> dict[str, Any]:
    """The spec's `models` entry for the endpoint at `url`."""
    return {"name": "openai/bench-model", "params": {"api_base": url}}

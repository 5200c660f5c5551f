"""What every test shares: the async tests run on asyncio (the harness is asyncio code).

The rest of what tests share lives in tests/support/; each layer's conftest adds its own
(tests/unit: no process may start; tests/e2e: the real servers and Chromium).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """anyio's pytest plugin runs `@pytest.mark.anyio` tests on this backend only."""
    return "asyncio"


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    """A named pipe nobody writes to: a reader that opens it waits forever."""
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path

"""The test suite's own layout (DESIGN's three layers, one test kit).

Unit tests are pure: tests/unit/conftest.py makes every way of starting a process fail, and
these tests check that it does, for each road a test could take.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import subprocess
import sys

import pytest

STARTED = "a unit test started a process"


def test_subprocess_run_in_a_unit_test_fails():
    with pytest.raises(AssertionError, match=STARTED):
        subprocess.run([sys.executable, "-c", "pass"], check=False, timeout=10)


def test_asyncio_subprocess_in_a_unit_test_fails():
    async def start() -> None:
        await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")

    with pytest.raises(AssertionError, match=STARTED):
        asyncio.run(start())


def test_os_fork_and_system_in_a_unit_test_fail():
    with pytest.raises(AssertionError, match=STARTED):
        os.fork()
    with pytest.raises(AssertionError, match=STARTED):
        os.system("true")


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_multiprocessing_in_a_unit_test_fails(method):
    process = multiprocessing.get_context(method).Process(target=print)
    with pytest.raises(AssertionError, match=STARTED):
        process.start()

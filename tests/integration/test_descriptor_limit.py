"""`run` raises its soft limit of open descriptors to the hard one (issue 37): each run in flight
holds a few descriptors, and up to 1,024 runs may be in flight in one process."""

import resource
import subprocess
import sys

import pytest

CHILD = """
import resource
resource.setrlimit(resource.RLIMIT_NOFILE, (64, {hard}))
from runner.execute.experiment import raise_descriptor_limit
raise_descriptor_limit()
print(*resource.getrlimit(resource.RLIMIT_NOFILE))
"""


# R1, issue 37: the fork server and its workers start after this and inherit the limit
def test_run_raises_the_soft_descriptor_limit_to_the_hard_one():
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard <= 64:
        pytest.skip(f"a hard descriptor limit of {hard} leaves nothing to raise to")
    done = subprocess.run(
        [sys.executable, "-c", CHILD.format(hard=hard)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert done.stdout.split() == [str(hard), str(hard)]

"""What every test shares: the async tests run on asyncio (the harness is asyncio code), a
FIFO, and the order the suite runs in (`make test`: pytest-xdist, files handed out whole).

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


@pytest.fixture(autouse=True)
def _fresh_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test marked `fresh_process` starts every `agent-harness` as a real new process: the
    warm launcher (tests/support/launcher.py) is off for it."""
    if request.node.get_closest_marker("fresh_process") is not None:
        monkeypatch.setenv("AGENT_HARNESS_TEST_LAUNCHER", "0")


@pytest.fixture(scope="session", autouse=True)
def _cache_of_the_session(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Caches the tools keep in the user's cache folder (the compiled report templates) and
    the reports a proxy keeps by default go to folders of this test session, shared by its
    workers, not to the real ~/.cache and ~/.local/state."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if base.name.startswith("popen-gw") else base  # xdist: one per worker
    os.environ["XDG_CACHE_HOME"] = str(shared / "xdg-cache")
    # Q3: a proxy started without --report-file keeps its report under the state folder
    os.environ["XDG_STATE_HOME"] = str(shared / "xdg-state")


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    """A named pipe nobody writes to: a reader that opens it waits forever."""
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


# -- running in parallel (make test: pytest-xdist, --dist loadscope --no-loadscope-reorder) ---
#
# xdist hands out whole files (a class of tests is a unit of its own), in collection order:
# a module-scoped fixture is built once, on the worker that runs its file. The order below puts
# the files that took longest (end to end, waiting on processes) first and unit tests last, so
# no long file starts at the end. (`--dist loadgroup` would group by marks, but pytest 9 no
# longer reads the node ids xdist 3.8 rewrites for it.)

LAYERS = ("e2e", "integration", "unit")
LONGEST_FIRST = (  # the longest files (or classes) of a full run, longest first: CI's
    # --durations and the wall per file of `python -m tests.support.cputime` (docs/performance.md)
    "test_agreement_e2e.py", "test_ray_executor.py", "test_local_model.py",
    "test_process_pool_e2e.py", "test_frameworks_e2e.py",
    "test_conformance.py", "test_shards_merge.py", "test_proxy_http.py",
    "test_command_agent_e2e.py", "test_runner_http.py", "test_exit_codes.py",
    "test_readme_e2e.py", "test_first_hour_e2e.py",
    "test_corpus_e2e.py", "test_proxy_http_clients.py", "test_proxy_e2e.py", "test_sweep_cli.py",
    "test_proxy_git_modern.py", "test_runner_e2e.py", "test_proxy_http_faults.py",
    "test_cassette_e2e.py", "test_effects_real_servers.py", "test_report_browser.py",
    "test_example_report.py", "test_proxy_hostile.py", "test_secrets.py",
)  # fmt: skip


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first, then end-to-end, integration and unit tests (a stable sort:
    inside a file, pytest's own order, which keeps module-scoped parameters together)."""
    items.sort(key=_rank)


def _rank(item: pytest.Item) -> tuple[int, int]:
    path = Path(str(item.path))
    first = LONGEST_FIRST.index(path.name) if path.name in LONGEST_FIRST else len(LONGEST_FIRST)
    layer = next((r for r, name in enumerate(LAYERS) if name in path.parts), len(LAYERS))
    return first, layer

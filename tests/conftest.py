"""What every test shares: the async tests run on asyncio (the harness is asyncio code), a
FIFO, and how the suite runs in parallel (`make test`: pytest-xdist, `--dist loadgroup`).

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


# -- running in parallel (make test: pytest-xdist, --dist loadgroup) -------------------------

LAYERS = ("e2e", "integration", "unit")  # the order tests are handed out: waiting ones first


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Hand out end-to-end tests first (they mostly wait on processes), unit tests last; keep
    the tests that share a module-scoped fixture on one worker, so it is built once."""
    items.sort(key=_layer_rank)  # stable: the order inside a layer is the files' own
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        group = shared_fixture_group(item)
        if group is not None and item.get_closest_marker("spread") is None:
            item.add_marker(pytest.mark.xdist_group(group))


def _layer_rank(item: pytest.Item) -> int:
    parts = Path(str(item.path)).parts
    return next((rank for rank, layer in enumerate(LAYERS) if layer in parts), len(LAYERS))


def shared_fixture_group(item: pytest.Item) -> str | None:
    """The module (and its module-scoped parameters) of a test that uses a fixture of module
    scope; None for a test that builds everything it uses itself."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    shared = any(
        defs and defs[-1].scope in ("module", "package") for defs in info.name2fixturedefs.values()
    )
    if not shared:
        return None
    callspec = getattr(item, "callspec", None)
    params = []
    if callspec is not None:
        scopes = {name: defs[-1].scope for name, defs in info.name2fixturedefs.items() if defs}
        params = [f"{k}={v}" for k, v in callspec.params.items() if scopes.get(k) == "module"]
    return ":".join([item.nodeid.split("::")[0], *params])

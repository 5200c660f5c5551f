"""agent-harness's pytest plugin (I2), loaded through the `pytest11` entry point.

    @pytest.mark.agent_harness(scenarios=["F1", "F2"], runs=3)
    def test_my_agent_books_once(agent_harness):
        my_agent(agent_harness.mcp_config_file)      # the agent starts the proxy over stdio
        assert_pass(agent_harness)                   # the verdict, else reason and patches

Fixtures: `agent_harness` (a HarnessRun: the proxy of this test, one per scenario and run)
and `agent_harness_upstream` (override it: the server the proxy stands in front of). Marker:
`agent_harness(scenarios=..., runs=..., upstream=..., transport=..., cassette=...,
proxy_args=...)`. Option: `--harness-record-mode once|none|all` for cassettes.

This module imports only pytest and the standard library: the harness is imported by the
fixture, when a test asks for it, never at collection (I2).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

RECORD_MODES = ("once", "none", "all")
DEFAULT_SCENARIOS = ("F1",)
_MARKER = (
    "agent_harness(scenarios=['F1'], runs=1, upstream=None, transport='stdio', cassette=False, "
    "proxy_args=()): run the test once per scenario and run behind agent-harness's chaos proxy "
    "(the agent_harness fixture); scenario None is a baseline without a fault"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    """`--harness-record-mode`, as pytest-recording's --record-mode for cassettes."""
    group = parser.getgroup("agent-harness", "agent-harness: an agent's MCP calls under faults")
    group.addoption(
        "--harness-record-mode",
        choices=RECORD_MODES,
        default=None,
        help="Cassettes of tests marked agent_harness(cassette=True): once records those "
        "missing and replays the others, none only replays (offline; a missing cassette "
        "fails the test), all records every one again. Default: none when the CI variable "
        "is set, else once.",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker (so --strict-markers accepts it)."""
    config.addinivalue_line("markers", _MARKER)


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def record_mode(config: pytest.Config) -> str:
    """The record mode asked for, else none in CI (replay offline), else once."""
    mode = config.getoption("--harness-record-mode", default=None)
    return mode or ("none" if _in_ci() else "once")


def _marker_kwargs(node: Any) -> dict[str, Any]:
    marker = node.get_closest_marker("agent_harness")
    return dict(marker.kwargs) if marker is not None else {}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test that uses `agent_harness` runs once per scenario and run of its marker."""
    if "agent_harness" not in metafunc.fixturenames:
        return
    kwargs = _marker_kwargs(metafunc.definition)
    scenarios = kwargs.get("scenarios", DEFAULT_SCENARIOS)
    if isinstance(scenarios, str) or scenarios is None:
        scenarios = [scenarios]
    runs = kwargs.get("runs", 1)
    if not isinstance(runs, int) or isinstance(runs, bool) or runs < 1:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: agent_harness runs={runs!r}: a whole number from 1")
    params, ids = [], []
    for scenario in scenarios:
        name = None if scenario in (None, "none", "None") else str(scenario).upper()
        for run in range(runs):
            params.append((name, run))
            ids.append(f"{name or 'none'}" + (f"-run{run + 1}" if runs > 1 else ""))
    metafunc.parametrize("agent_harness", params, indirect=True, ids=ids)


@pytest.fixture
def agent_harness_upstream() -> Any:
    """The MCP server the proxy stands in front of: override this fixture (or pass
    `upstream=` to the marker) with a command list, a URL, or a server entry
    (`{"command", "args", "env", "cwd"}` / `{"url", "headers"}`)."""
    raise pytest.UsageError(
        "agent_harness needs an upstream: define a fixture agent_harness_upstream that returns "
        "your MCP server's command (a list), its URL, or its entry, or pass upstream= to the marker"
    )


def cassette_path(request: pytest.FixtureRequest, given: Any) -> Path:
    """Where a test's cassette lives: a path given, else `cassettes/<module>/<test>.cassette`
    beside the test file (its parameters in the name), as pytest-recording keeps them."""
    test_file = Path(str(request.node.path))
    if isinstance(given, str | os.PathLike):
        path = Path(given)
        return path if path.is_absolute() else test_file.parent / path
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name).strip("-")
    return test_file.parent / "cassettes" / test_file.stem / f"{name}.cassette"


@pytest.fixture
def agent_harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """The proxy of this test (a HarnessRun): `mcp_config` / `mcp_config_file` / `command` for
    an agent over stdio, `url` with transport="http", then `report()`, the typed report."""
    from harness.base.errors import UsageError
    from harness.testing.run import HarnessRun

    kwargs = _marker_kwargs(request.node)
    scenario, run = getattr(request, "param", (DEFAULT_SCENARIOS[0], 0))
    upstream = kwargs.get("upstream")
    if upstream is None:
        upstream = request.getfixturevalue("agent_harness_upstream")
    cassette, record = None, False
    if kwargs.get("cassette"):
        cassette = cassette_path(request, kwargs["cassette"])
        mode = record_mode(request.config)
        record = mode == "all" or (mode == "once" and not cassette.exists())
        if not record and not cassette.exists():
            pytest.fail(
                f"no cassette {cassette} to replay (record mode none); record it once with "
                "--harness-record-mode=once",
                pytrace=False,
            )
        if record:
            cassette.parent.mkdir(parents=True, exist_ok=True)
    folder = tmp_path / "agent-harness"
    folder.mkdir()
    try:
        harness = HarnessRun(
            folder, upstream, scenario, run,
            transport=kwargs.get("transport", "stdio"), cassette=cassette, record=record,
            proxy_args=tuple(kwargs.get("proxy_args", ())),
        )  # fmt: skip
    except UsageError as exc:
        pytest.fail(f"agent_harness: {exc}", pytrace=False)
    try:
        yield harness
    finally:
        harness.close()

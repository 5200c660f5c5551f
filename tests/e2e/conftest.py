"""Fixtures for the end-to-end tests: real processes, real third-party MCP servers, Chromium.

Every server fixture returns the exact argv that starts the server over stdio, so the same
list can go to the MCP client directly (the baseline) or behind `agent-harness proxy --`.
Settings a server reads from its environment are part of that argv (`env VAR=value ...`),
so no caller has to remember them.

Something missing (node packages, a Python server, chromium, the console script) fails the
test when CI is set, because CI must run every test; on a developer machine it skips with
the command that installs it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import browser, launcher  # the repo root is on sys.path: pytest's `pythonpath`
from tests.support.once import once
from tests.support.paths import BIN, ROOT
from tests.support.prereq import (
    CHROMIUM_INSTALL_HINT,
    PY_INSTALL_HINT,
    node,
    npm_entry,
    python_module,
    require,
)
from tests.support.runkit import cli_env

# The five third-party servers, by the fixture that returns each one's argv.
SERVER_FIXTURES = (
    "memory_server_cmd",
    "filesystem_server_cmd",
    "everything_server_cmd",
    "git_server_cmd",
    "time_server_cmd",
)


def _env_prefix(**variables: str) -> list[str]:
    """argv prefix that sets environment variables for the command after it."""
    env = shutil.which("env") or "/usr/bin/env"
    return [env, *(f"{name}={value}" for name, value in variables.items())]


@pytest.fixture
def memory_file(tmp_path: Path) -> Path:
    """Where server-memory keeps its knowledge graph (JSON lines) for this test."""
    return tmp_path / "memory" / "memory.jsonl"


@pytest.fixture
def memory_server_cmd(memory_file: Path) -> list[str]:
    """argv for @modelcontextprotocol/server-memory, storing its graph in `memory_file`."""
    memory_file.parent.mkdir(parents=True, exist_ok=True)
    entry = npm_entry("server-memory")
    return [*_env_prefix(MEMORY_FILE_PATH=str(memory_file)), node(), str(entry)]


@pytest.fixture
def filesystem_root(tmp_path: Path) -> Path:
    """The only directory server-filesystem may touch, with one file in it."""
    root = tmp_path / "fsroot"
    root.mkdir()
    (root / "hello.txt").write_text("hello from the e2e fixture\n", encoding="utf-8")
    return root


@pytest.fixture
def filesystem_server_cmd(filesystem_root: Path) -> list[str]:
    """argv for @modelcontextprotocol/server-filesystem, allowed only `filesystem_root`."""
    entry = npm_entry("server-filesystem")
    return [node(), str(entry), str(filesystem_root)]


@pytest.fixture
def everything_server_cmd() -> list[str]:
    """argv for @modelcontextprotocol/server-everything on stdio."""
    entry = npm_entry("server-everything")
    return [node(), str(entry), "stdio"]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        timeout=30,
        # A developer's global git config (hooks, signing) must not leak into the fixture.
        env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"},
    )


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    """A fresh git repository on branch main with one commit (README.md)."""
    require(shutil.which("git") is not None, "git is not on PATH", "apt-get install -y git")
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "--quiet", "--initial-branch=main")
    # Local identity: mcp-server-git's git_commit needs one and CI has no global config.
    _git(repo, "config", "user.name", "agent-harness e2e")
    _git(repo, "config", "user.email", "e2e@agent-harness.invalid")
    _git(repo, "config", "commit.gpgsign", "false")
    (repo / "README.md").write_text("# e2e fixture repo\n", encoding="utf-8")
    _git(repo, "add", "README.md")
    _git(repo, "commit", "--quiet", "-m", "initial commit")
    return repo


@pytest.fixture
def git_server_cmd(git_repo: Path) -> list[str]:
    """argv for mcp-server-git (PyPI) bound to `git_repo`."""
    python_module("mcp_server_git")
    return [sys.executable, "-m", "mcp_server_git", "--repository", str(git_repo)]


@pytest.fixture
def time_server_cmd() -> list[str]:
    """argv for mcp-server-time (PyPI), pinned to UTC so answers do not depend on the host."""
    python_module("mcp_server_time")
    return [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]


@pytest.fixture
def agent_harness_bin() -> Path:
    """The installed `agent-harness` console script of this venv."""
    path = Path(sys.executable).parent / "agent-harness"
    require(
        path.is_file() and os.access(path, os.X_OK),
        f"console script {path} not found",
        PY_INSTALL_HINT,
    )
    return path


@pytest.fixture(scope="session")
def example_experiment(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """experiments/example.yaml (`make run`'s experiment) run as it is by the installed command,
    once for the whole session (its 160 runs are read by test_agreement_e2e and
    test_example_report): the store ("db", read only: copy it to open it) and the printed
    summary ("stdout")."""

    def build(folder: Path) -> dict:
        spec, db = ROOT / "experiments" / "example.yaml", folder / "runs.duckdb"
        done = launcher.run(  # what the run stores is the subject, not its start-up
            [str(BIN), "run", str(spec), "--db", str(db)], cwd=folder, env=cli_env(),
            capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return {"stdout": done.stdout}

    folder, made = once(tmp_path_factory, "example-experiment", build)
    return {"db": folder / "runs.duckdb", "stdout": made["stdout"]}


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """Path of the headless-capable Chromium binary."""
    path = browser.find_chromium()
    require(path is not None, "chromium not found", CHROMIUM_INSTALL_HINT)
    assert path is not None
    return path


@pytest.fixture(scope="module")
def chromium(chromium_path: str) -> Iterator[browser.Browser]:
    """One headless Chromium per test module (`chromium.new_page(path)`); closed afterwards."""
    with browser.Browser(executable=chromium_path) as chrome:
        yield chrome

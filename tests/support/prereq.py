"""What the end-to-end tests need installed, and one rule when it is missing: the test fails
when CI is set (CI must run every test) and skips elsewhere, with the command that installs it."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

THIRDPARTY_DIR = ROOT / "tests" / "e2e" / "thirdparty"  # `make e2e-deps` installs there
NPM_SCOPE_DIR = THIRDPARTY_DIR / "node_modules" / "@modelcontextprotocol"
NPM_INSTALL_HINT = "make e2e-deps  (= cd tests/e2e/thirdparty && npm ci --no-audit --no-fund)"
PY_INSTALL_HINT = "make setup  (= .venv/bin/pip install -e '.[dev]')"
CHROMIUM_INSTALL_HINT = "apt-get update && apt-get install -y chromium"
CORPUS_BIN = ROOT / ".venv-corpus" / "bin"  # `make corpus-deps`: the servers on mcp 1.x
CORPUS_INSTALL_HINT = "make corpus-deps  (= .venv-corpus with requirements-corpus.txt)"


def in_ci() -> bool:
    """True when the environment variable CI is set to something other than a false word."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require(condition: bool, missing: str, install: str) -> None:
    """Fail (CI set) or skip (otherwise) unless `condition` holds."""
    if condition:
        return
    message = f"{missing}; install it with: {install}"
    if in_ci():
        pytest.fail(f"{message} (CI is set, so e2e prerequisites are mandatory)")
    pytest.skip(message)


def node() -> str:
    node = shutil.which("node")
    require(node is not None, "node (>= 18) is not on PATH", "apt-get install -y nodejs")
    assert node is not None
    return node


def npm_entry(package: str) -> Path:
    """The bin entry file of an installed @modelcontextprotocol package."""
    entry = NPM_SCOPE_DIR / package / "dist" / "index.js"
    require(
        entry.is_file(), f"npm package @modelcontextprotocol/{package} missing", NPM_INSTALL_HINT
    )
    return entry


def python_module(module: str) -> None:
    found = importlib.util.find_spec(module) is not None
    require(found, f"Python package {module} not installed in {sys.prefix}", PY_INSTALL_HINT)


def corpus_server(command: str) -> Path:
    """A server of the T2 corpus installed in .venv-corpus (mcp-server-sqlite, ...)."""
    path = CORPUS_BIN / command
    require(path.is_file(), f"{command} is not installed in .venv-corpus", CORPUS_INSTALL_HINT)
    return path

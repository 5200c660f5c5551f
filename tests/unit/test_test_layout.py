"""The test suite's own layout (DESIGN's three layers, one test kit).

What tests share lives in tests/support/ (a package): no test file imports another test file
or a conftest. Unit tests are pure: tests/unit/conftest.py makes every way of starting a
process fail, and these tests check that it does, for each road a test could take.
"""

from __future__ import annotations

import ast
import asyncio
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
STARTED = "a unit test started a process"


def suite_files() -> list[Path]:
    """Every Python file of the suite (the npm packages' folders left out)."""
    return sorted(p for p in TESTS.rglob("*.py") if "node_modules" not in p.parts)


def imported(path: Path, source: str | None = None) -> list[str]:
    """The dotted names a file (or `source` standing at `path`) imports, relative imports
    resolved against its package."""
    package = path.relative_to(TESTS.parent).with_suffix("").parts[:-1]
    text = path.read_text(encoding="utf-8") if source is None else source
    names: list[str] = []
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            module = ".".join([*base, *([node.module] if node.module else [])])
            names += [module] + [f"{module}.{alias.name}" for alias in node.names]
    return names


def is_test_module(name: str) -> bool:
    """A test file or a conftest: what no other file may import."""
    return any(part.startswith("test_") or part == "conftest" for part in name.split("."))


def test_no_test_file_imports_another_test_file_or_a_conftest():
    found = [
        f"{path.relative_to(TESTS.parent)}: imports {name}"
        for path in suite_files()
        for name in imported(path)
        if is_test_module(name)
    ]
    assert found == [], "move what is shared into tests/support/:\n" + "\n".join(found)


def test_the_import_check_sees_every_form_of_import():
    kit = TESTS / "support" / "probe.py"  # where a relative import resolves from; never written
    forms = {
        "import tests.e2e.test_proxy_e2e": True,
        "from tests.e2e.test_proxy_e2e import BOOK": True,
        "from tests.e2e import test_proxy_e2e": True,
        "from tests.e2e.conftest import require": True,
        "from ..e2e.test_proxy_e2e import BOOK": True,
        "from . import test_x": True,
        "import test_store": True,
        "from tests.support.proxyproc import BOOK": False,
        "from tests.support import browser": False,
    }
    for source, flagged in forms.items():
        names = imported(kit, source)
        assert any(is_test_module(n) for n in names) is flagged, (source, names)


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


def test_anyio_backend_is_defined_once_in_the_root_conftest():
    defined = [
        str(path.relative_to(TESTS.parent))
        for path in suite_files()
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.FunctionDef) and node.name == "anyio_backend"
    ]
    assert defined == ["tests/conftest.py"]

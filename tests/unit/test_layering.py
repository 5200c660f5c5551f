"""Data flows one way (DESIGN): the runner imports the harness through its public face only.

The face is `harness.proxy` (run one proxy, read what it recorded) plus a few shared utilities.
A runner module that reaches into harness internals (router, session, judge, transport ...)
would break when the harness changes them, and a Ray worker would drag them along.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The modules of the harness that the runner may import.
PUBLIC = {
    "harness",  # __version__, CERTIFICATION
    "harness.proxy",  # configure, start (subprocess or in process), read the event log
    "harness.cli",  # the typer app the runner's commands are added to
    "harness.base",  # files and text (below)
    "harness.base.errors",  # the one exception tree
    "harness.base.jsonutil",  # exact JSON (big integers, decimals), shared by report and store
    "harness.base.outfile",  # V1: every output file through the one writer
    "harness.base.infile",  # V4: every input file through the one bounded reader
    "harness.base.textsafe",  # V6: foreign text escaped for a terminal or Markdown
}


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, `from harness import jsonutil` as harness.base.jsonutil."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                if (ROOT / (sub.replace(".", "/") + ".py")).exists() or (
                    ROOT / sub.replace(".", "/")
                ).is_dir():
                    found.add(sub)
    return found


def _python_files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def test_runner_imports_the_harness_only_through_its_public_face() -> None:  # DESIGN
    wrong = {
        f"{path.relative_to(ROOT)}: {module}"
        for path in _python_files("runner")
        for module in imported_modules(path)
        if module.split(".")[0] == "harness" and module not in PUBLIC
    }
    assert not wrong, (
        "the runner imports harness internals; export what it needs from harness.proxy "
        f"(its __all__) instead: {sorted(wrong)}"
    )


def test_harness_never_imports_the_runner() -> None:  # DESIGN: data flows one way
    wrong = {
        f"{path.relative_to(ROOT)}: {module}"
        for path in _python_files("harness")
        for module in imported_modules(path)
        if module.split(".")[0] == "runner"
    }
    assert not wrong, sorted(wrong)


def test_the_public_face_names_what_it_exports() -> None:  # DESIGN
    import harness.proxy

    for name in harness.proxy.__all__:
        assert getattr(harness.proxy, name) is not None, name

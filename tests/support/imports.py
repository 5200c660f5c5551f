"""The imports a source file makes, read from its syntax tree (the layering tests and the
tests that pin what a command loads)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import ROOT


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(
    tree: ast.AST, at_load: bool = False, type_checking: bool = False
) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: at module level or inside functions; with
    `at_load`, only those that run when the module loads; those under `if TYPE_CHECKING:` only
    with `type_checking`."""
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if at_load and isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                continue
            if isinstance(child, ast.If) and _is_type_checking(child) and not type_checking:
                for other in child.orelse:
                    walk(other)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.append(child)
            walk(child)

    walk(tree)
    return found


def imported_modules(path: Path, at_load: bool = False, type_checking: bool = False) -> set[str]:
    """Every module a file imports at run time, `from harness.base import jsonutil` as
    harness.base.jsonutil; the package itself only where a name its face hands on is imported
    (`from runner.store import migrations` takes a sibling module, not the face's names)."""
    found = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in _runtime_imports(tree, at_load, type_checking):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif node.module and node.level == 0:
            names = {f"{node.module}.{alias.name}" for alias in node.names}
            submodules = {
                sub
                for sub in names
                if (ROOT / (sub.replace(".", "/") + ".py")).exists()
                or (ROOT / sub.replace(".", "/")).is_dir()
            }
            found |= submodules
            if submodules != names:
                found.add(node.module)
    return found

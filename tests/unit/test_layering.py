"""The house (DESIGN, issue 20): rooms for the harness, data flowing one way, no circles.

The harness is a stack of rooms; a module may import its own room or a room below it, never
one above or beside it. The runner imports the harness only through its faces. The import
graph of the harness has no circle, lazy imports inside functions included, and imports under
`if TYPE_CHECKING:` too: a circle that only the type checker walks is still two modules that
cannot be read, changed or tested one without the other.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Rooms of the harness, bottom up. A room may import rooms of a lower rank; rooms of one rank
# are independent of each other.
RANKS = {
    "harness": 0,  # the package itself: __version__, CERTIFICATION
    "harness.base": 0,  # files and text: reader, writer, JSON, escaping, errors
    "harness.wire": 1,  # stdio/HTTP transports, line framing, process groups, protocol facts
    "harness.operations": 1,  # classification, key fields, defaults, identity, names
    "harness.faults": 1,  # the fault registry
    "harness.events": 2,  # the event log
    "harness.judge": 3,  # pure: events -> report, score
    "harness.report": 4,  # the judgement, patches, Markdown, the report file
    "harness.session": 5,  # the judged session and its recorder
    "harness.proxy": 6,  # the router and its entry points
    "harness.benchmark": 7,  # the self-test and its simulated backend
    "harness.cassette": 7,  # U2: record a real session, replay it (uses the proxy's parts)
    "harness.demo": 8,  # the demo server
    "harness.__main__": 9,  # `python -m harness proxy ...`
}

# The faces of the harness that the runner may import.
PUBLIC = {
    "harness",  # __version__, CERTIFICATION
    "harness.proxy",  # configure, start (subprocess or in process), read the event log
    "harness.report",  # judge a recorded event log again (`agent-harness judge`)
    "harness.benchmark",  # `agent-harness benchmark`
    "harness.demo",  # `agent-harness demo`
    "harness.cassette",  # `agent-harness record` / `replay`, a cassette's count (U2)
    "harness.base.redact",  # V3: the text redaction the store and the cassettes share
    "harness.base",  # files and text (below)
    "harness.base.errors",  # the one exception tree
    "harness.base.jsonutil",  # exact JSON (big integers, decimals), shared by report and store
    "harness.base.outfile",  # V1: every output file through the one writer
    "harness.base.infile",  # V4: every input file through the one bounded reader
    "harness.base.textsafe",  # V6: foreign text escaped for a terminal or Markdown
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(
    tree: ast.AST, type_checking: bool = False
) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: at module level or inside functions; those under
    `if TYPE_CHECKING:` only with `type_checking`."""
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child) and not type_checking:
                for other in child.orelse:
                    walk(other)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.append(child)
            walk(child)

    walk(tree)
    return found


def imported_modules(path: Path, type_checking: bool = False) -> set[str]:
    """Every module a file imports at run time (`type_checking`: or for the type checker),
    `from harness.base import jsonutil` as harness.base.jsonutil."""
    found = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in _runtime_imports(tree, type_checking):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif node.module and node.level == 0:
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


def room_of(module: str) -> str:
    """The room a harness module lives in: the longest RANKS prefix that names it."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in RANKS:
            return prefix
    raise AssertionError(f"{module} lives in no room; add its room to RANKS")


def _harness_graph(type_checking: bool = False) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in _python_files("harness"):
        name = _module_name(path)
        imports = imported_modules(path, type_checking)
        graph[name] = {m for m in imports if m.split(".")[0] == "harness"}
    return graph


def test_every_harness_module_lives_in_a_room_and_imports_only_downwards() -> None:  # DESIGN
    wrong = []
    for module, imports in _harness_graph().items():
        room = room_of(module)
        for target in imports:
            other = room_of(target)
            if other == room or RANKS[other] < RANKS[room]:
                continue
            wrong.append(f"{module} ({room}) -> {target} ({other})")
    assert not wrong, "imports that run up or sideways:\n" + "\n".join(sorted(wrong))


def test_the_harness_import_graph_has_no_circle() -> None:  # DESIGN
    # Imports for the type checker count too (issue 33: the proxy's mixins typed `self: Proxy`
    # imported the router back under TYPE_CHECKING, a circle this test did not see).
    graph = _harness_graph(type_checking=True)
    modules = set(graph)
    # A package's import of its own submodule is how a face works, not a circle: the edge
    # from a submodule up to its package (`from harness.report import x` inside
    # harness/report/patches.py) is the one that would close a circle.
    edges = {m: {t for t in ts if t in modules and t != m} for m, ts in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    counter = [0]

    def strongconnect(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            strongconnect(v)
    assert not circles, f"import circles: {circles}"


def test_each_room_says_in_its_face_what_it_holds() -> None:  # DESIGN
    for room in RANKS:
        folder = ROOT / room.replace(".", "/")
        if not folder.is_dir():
            continue
        doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text(encoding="utf-8")))
        assert doc, f"{room}/__init__.py has no docstring"
        assert doc.splitlines()[0].strip(), room


def test_the_harness_has_few_loose_modules() -> None:  # DESIGN: each module in its room
    loose = sorted(
        p.name
        for p in (ROOT / "harness").glob("*.py")
        if p.name not in ("__init__.py", "__main__.py")
    )
    assert loose == ["events.py"], loose


def test_runner_imports_the_harness_only_through_its_public_face() -> None:  # DESIGN
    wrong = {
        f"{path.relative_to(ROOT)}: {module}"
        for path in _python_files("runner")
        for module in imported_modules(path)
        if module.split(".")[0] == "harness" and module not in PUBLIC
    }
    assert not wrong, (
        "the runner imports harness internals; export what it needs from a face "
        f"(harness.proxy's __all__) instead: {sorted(wrong)}"
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
    import harness.report

    for face in (harness.proxy, harness.report):
        for name in face.__all__:
            assert getattr(face, name) is not None, name

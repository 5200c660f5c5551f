"""The house (DESIGN, issues 20 and 33): rooms for the harness and for the runner, data flowing
one way, no circles.

Each package is a stack of rooms; a module may import its own room or a room below it, never
one above or beside it. The runner imports the harness only through its faces. The import
graph of each package has no circle, lazy imports inside functions included, and imports
under `if TYPE_CHECKING:` too: a circle that only the type checker walks is still two modules
that cannot be read, changed or tested one without the other.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.imports import imported_modules

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
    "harness.otel": 5,  # I3: a session's spans from its events, exported through the SDK
    "harness.proxy": 6,  # the router and its entry points
    "harness.benchmark": 7,  # the self-test and its simulated backend
    "harness.cassette": 7,  # U2: record a real session, replay it (uses the proxy's parts)
    "harness.clients": 7,  # issue 38: a client's own MCP configuration, wrapped and unwrapped
    "harness.demo": 8,  # the demo server
    "harness.testing": 8,  # I2: the pytest plugin (fixtures, marker, assertions, cassettes)
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
    "harness.clients",  # `agent-harness wrap` (issue 38)
    "harness.otel",  # I3: the runner's spans of a run
    "harness.base.redact",  # V3: the text redaction the store and the cassettes share
    "harness.base",  # files and text (below)
    "harness.base.errors",  # the one exception tree
    "harness.base.jsonutil",  # exact JSON (big integers, decimals), shared by report and store
    "harness.base.outfile",  # V1: every output file through the one writer
    "harness.base.infile",  # V4: every input file through the one bounded reader
    "harness.base.textsafe",  # V6: foreign text escaped for a terminal or Markdown
}

# Rooms of the runner, bottom up, as for the harness (issue 33).
RUNNER_RANKS = {
    "runner": 0,  # the package itself: litellm's cost map read offline
    "runner.exits": 0,  # exit codes, one-line errors and status lines
    "runner.models": 1,  # the agent loop, model calls, scripted models, endpoint, local model
    "runner.upstreams": 1,  # the built-in reference upstreams
    "runner.processes": 1,  # the fork server and its client, folders named after a process
    "runner.experiment": 2,  # YAML -> ExperimentSpec -> the matrix of cells; a run's record
    "runner.honesty": 2,  # M1: did the agent tell its user the truth
    "runner.store": 3,  # the DuckDB run store and its redaction
    "runner.analysis": 4,  # stored runs -> rates, intervals, agreement, attribution, regression
    "runner.execute": 5,  # the engines: one run, the sweep, worker processes, Ray, an experiment
    "runner.html": 5,  # the static reports
    "runner.cli": 6,  # `agent-harness`: parses the flags and calls an engine
    "runner.entry": 7,  # the console script's first module
    "runner.forkentry": 8,  # the fork server's own process, which forks the console script
}
# The runner's modules that stand loose at its root, each its own room (besides __init__.py).
RUNNER_LOOSE = ["entry.py", "exits.py", "forkentry.py"]


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _python_files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def room_of(module: str, ranks: dict[str, int] = RANKS) -> str:
    """The room a module lives in: the longest prefix in `ranks` that names it."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in ranks:
            return prefix
    raise AssertionError(f"{module} lives in no room; add its room to the ranks")


def _graph(package: str, type_checking: bool = False) -> dict[str, set[str]]:
    """Each module of `package` -> the modules of `package` it imports at run time (and, with
    `type_checking`, for the type checker)."""
    graph: dict[str, set[str]] = {}
    for path in _python_files(package):
        name = _module_name(path)
        imports = imported_modules(path, type_checking=type_checking)
        graph[name] = {m for m in imports if m.split(".")[0] == package}
    return graph


def _harness_graph(type_checking: bool = False) -> dict[str, set[str]]:
    return _graph("harness", type_checking)


def imports_up_or_sideways(graph: dict[str, set[str]], ranks: dict[str, int]) -> list[str]:
    """Every import of a room that is neither the importer's own nor below it."""
    wrong = []
    for module, imports in graph.items():
        room = room_of(module, ranks)
        for target in imports:
            other = room_of(target, ranks)
            if other == room or ranks[other] < ranks[room]:
                continue
            wrong.append(f"{module} ({room}) -> {target} ({other})")
    return sorted(wrong)


def test_every_harness_module_lives_in_a_room_and_imports_only_downwards() -> None:  # DESIGN
    wrong = imports_up_or_sideways(_harness_graph(), RANKS)
    assert not wrong, "imports that run up or sideways:\n" + "\n".join(wrong)


def test_the_harness_import_graph_has_no_circle() -> None:  # DESIGN
    # Imports for the type checker count too (issue 33: the proxy's mixins typed `self: Proxy`
    # imported the router back under TYPE_CHECKING, a circle this test did not see).
    circles = import_circles(_harness_graph(type_checking=True))
    assert not circles, f"import circles: {circles}"


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import graph's circles (strongly connected parts of more than one module)."""
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
    return circles


def test_each_room_says_in_its_face_what_it_holds() -> None:  # DESIGN
    for room in [*RANKS, *RUNNER_RANKS]:
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


def test_every_runner_module_lives_in_a_room_and_imports_only_downwards() -> None:  # DESIGN
    # Issue 33: no room of the runner imports one above or beside it; the command line
    # (runner/cli/) only parses and calls, the engines live below it in runner/execute/.
    wrong = imports_up_or_sideways(_graph("runner"), RUNNER_RANKS)
    assert not wrong, "imports that run up or sideways:\n" + "\n".join(wrong)


def test_the_runner_import_graph_has_no_circle() -> None:  # DESIGN, issue 33
    circles = import_circles(_graph("runner", type_checking=True))
    assert not circles, f"import circles: {circles}"


def test_the_command_line_loads_no_engine_before_its_command_runs() -> None:  # issue 33
    # runner/cli/ parses the flags and calls: an engine (runner/execute/) is imported inside
    # the command that runs it, so every other command starts without it.
    wrong = sorted(
        f"{path.relative_to(ROOT)}: {module}"
        for path in _python_files("runner/cli")
        for module in imported_modules(path, at_load=True)
        if module.split(".")[0] == "runner" and room_of(module, RUNNER_RANKS) == "runner.execute"
    )
    assert not wrong, wrong


def test_the_runner_has_few_loose_modules() -> None:  # DESIGN, issue 33: each module in its room
    loose = sorted(p.name for p in (ROOT / "runner").glob("*.py") if p.name != "__init__.py")
    assert loose == RUNNER_LOOSE, loose
    assert {f"runner.{name[:-3]}" for name in loose} <= set(RUNNER_RANKS)


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

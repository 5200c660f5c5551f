"""Reading a spec file: YAML with positions, validation, prompt and patch files, checks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from pydantic_core import ErrorDetails
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from harness.base.errors import InputFileError
from harness.base.infile import MB, read_text
from runner.experiment._base import SpecError
from runner.experiment._checks import Problem, check
from runner.experiment._experiment import ExperimentSpec
from runner.experiment._locate import Loc, child, dotted, fields_at, locate, message, yaml_type

MAX_SHOWN = 20  # problems listed in one SpecError; the rest are counted
_MERGE_TAG = "tag:yaml.org,2002:merge"

Located = tuple[int, str, str]  # line, field path, message


MAX_SPEC_BYTES = 4 * MB  # V4: a spec, prompts inlined, is far smaller
MAX_TEXT_FILE_BYTES = 4 * MB  # a prompt or patch file
# V13: an alias (`params: *common`, `<<: *base`) may share a value, but what all aliases of a
# spec stand for together is at most this many YAML nodes (a 629-byte alias bomb stands for
# hundreds of millions). Each alias counts the nodes below its anchor; a recursive one is refused.
MAX_ALIAS_NODES = 10_000


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader with the expansion of aliases counted while the document is
    composed, before any value is built (V13)."""

    def __init__(self, text: str, shown: str) -> None:
        super().__init__(text)
        self.shown = shown
        self.expanded = 0
        self.sizes: dict[int, int] = {}  # id(node) -> nodes at and below it, aliases expanded
        self.open_anchors: set[str] = set()  # anchors of collections still being composed

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            target = self.anchors.get(event.anchor)
            if target is not None:  # an undefined alias is the composer's own error
                self._count(event.anchor, target, event.start_mark.line + 1)
        return super().compose_node(parent, index)

    def compose_sequence_node(self, anchor: str | None) -> Node:
        return self._composing(anchor, super().compose_sequence_node)

    def compose_mapping_node(self, anchor: str | None) -> Node:
        return self._composing(anchor, super().compose_mapping_node)

    def _composing(self, anchor: str | None, compose: Any) -> Node:
        if anchor is None:
            return compose(anchor)
        self.open_anchors.add(anchor)
        try:
            return compose(anchor)
        finally:
            self.open_anchors.discard(anchor)

    def _count(self, anchor: str, target: Node, line: int) -> None:
        if anchor in self.open_anchors:
            raise SpecError(
                f"{self.shown}:{line}: the alias *{anchor} stands inside the value it names "
                "(a recursive alias): write the value out"
            )
        self.expanded += self._size(target)
        if self.expanded > MAX_ALIAS_NODES:
            raise SpecError(
                f"{self.shown}:{line}: YAML aliases expand to more than {MAX_ALIAS_NODES:,} "
                "values (an alias bomb?): write the values out, or share fewer"
            )

    def _size(self, root: Node) -> int:
        """Nodes at and below `root` with aliases expanded; linear time (memoised)."""
        sizes = self.sizes
        stack: list[tuple[Node, bool]] = [(root, False)]
        while stack:
            node, children_done = stack.pop()
            if id(node) in sizes:
                continue
            if isinstance(node, SequenceNode):
                children = list(node.value)
            elif isinstance(node, MappingNode):
                children = [part for pair in node.value for part in pair]
            else:
                children = []
            if children_done:
                sizes[id(node)] = 1 + sum(sizes[id(child)] for child in children)
            else:
                stack.append((node, True))
                stack.extend((child, False) for child in children if id(child) not in sizes)
        return sizes[id(root)]


def read_spec_text(path: Path) -> str:
    """The spec file's text, read by the one bounded reader (V4); SpecError on failure."""
    try:
        return read_text(path, "spec file", MAX_SPEC_BYTES)
    except InputFileError as exc:
        raise SpecError(str(exc)) from None


def _parse(path: Path, shown: str, text: str | None) -> tuple[Node, Any, list[Located]]:
    text = read_spec_text(path) if text is None else text
    try:
        loader = _BoundedLoader(text, shown)
    except yaml.reader.ReaderError as exc:  # a control character: the reader checks at once
        line = text.count("\n", 0, exc.position) + 1
        raise SpecError(
            f"{shown}:{line}: control character U+{exc.character:04X} is not allowed in YAML "
            "(inside double quotes, write it as an escape such as \\t)"
        ) from None
    try:
        root = loader.get_single_node()
        if root is None:
            raise SpecError(f"{shown}:1: the spec is empty")
        # Before constructing: building the dict inlines merge keys (<<) into the nodes.
        duplicates = list(_duplicate_keys(root))
        data = loader.construct_document(root)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{shown}:{mark.line + 1}" if mark else shown
        detail = "; ".join(str(x) for x in (exc.problem, exc.context) if x)
        syntax = isinstance(exc, yaml.scanner.ScannerError | yaml.parser.ParserError)
        raise SpecError(f"{where}: YAML {'syntax ' if syntax else ''}error: {detail}") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{shown}: YAML error: {exc}") from None
    except RecursionError:
        raise SpecError(f"{shown}: nested too deeply") from None
    finally:
        loader.dispose()
    return root, data, duplicates


def _duplicate_keys(root: Node) -> Iterator[Located]:
    # PyYAML silently keeps the last of two equal keys: a pasted block would override quietly.
    stack: list[tuple[Node, Loc]] = [(root, ())]
    seen: set[int] = set()
    while stack:
        node, parts = stack.pop()
        if id(node) in seen:  # aliases can share or even nest nodes
            continue
        seen.add(id(node))
        if isinstance(node, MappingNode):
            first: dict[str, int] = {}
            for key, value in node.value:
                name = key.value if isinstance(key, ScalarNode) else "?"
                line = key.start_mark.line + 1
                if key.tag != _MERGE_TAG and name in first:
                    where = dotted((*parts, name))
                    yield line, where, f"duplicate key (first on line {first[name]})"
                first.setdefault(name, line)
                stack.append((value, (*parts, name)))
        elif isinstance(node, SequenceNode):
            stack.extend((item, (*parts, i)) for i, item in enumerate(node.value))


def _yaml_loc(root: Node, loc: Loc) -> Loc:
    """The location as the YAML spells it: `conversation` (single or list) for `conversations`."""
    key, node = child(root, "conversation")
    if loc[:1] != ("conversations",) or node is None:
        return loc
    rest = loc[1:]
    if isinstance(node, MappingNode) and rest[:1] == (0,):
        rest = rest[1:]
    return ("conversation", *rest)


def _alias(data: dict[str, Any]) -> Problem | None:
    """`conversation: {...}` or `conversation: [...]` -> `conversations: [...]`."""
    if "conversation" not in data:
        return None
    value = data.pop("conversation")
    if "conversations" in data:
        return ("conversation",), "give `conversations` or `conversation`, not both"
    data["conversations"] = [value] if isinstance(value, dict) else value
    return None


def _read(base: Path, file: str, loc: Loc, what: str) -> tuple[str | None, Problem | None]:
    target = base / file
    try:
        return read_text(target, f"{what} file", MAX_TEXT_FILE_BYTES), None
    except InputFileError as exc:  # V4: missing, not a regular file, too large, not UTF-8
        return None, (loc, str(exc))


def _with_files(spec: ExperimentSpec, base: Path) -> tuple[ExperimentSpec, list[Problem]]:
    """The spec with every `file` read into `text` (files are relative to the spec's folder)."""
    problems: list[Problem] = []
    updated: dict[str, tuple[Any, ...]] = {}
    for key, what in (("prompts", "prompt"), ("patches", "patch")):
        items = []
        for i, item in enumerate(getattr(spec, key)):
            if item.file is not None:
                text, problem = _read(base, item.file, (key, i, "file"), what)
                if text is not None and what == "patch" and not text.strip():
                    problem = ((key, i, "file"), f"patch file is empty: {base / item.file}")
                if problem is not None:
                    problems.append(problem)
                    continue
                item = item.model_copy(update={"text": text})
            items.append(item)
        updated[key] = tuple(items)
    return spec.model_copy(update=updated), problems


def _validate(data: dict[str, Any], base: Path) -> tuple[ExperimentSpec | None, list[Problem]]:
    """The spec, or the problems in the order they are found: schema, files, then checks."""
    problems = [p for p in [_alias(data)] if p is not None]
    try:
        spec = ExperimentSpec.model_validate(data)
    except ValidationError as exc:
        for error in _meaningful(exc.errors(include_url=False)):
            loc, parent = error["loc"], error["loc"][:-1]
            known = fields_at(ExperimentSpec, parent) + (["conversation"] if not parent else [])
            # A non-text key (YAML reads `1:` or `on:` as a number or boolean) has no path.
            problems.append(
                (parent if error["type"] == "invalid_key" else loc, message(error, known))
            )
        return None, problems
    if problems:
        return None, problems
    spec, problems = _with_files(spec, base)
    problems = problems or check(spec)
    return (None, problems) if problems else (spec, [])


def _meaningful(errors: list[ErrorDetails]) -> list[ErrorDetails]:
    """Without "list too short" when its items failed: pydantic counts only the valid ones."""

    def below(error: ErrorDetails) -> bool:
        loc = error["loc"]
        return any(len(o["loc"]) > len(loc) and o["loc"][: len(loc)] == loc for o in errors)

    return [e for e in errors if not (e["type"] == "too_short" and below(e))]


def _render(shown: str, problems: list[Located]) -> str:
    lines = list(
        dict.fromkeys(
            f"{shown}:{line}: {path + ': ' if path else ''}{msg}"
            for line, path, msg in sorted(problems, key=lambda p: p[0])
        )
    )
    if len(lines) > MAX_SHOWN:
        lines = [*lines[:MAX_SHOWN], f"... and {len(lines) - MAX_SHOWN} more problems"]
    return "\n".join(lines)


def load_spec(path: str | Path, text: str | None = None) -> ExperimentSpec:
    """Read, validate and freeze an experiment spec; SpecError with one line per problem.
    `text`: the file's content when the caller has read it already."""
    path = Path(path)
    shown = str(path)
    root, data, located = _parse(path, shown, text)
    if not isinstance(data, dict):
        raise SpecError(
            f"{shown}:{root.start_mark.line + 1}: the spec must be a mapping "
            f"(name, models, prompts, ...), got {yaml_type(data)}"
        )
    spec, problems = _validate({"name": path.stem, **data}, path.parent)
    located += [(*locate(root, _yaml_loc(root, loc)), msg) for loc, msg in problems]
    if spec is None or located:
        raise SpecError(_render(shown, located))
    spec._folder = path.parent.absolute()
    return spec

"""JSON with comments, read with the place of every value: a span-preserving editor's parser.

MCP client configurations are JSON (Claude Desktop, Cursor, Claude Code) or JSON with
comments and trailing commas (VS Code's `mcp.json` and `settings.json`). `wrap` changes a few
values in such a file and must leave every other byte as it was: key order, indentation,
comments. Python's json module gives values without places, so this parser reads the text
into nodes that keep the span of each value and of each object member; an edit replaces a
span and nothing else.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from json.decoder import scanstring
from typing import Any

_WS = re.compile(r"[ \t\n\r\ufeff]*")  # a byte order mark as white space
_INDENT = re.compile(r"[ \t]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_LITERALS = {"true": True, "false": False, "null": None}
MAX_DEPTH = 200  # a client configuration nests a few levels; deeper is not one


class JsoncError(ValueError):
    """Text that is not JSON (with comments); the message names line and column."""


@dataclass
class Member:
    """One member of an object: where its key starts and its value."""

    key: str
    start: int  # the key's opening quote
    value: Node


@dataclass
class Node:
    """One JSON value and where it stands in the text (`text[start:end]`)."""

    start: int
    end: int
    kind: str  # object, array, string, number, literal
    value: Any = None  # strings, numbers, literals: the Python value
    members: list[Member] = field(default_factory=list)  # objects
    items: list[Node] = field(default_factory=list)  # arrays
    comments: bool = False  # a comment stands somewhere inside its span

    def get(self, key: str) -> Node | None:
        """An object's member value by key (None when absent or not an object)."""
        for member in self.members:
            if member.key == key:
                return member.value
        return None

    def plain(self) -> Any:
        """The value as plain Python data."""
        if self.kind == "object":
            return {m.key: m.value.plain() for m in self.members}
        if self.kind == "array":
            return [item.plain() for item in self.items]
        return self.value


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.comment_at: list[int] = []  # where each comment starts

    def fail(self, at: int, message: str) -> JsoncError:
        line = self.text.count("\n", 0, at) + 1
        column = at - (self.text.rfind("\n", 0, at) + 1) + 1
        return JsoncError(f"line {line}, column {column}: {message}")

    def skip(self, i: int) -> int:
        """Past white space and comments."""
        text = self.text
        while True:
            i = _WS.match(text, i).end()  # type: ignore[union-attr]
            if text.startswith("//", i):
                self.comment_at.append(i)
                newline = text.find("\n", i)
                i = len(text) if newline < 0 else newline + 1
            elif text.startswith("/*", i):
                self.comment_at.append(i)
                close = text.find("*/", i + 2)
                if close < 0:
                    raise self.fail(i, "a /* comment is never closed")
                i = close + 2
            else:
                return i

    def value(self, i: int, depth: int) -> Node:
        if depth > MAX_DEPTH:
            raise self.fail(i, f"nested deeper than {MAX_DEPTH} levels")
        if i >= len(self.text):
            raise self.fail(i, "a value was expected, the text ended")
        first = self.text[i]
        if first == "{":
            return self.object(i, depth)
        if first == "[":
            return self.array(i, depth)
        if first == '"':
            try:
                value, end = scanstring(self.text, i + 1)
            except json.JSONDecodeError as exc:
                raise self.fail(exc.pos, exc.msg) from None
            return Node(i, end, "string", value)
        number = _NUMBER.match(self.text, i)
        if number:
            return Node(i, number.end(), "number", json.loads(number.group()))
        for word, value in _LITERALS.items():
            if self.text.startswith(word, i):
                return Node(i, i + len(word), "literal", value)
        raise self.fail(i, f"a value was expected, found {self.text[i]!r}")

    def object(self, start: int, depth: int) -> Node:
        node = Node(start, start, "object")
        i = self.skip(start + 1)
        while not self.text.startswith("}", i):
            if not self.text.startswith('"', i):
                raise self.fail(i, "a member name in double quotes was expected")
            key_node = self.value(i, depth + 1)
            if any(m.key == key_node.value for m in node.members):
                raise self.fail(i, f"the member {key_node.value!r} is given twice")
            i = self.skip(key_node.end)
            if not self.text.startswith(":", i):
                raise self.fail(i, "':' was expected")
            value = self.value(self.skip(i + 1), depth + 1)
            node.members.append(Member(key_node.value, key_node.start, value))
            i = self.after_item(value.end, "}")
        node.end = i + 1
        return node

    def array(self, start: int, depth: int) -> Node:
        node = Node(start, start, "array")
        i = self.skip(start + 1)
        while not self.text.startswith("]", i):
            item = self.value(i, depth + 1)
            node.items.append(item)
            i = self.after_item(item.end, "]")
        node.end = i + 1
        return node

    def after_item(self, end: int, close: str) -> int:
        """Past the comma after an item (a trailing one too), at the next item or `close`."""
        i = self.skip(end)
        if self.text.startswith(",", i):
            return self.skip(i + 1)
        if self.text.startswith(close, i):
            return i
        raise self.fail(i, f"',' or '{close}' was expected")


def parse(text: str) -> Node:
    """The document's top value with the spans of everything in it; JsoncError (one line with
    line and column) when it is not JSON, comments and trailing commas allowed."""
    parser = _Parser(text)
    node = parser.value(parser.skip(0), 0)
    rest = parser.skip(node.end)
    if rest != len(text):
        raise parser.fail(rest, "text after the end of the document")
    _mark_comments(node, sorted(parser.comment_at))
    return node


def _mark_comments(node: Node, at: list[int]) -> None:
    """Mark every node whose span holds a comment."""
    from bisect import bisect_left

    def walk(n: Node) -> None:
        k = bisect_left(at, n.start)
        n.comments = k < len(at) and at[k] < n.end
        if n.comments:
            for child in (*(m.value for m in n.members), *n.items):
                walk(child)

    walk(node)


def line_indent(text: str, at: int) -> str:
    """The white space that begins the line `at` stands on."""
    begin = text.rfind("\n", 0, at) + 1
    return _INDENT.match(text, begin).group()  # type: ignore[union-attr]


def render(value: Any, indent: str, unit: str) -> str:
    """`value` as JSON laid out like the file: nested lines indented by `unit` below `indent`
    (the indentation of the line the value starts on); non-ASCII text kept as it is."""
    if not unit:  # a file on one line: the value on one line too
        return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    text = json.dumps(value, ensure_ascii=False, indent=unit)
    return text.replace("\n", "\n" + indent)


def indent_unit(text: str, node: Node) -> str:
    """The indentation step the file uses inside `node` (an object or array laid out on
    several lines), or "" when it stands on one line."""
    children = [m.start for m in node.members] or [i.start for i in node.items]
    if not children or "\n" not in text[node.start : children[0]]:
        return ""
    inner, outer = line_indent(text, children[0]), line_indent(text, node.start)
    return inner[len(outer) :] if inner.startswith(outer) and len(inner) > len(outer) else "  "

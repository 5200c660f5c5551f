"""Tool classification (C1-C7) and key fields (K1): pure functions of the tool list and flags."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from harness.errors import ConfigError
from harness.textsafe import terminal

ToolClass = Literal["write", "read", "unclassified"]

# C4: the default write patterns, matched against the snake_case form of a name.
DEFAULT_WRITE_PATTERNS: tuple[str, ...] = (
    "write*", "create_*", "send_*", "submit_*", "post_*", "update_*", "insert_*", "book_*",
    "pay_*", "charge_*", "cancel_*", "delete_*", "confirm_*", "place_*", "add_*", "register_*",
    "schedule_*", "transfer_*", "refund_*", "reserve_*", "issue_*", "remove_*", "withdraw_*",
    "deposit_*", "purchase_*", "approve_*",
)  # fmt: skip

# C5: default read prefixes; each must be the whole first word of the name.
DEFAULT_READ_PREFIXES: frozenset[str] = frozenset(
    ("get", "list", "search", "find", "read", "fetch", "query", "lookup", "check", "describe",
     "show", "view", "count", "is", "has")
)  # fmt: skip

DEFAULT_KEY_FIELDS: tuple[str, ...] = ("idempotency_key",)

REASON_EXPLICIT_WRITE = "explicit --write-tools"
REASON_EXPLICIT_READ = "explicit --read-tools"
REASON_DEFAULT_WRITE = "default write pattern"
REASON_WRITE_PATTERN = "--write-tools pattern"
REASON_READ_PREFIX = "read prefix"
REASON_NONE = "no annotation, no pattern match"
REASON_NOT_LISTED = "not listed by the upstream"


def glob_match(pattern: str, name: str) -> bool:
    """Case-sensitive match of a glob whose only wildcard is `*`, in linear time (C2).

    The pattern splits at `*` into literal pieces: the first must start the name, the last must
    end it, and the ones between are found left to right, each at its earliest place. Taking the
    earliest place is always safe when `*` is the only wildcard, so no backtracking is needed.
    """
    pieces = pattern.split("*")
    if len(pieces) == 1:
        return name == pattern
    head, *middle, tail = pieces
    if len(name) < len(head) + len(tail) or not name.startswith(head) or not name.endswith(tail):
        return False
    position, end = len(head), len(name) - len(tail)
    for piece in middle:
        if not piece:
            continue
        found = name.find(piece, position, end)
        if found < 0:
            return False
        position = found + len(piece)
    return True


_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def snake_case(name: str) -> str:
    """`createAppointment` -> `create_appointment`, `getHTTPStatus` -> `get_http_status`."""
    return _CAMEL_BOUNDARY.sub("_", name).replace("-", "_").lower()


def first_word(name: str) -> str:
    """The first word of a tool name in snake or camel case (`isOpen` -> `is`)."""
    return snake_case(name).lstrip("_").split("_", 1)[0]


def normalise_field_name(name: str) -> str:
    """K1: key fields match ignoring case, `-` and `_`."""
    return name.replace("-", "").replace("_", "").lower()


@dataclass(frozen=True)
class ClassifierConfig:
    """The classification flags, validated once at the edge."""

    write_globs: tuple[str, ...] | None = None  # --write-tools: replaces the default patterns
    read_globs: tuple[str, ...] = ()  # --read-tools: added to the default prefixes
    key_fields: tuple[str, ...] = DEFAULT_KEY_FIELDS

    @property
    def normalised_key_fields(self) -> frozenset[str]:
        return frozenset(normalise_field_name(k) for k in self.key_fields)


@dataclass(frozen=True)
class ToolInfo:
    """One upstream tool as the harness sees it."""

    name: str
    tool_class: ToolClass
    reason: str
    key_field: str | None = None  # the input-schema property that carries an idempotency key

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "class": self.tool_class,
            "reason": self.reason,
            "keyField": self.key_field,
        }


@dataclass
class Classification:
    """The classified tool list (C7's `toolClassification`)."""

    tools: dict[str, ToolInfo] = field(default_factory=dict)

    def get(self, name: str) -> ToolInfo:
        """C6: a tool the upstream did not list is always unclassified."""
        info = self.tools.get(name)
        if info is None:
            return ToolInfo(name, "unclassified", REASON_NOT_LISTED)
        return info

    def unclassified(self) -> list[str]:
        return [t.name for t in self.tools.values() if t.tool_class == "unclassified"]

    def as_json(self) -> list[dict[str, Any]]:
        return [t.as_json() for t in self.tools.values()]


def _annotation_class(annotations: Mapping[str, Any] | None) -> tuple[ToolClass, str] | None:
    if not annotations:
        return None
    read_only = annotations.get("readOnlyHint")
    if read_only is True:
        return "read", "annotation readOnlyHint=true"
    if read_only is False:
        return "write", "annotation readOnlyHint=false"
    if annotations.get("destructiveHint") is True:
        return "write", "annotation destructiveHint=true"
    return None


def classify_tool(tool: Mapping[str, Any], config: ClassifierConfig) -> ToolInfo:
    """C1-C5 and K1 for one tool as listed by the upstream (a `tools/list` entry)."""
    name = str(tool.get("name", ""))
    key_field = find_key_field(tool.get("inputSchema"), config.normalised_key_fields)
    explicit_write = config.write_globs is not None and any(
        glob_match(g, name) for g in config.write_globs
    )
    explicit_read = any(glob_match(g, name) for g in config.read_globs)
    if explicit_write and explicit_read:
        raise ConfigError(
            f'tool "{name}" matches both --write-tools and --read-tools; make the lists disjoint'
        )
    if explicit_write:
        return ToolInfo(name, "write", REASON_EXPLICIT_WRITE, key_field)
    if explicit_read:
        return ToolInfo(name, "read", REASON_EXPLICIT_READ, key_field)
    by_annotation = _annotation_class(tool.get("annotations"))
    if by_annotation is not None:
        return ToolInfo(name, by_annotation[0], by_annotation[1], key_field)
    if config.write_globs is None:
        snake = snake_case(name)
        if any(glob_match(p, snake) for p in DEFAULT_WRITE_PATTERNS):
            return ToolInfo(name, "write", REASON_DEFAULT_WRITE, key_field)
    if first_word(name) in DEFAULT_READ_PREFIXES:
        return ToolInfo(name, "read", REASON_READ_PREFIX, key_field)
    return ToolInfo(name, "unclassified", REASON_NONE, key_field)


def find_key_field(input_schema: Any, normalised_keys: frozenset[str]) -> str | None:
    """K1: the first top-level schema property whose name is a key field."""
    if not isinstance(input_schema, Mapping):
        return None
    properties = input_schema.get("properties")
    if not isinstance(properties, Mapping):
        return None
    for prop in properties:
        if isinstance(prop, str) and normalise_field_name(prop) in normalised_keys:
            return prop
    return None


def classify_tools(tools: Iterable[Mapping[str, Any]], config: ClassifierConfig) -> Classification:
    """Classify every listed tool; raise ConfigError for a tool in both explicit lists (C2)."""
    result = Classification()
    for tool in tools:
        info = classify_tool(tool, config)
        result.tools[info.name] = info
    return result


def key_of(arguments: Any, normalised_keys: frozenset[str]) -> tuple[str | None, Any]:
    """K1: (argument name, value) of the first top-level key field present, else (None, None)."""
    if isinstance(arguments, Mapping):
        for name, value in arguments.items():
            if normalise_field_name(name) in normalised_keys:
                return name, value
    return None, None


def startup_lines(classification: Classification, key_fields: Sequence[str]) -> list[str]:
    """C7: what the proxy prints to stderr about the upstream's tools, one line each."""
    tools = list(classification.tools.values())
    names = {t.name: terminal(t.name) for t in tools}  # V6: the upstream chose these names
    width = max(map(len, names.values()), default=0)
    lines = [f"Upstream tools ({len(tools)}):"]
    for t in tools:
        lines.append(f"  {t.tool_class:<12} {names[t.name]:<{width}}  ({t.reason})")
    for t in tools:
        if t.tool_class == "unclassified":
            lines.append(
                f'WARNING: tool "{t.name}" could not be classified as read or write: it is '
                "passed through, never triggers a scenario and is not scored. "
                "Use --write-tools or --read-tools to classify it."
            )
    with_key = [f"{t.name} ({t.key_field})" for t in tools if t.key_field]
    fields = ", ".join(key_fields)
    if with_key:
        lines.append(f"Tools with a key field [{fields}]: " + ", ".join(with_key))
    else:
        lines.append(f"No tool takes a key field [{fields}] (set --key-fields if yours differ).")
    return lines

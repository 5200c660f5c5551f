"""Idempotency-key fields (K1, K5): which argument names carry a key, at any depth.

A name matches a key field ignoring case, `-` and `_`, and with or without an `x-` prefix
(`X-Idempotency-Key`, `idempotencyKey`, `x_idempotency_key` all match `idempotency_key`). By
default the common spellings below are recognised; `--key-fields` replaces them (the entry
`default` brings them back) and takes per-tool entries `TOOL:FIELD` (TOOL a glob).

Sources for the default spellings (docs/decisions.md lists them with links): the IETF draft
"The Idempotency-Key HTTP Header Field" and Stripe, Adyen, GoCardless, Square (idempotency key);
AWS EC2 and most AWS APIs (`ClientToken`), AWS ACM (`IdempotencyToken`), AWS CloudFormation and
Secrets Manager (`ClientRequestToken`); AWS SQS FIFO (`MessageDeduplicationId`). Request ids
(`request_id`, `X-Request-ID`) are not keys by default: they often name the resource or only
trace a request.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.base.errors import UsageError
from harness.operations.names import tool_glob_match

DEFAULT_KEY_SPELLINGS: tuple[str, ...] = (
    "idempotency_key",
    "idempotency_token",
    "idempotency_id",
    "client_token",
    "client_request_token",
    "deduplication_id",
    "message_deduplication_id",
    "deduplication_key",
    "dedup_key",
)
DEFAULT_ENTRY = "default"


def normalise_field_name(name: str) -> str:
    """K1: key fields match ignoring case, `-` and `_`; K5: an `x-` prefix is ignored too."""
    text = name.lower()
    if text.startswith(("x-", "x_")):
        text = text[2:]
    return text.replace("-", "").replace("_", "")


def _matches(name: str, names: frozenset[str]) -> bool:
    normal = normalise_field_name(name)
    # `xIdempotencyKey` has no separator after its x: try it without the x as well.
    return normal in names or (normal[:1] == "x" and normal[1:] in names)


@dataclass(frozen=True)
class KeySpec:
    """The key fields of a session: names for every tool, plus per-tool names (K5)."""

    names: frozenset[str]
    per_tool: tuple[tuple[str, str], ...] = ()  # (tool glob, normalised field name)
    _cache: dict[str, frozenset[str]] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def parse(cls, entries: Iterable[str]) -> KeySpec:
        """`--key-fields` entries: FIELD, TOOL:FIELD or `default` (the built-in spellings)."""
        names: set[str] = set()
        per_tool: list[tuple[str, str]] = []
        for entry in entries:
            if entry == DEFAULT_ENTRY:
                names.update(normalise_field_name(n) for n in DEFAULT_KEY_SPELLINGS)
                continue
            tool, sep, name = entry.rpartition(":")
            if sep and (not tool or not name):
                raise UsageError(f"--key-fields entry {entry!r} must be FIELD or TOOL:FIELD")
            if sep:
                per_tool.append((tool, normalise_field_name(name)))
            else:
                names.add(normalise_field_name(name))
        return cls(frozenset(names), tuple(per_tool))

    def for_tool(self, tool: str) -> frozenset[str]:
        """The normalised key-field names that apply to this tool."""
        cached = self._cache.get(tool)
        if cached is not None:
            return cached

        names = self.names | {n for glob, n in self.per_tool if tool_glob_match(glob, tool)}
        if len(self._cache) < 4096:
            self._cache[tool] = names
        return names


def find_keys(value: Any, names: frozenset[str]) -> list[tuple[str, Any]]:
    """K5: every (path, value) of a key field at any depth, depth-first, without recursion."""
    found: list[tuple[str, Any]] = []
    if not names:
        return found
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, Mapping):
            children = []
            for name, child in item.items():
                sub = f"{path}.{name}" if path else str(name)
                if isinstance(name, str) and _matches(name, names):
                    found.append((sub, child))
                elif isinstance(child, (Mapping, list)):
                    children.append((child, sub))
            stack.extend(reversed(children))
        elif isinstance(item, list):
            stack.extend(
                (child, f"{path}[{i}]")
                for i, child in reversed(list(enumerate(item)))
                if isinstance(child, (Mapping, list))
            )
    return found


def strip_keys(value: Any, names: frozenset[str]) -> Any:
    """K2/K5: `value` without its key fields at any depth; `value` itself when it has none.

    Iterative, so arguments nested as deep as the parser allows cannot overflow the stack (X7).
    """
    if not names or not find_keys(value, names):
        return value
    root: list[Any] = [None]
    # (source container, destination container, slot in the destination's parent)
    stack: list[tuple[Any, Any]] = [(value, (root, 0))]
    while stack:
        item, (parent, slot) = stack.pop()
        if isinstance(item, Mapping):
            copy: dict[str, Any] = {}
            for name, child in item.items():
                if isinstance(name, str) and _matches(name, names):
                    continue
                copy[name] = child
                if isinstance(child, (Mapping, list)):
                    stack.append((child, (copy, name)))
            parent[slot] = copy
        elif isinstance(item, list):
            items = list(item)
            for i, child in enumerate(items):
                if isinstance(child, (Mapping, list)):
                    stack.append((child, (items, i)))
            parent[slot] = items
    return root[0]


def find_key_field(input_schema: Any, names: frozenset[str], max_nodes: int = 10_000) -> str | None:
    """K5: the path of the first schema property, at any depth, whose name is a key field.

    Follows nested `properties`, array `items`, `anyOf`/`oneOf`/`allOf` branches and local
    `$ref`s (`#/$defs/...`, `#/definitions/...`), each at most once.
    """
    if not isinstance(input_schema, Mapping) or not names:
        return None
    seen: set[int] = set()
    queue: deque[tuple[Any, str]] = deque([(input_schema, "")])
    visited = 0
    while queue and visited < max_nodes:
        schema, path = queue.popleft()
        visited += 1
        schema = resolve_ref(input_schema, schema)
        if not isinstance(schema, Mapping) or id(schema) in seen:
            continue
        seen.add(id(schema))
        properties = schema.get("properties")
        if isinstance(properties, Mapping):
            for name, sub in properties.items():
                sub_path = f"{path}.{name}" if path else str(name)
                if isinstance(name, str) and _matches(name, names):
                    return sub_path
                queue.append((sub, sub_path))
        items = schema.get("items")
        if isinstance(items, Mapping):
            queue.append((items, f"{path}[]"))
        for combinator in ("anyOf", "oneOf", "allOf"):
            branches = schema.get(combinator)
            if isinstance(branches, list):
                queue.extend((branch, path) for branch in branches)
    return None


def resolve_ref(root: Mapping[str, Any], schema: Any, limit: int = 16) -> Any:
    """A local `$ref` (`#/...`) resolved against the root schema; other schemas unchanged."""
    for _ in range(limit):
        ref = schema.get("$ref") if isinstance(schema, Mapping) else None
        if not isinstance(ref, str) or not ref.startswith("#"):
            return schema
        target: Any = root
        for part in filter(None, ref[1:].split("/")):
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part) if isinstance(target, Mapping) else None
        schema = target
    return None

"""Idempotency-key fields (K1, K5): which argument names carry a key, at any depth.

A name matches a key field ignoring case, `-` and `_`, and with or without an `x-` prefix
(`X-Idempotency-Key`, `idempotencyKey`, `x_idempotency_key` all match `idempotency_key`). By
default the common spellings below are recognised; `--key-fields` replaces them (the entry
`default` brings them back) and takes per-tool entries `TOOL:FIELD` (TOOL a glob).

Sources for the default spellings (this is their one list; docs/decisions.md, "Key fields and
identity", states the choice): the IETF draft "The Idempotency-Key HTTP Header Field" and
Stripe, Adyen, GoCardless, Square (idempotency key); AWS EC2 and most AWS APIs
(`ClientToken`), AWS ACM (`IdempotencyToken`), AWS CloudFormation and Secrets Manager
(`ClientRequestToken`); AWS SQS FIFO (`MessageDeduplicationId`); client order ids of trading
APIs (Alpaca, Coinbase `client_order_id`; Binance `newClientOrderId`, E3).
Request ids (`request_id`, `X-Request-ID`) are not keys by default: they often name the
resource or only trace a request.

E3: where a tool's input schema is known, the names of a free-form map (an object whose schema
gives `additionalProperties` or `patternProperties` and declares no properties) are data,
never keys (`set_env_vars(variables={"CLIENT_TOKEN": ...})`); every other object keeps K5's rule
(`KeyPlan`): declared properties and names the agent added alike, since an undeclared
`X-Idempotency-Key` does not make another operation. A key field whose value is `null` or `""`
is no key (`usable_key`), though it is still left out of the operation.
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
    # E3: client order ids, which trading APIs deduplicate by.
    "client_order_id",
    "new_client_order_id",
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


class KeyPlan:
    """E3: where key fields can be in one object of a tool's arguments, as its schema says.

    An object is a *record* (ANYWHERE included: K5's rule) or a free-form *map*. In a record
    any name in a key spelling is a key field, declared or not (an agent that adds an
    undeclared `X-Idempotency-Key` does not make another operation), and the value of a
    declared property follows its own plan (`children`; any other value: ANYWHERE). In a map
    (the schema gives `additionalProperties` or `patternProperties` and declares no
    properties: `variables: {"CLIENT_TOKEN": ...}`) the names are data, never keys; its values
    follow `values`. Only the paths that lead to a map differ from ANYWHERE; plans are built
    once per tool when its list arrives and may form cycles (a recursive schema); arguments are
    walked iteratively, so that costs nothing.
    """

    __slots__ = ("children", "is_map", "values")

    def __init__(self) -> None:
        self.is_map = False
        self.children: dict[str, KeyPlan] = {}  # a record's declared properties that lead to a map
        self.values: KeyPlan | None = None  # a map's values (None: ANYWHERE)

    def child(self, name: str) -> KeyPlan:
        """The plan of the value under `name`."""
        if self.is_map:
            return self.values if self.values is not None else ANYWHERE
        return self.children.get(name, ANYWHERE)

    def is_key(self, name: Any, names: frozenset[str]) -> bool:
        return not self.is_map and isinstance(name, str) and _matches(name, names)


ANYWHERE = KeyPlan()  # K5: a record with no map below it: any name at any depth


def find_keys(value: Any, names: frozenset[str], plan: KeyPlan = ANYWHERE) -> list[tuple[str, Any]]:
    """K5, E3: every (path, value) of a key field at a position `plan` allows, depth-first,
    without recursion. Values are returned as they are (`null` too): see `usable_key`."""
    found: list[tuple[str, Any]] = []
    if not names:
        return found
    stack: list[tuple[Any, str, KeyPlan]] = [(value, "", plan)]
    while stack:
        item, path, here = stack.pop()
        if isinstance(item, Mapping):
            children = []
            for name, child in item.items():
                sub = f"{path}.{name}" if path else str(name)
                if here.is_key(name, names):
                    found.append((sub, child))
                elif isinstance(child, (Mapping, list)):
                    children.append((child, sub, here.child(name)))
            stack.extend(reversed(children))
        elif isinstance(item, list):
            stack.extend(
                (child, f"{path}[{i}]", here)
                for i, child in reversed(list(enumerate(item)))
                if isinstance(child, (Mapping, list))
            )
    return found


def usable_key(found: list[tuple[str, Any]]) -> tuple[str | None, Any]:
    """E3: the first key field that carries a key: a value of `null` or `""` is no key."""
    for path, value in found:
        if value is not None and value != "":
            return path, value
    return None, None


def strip_keys(value: Any, names: frozenset[str], plan: KeyPlan = ANYWHERE) -> Any:
    """K2/K5/E3: `value` without its key fields (at the positions `plan` allows); `value`
    itself when it has none.

    Iterative, so arguments nested as deep as the parser allows cannot overflow the stack (X7).
    """
    if not names or not find_keys(value, names, plan):
        return value
    root: list[Any] = [None]
    # (source container, (destination's parent, slot), plan of the source)
    stack: list[tuple[Any, tuple[Any, Any], KeyPlan]] = [(value, (root, 0), plan)]
    while stack:
        item, (parent, slot), here = stack.pop()
        if isinstance(item, Mapping):
            copy: dict[str, Any] = {}
            for name, child in item.items():
                if here.is_key(name, names):
                    continue
                copy[name] = child
                if isinstance(child, (Mapping, list)):
                    stack.append((child, (copy, name), here.child(name)))
            parent[slot] = copy
        elif isinstance(item, list):
            items = list(item)
            for i, child in enumerate(items):
                if isinstance(child, (Mapping, list)):
                    stack.append((child, (items, i), here))
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


# E3: an object schema that says nothing about its names: K5's rule (any depth) applies below.
_SHAPE_WORDS = ("properties", "additionalProperties", "patternProperties", "items",
                "prefixItems", "anyOf", "oneOf", "allOf", "enum", "const")  # fmt: skip
_MAX_PLAN_DEPTH = 64


def _shapeless(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    kinds = set(kind) if isinstance(kind, list) else {kind}
    return not any(word in schema for word in _SHAPE_WORDS) and kinds <= {None, "object"}


def key_plan(input_schema: Any, names: frozenset[str], max_nodes: int = 10_000) -> KeyPlan:
    """E3: where a tool's arguments may carry key fields, from its input schema (`KeyPlan`).

    Follows nested `properties`, array `items`, `anyOf`/`oneOf`/`allOf` branches and local
    `$ref`s down to the free-form maps, whose names are never keys; everything else keeps K5's
    rule, and so does a tool without a schema (a tool the upstream did not list, C10) or an
    object the schema leaves open. Bounded: `max_nodes` schemas, `_MAX_PLAN_DEPTH` levels.
    """
    if not isinstance(input_schema, Mapping) or not names:
        return ANYWHERE
    memo: dict[int, KeyPlan] = {}
    budget = [max_nodes]

    def branches(schema: Any, depth: int) -> list[Mapping[str, Any]]:
        """The schema and every branch it combines, `$ref`s resolved, arrays' items included."""
        out: list[Mapping[str, Any]] = []
        todo = [(schema, depth)]
        while todo and budget[0] > 0:
            item, level = todo.pop()
            budget[0] -= 1
            item = resolve_ref(input_schema, item)
            if not isinstance(item, Mapping) or level > _MAX_PLAN_DEPTH:
                continue
            out.append(item)
            for combinator in ("anyOf", "oneOf", "allOf"):
                found = item.get(combinator)
                if isinstance(found, list):
                    todo.extend((b, level + 1) for b in found)
            items = item.get("items")
            if isinstance(items, Mapping):
                todo.append((items, level + 1))
            elif isinstance(items, list):
                todo.extend((b, level + 1) for b in items)
        return out

    def plan_of(schema: Any, depth: int) -> KeyPlan:
        resolved = resolve_ref(input_schema, schema)
        known = memo.get(id(resolved))
        if known is not None:
            return known
        plan = memo[id(resolved)] = KeyPlan()
        found = branches(resolved, depth)
        if any(_shapeless(b) for b in found) or depth >= _MAX_PLAN_DEPTH:
            memo[id(resolved)] = ANYWHERE
            return ANYWHERE
        declared = [b["properties"] for b in found if isinstance(b.get("properties"), Mapping)
                    and b["properties"]]  # fmt: skip
        extras = [b.get("additionalProperties") for b in found]
        free = [e for e in extras if isinstance(e, Mapping) or e is True]
        if not declared and (free or any("patternProperties" in b for b in found)):
            plan.is_map = True  # a free-form map: its names are data
            value = next((e for e in free if isinstance(e, Mapping)), None)
            plan.values = plan_of(value, depth + 1) if value is not None else None
            return plan
        for properties in declared:
            for name, sub in properties.items():
                if isinstance(name, str) and not _matches(name, names) and budget[0] > 0:
                    plan.children.setdefault(name, plan_of(sub, depth + 1))
        return plan

    root = plan_of(input_schema, 0)
    return _prune_plans(root, list(memo.values()))


def _prune_plans(root: KeyPlan, plans: list[KeyPlan]) -> KeyPlan:
    """Keep only what leads to a map (a fixpoint: cycles); the rest is ANYWHERE."""
    live = {id(p) for p in plans if p.is_map}
    changed = True
    while changed:
        changed = False
        for p in plans:
            if id(p) not in live and any(id(c) in live for c in p.children.values()):
                live.add(id(p))
                changed = True
    for p in plans:
        if p is not ANYWHERE:
            p.children = {k: c for k, c in p.children.items() if id(c) in live}
            if p.values is not None and id(p.values) not in live:
                p.values = None
    return root if id(root) in live else ANYWHERE

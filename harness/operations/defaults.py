"""K4: arguments completed with the defaults a tool's input schema declares.

An agent that sends `{"nights": 2}` and one that sends `{"nights": 2, "room_type": "standard"}`
ask for the same booking when the schema says `"room_type": {"default": "standard"}`. Before
the canonical form (K2), omitted properties take their declared defaults, in nested objects
and array elements too. A nested object that was omitted is not made up (JSON Schema applies
defaults where an instance exists), unless the schema gives the object itself a default. A
default beside a `$ref` counts too (E4: `{"$ref": "#/$defs/Room", "default": "standard"}`).

Z5: empty is absent. `[]`, `{}`, `""` and `null` for an optional property (not `required`)
whose default is absent, `null` or that same empty value are the same as leaving it out: an
agent that sends `projects: []` where the schema says `default: null` asks for the same todo
as one that sends nothing. After completion such a value is left out of the identity.

The plan is built once per tool when the tool list arrives, so completing a call costs only
as much as the defaults and optional properties it declares, whatever the length of the
session.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.operations.keys import resolve_ref

_MAX_DEPTH = 32  # schemas deeper than this get no defaults below it (and no recursion risk)
_MISSING = object()


@dataclass
class DefaultsPlan:
    """Per property: its default (if any) and the plans of an object or array value."""

    defaults: dict[str, Any] = field(default_factory=dict)
    objects: dict[str, DefaultsPlan] = field(default_factory=dict)  # property -> nested plan
    items: dict[str, DefaultsPlan] = field(default_factory=dict)  # array property -> element plan
    # Z5: optional properties whose empty value is absent (default absent, null or that empty)
    empties: dict[str, Any] = field(default_factory=dict)  # property -> its default or _MISSING


def _object_branch(root: Mapping[str, Any], schema: Any) -> Any:
    """The one object-shaped branch of an anyOf/oneOf (`Optional[Model]`), if there is one."""
    schema = resolve_ref(root, schema)
    if not isinstance(schema, Mapping):
        return None
    if isinstance(schema.get("properties"), Mapping):
        return schema
    for combinator in ("anyOf", "oneOf", "allOf"):
        branches = schema.get(combinator)
        if isinstance(branches, list):
            shaped = [
                b
                for b in (resolve_ref(root, b) for b in branches)
                if isinstance(b, Mapping) and isinstance(b.get("properties"), Mapping)
            ]
            if len(shaped) == 1:
                return shaped[0]
    return None


def _plan(
    root: Mapping[str, Any], schema: Any, memo: dict[int, DefaultsPlan], depth: int
) -> DefaultsPlan | None:
    """The plan of one object schema; each schema is planned once, so `$ref` cycles end."""
    shaped = _object_branch(root, schema)
    if shaped is None or depth > _MAX_DEPTH:
        return None
    known = memo.get(id(shaped))
    if known is not None:
        return known
    plan = memo[id(shaped)] = DefaultsPlan()
    required = shaped.get("required")
    required = set(required) if isinstance(required, list) else set()
    for name, raw in shaped["properties"].items():
        sub = resolve_ref(root, raw)
        # E4: a default written beside a `$ref` (pydantic's enum with a default) is the
        # property's default, and wins over one in the referenced schema.
        if isinstance(raw, Mapping) and "default" in raw:
            plan.defaults[name] = raw["default"]
        elif isinstance(sub, Mapping) and "default" in sub:
            plan.defaults[name] = sub["default"]
        default = plan.defaults.get(name, _MISSING)
        if name not in required and (default is _MISSING or default is None or _is_empty(default)):
            plan.empties[name] = default  # Z5
        if not isinstance(sub, Mapping):
            continue
        nested = _plan(root, sub, memo, depth + 1)
        if nested is not None:
            plan.objects[name] = nested
        items = resolve_ref(root, sub.get("items"))
        element = _plan(root, items, memo, depth + 1) if isinstance(items, Mapping) else None
        if element is not None:
            plan.items[name] = element
    return plan


def _prune(plans: list[DefaultsPlan]) -> set[int]:
    """Keep only the plans that lead to a default somewhere (a fixpoint, cycles allowed)."""
    live = {id(p) for p in plans if p.defaults or p.empties}
    changed = True
    while changed:
        changed = False
        for p in plans:
            if id(p) not in live and any(
                id(c) in live for c in (*p.objects.values(), *p.items.values())
            ):
                live.add(id(p))
                changed = True
    for p in plans:
        p.objects = {k: c for k, c in p.objects.items() if id(c) in live}
        p.items = {k: c for k, c in p.items.items() if id(c) in live}
    return live


def defaults_plan(input_schema: Any) -> DefaultsPlan | None:
    """The defaults a tool's input schema declares, or None when it declares none."""
    if not isinstance(input_schema, Mapping):
        return None
    memo: dict[int, DefaultsPlan] = {}
    plan = _plan(input_schema, input_schema, memo, 0)
    if plan is None or id(plan) not in _prune(list(memo.values())):
        return None
    return plan


def complete(arguments: Any, plan: DefaultsPlan | None) -> Any:
    """K4: `arguments` with omitted properties set to their defaults; the same object if none.

    Missing arguments (`None`) count as `{}`.
    """
    if arguments is None:
        arguments = {}
    if plan is None or not isinstance(arguments, dict):
        return arguments
    return _complete(arguments, plan, 0)


def _is_empty(value: Any) -> bool:
    return value is None or (type(value) in (list, dict, str) and not value)


def _complete(value: dict[str, Any], plan: DefaultsPlan, depth: int) -> dict[str, Any]:
    out = value
    for name, default in plan.defaults.items():
        if name not in value:
            if out is value:
                out = dict(value)
            out[name] = default
    if depth >= _MAX_DEPTH:
        return _without_empties(value, out, plan)
    for name, nested in plan.objects.items():
        child = out.get(name, _MISSING)
        if isinstance(child, dict):
            filled = _complete(child, nested, depth + 1)
            if filled is not child:
                if out is value:
                    out = dict(value)
                out[name] = filled
    for name, element in plan.items.items():
        child = out.get(name, _MISSING)
        if isinstance(child, list):
            filled_list = [
                _complete(e, element, depth + 1) if isinstance(e, dict) else e for e in child
            ]
            if any(a is not b for a, b in zip(filled_list, child, strict=True)):
                if out is value:
                    out = dict(value)
                out[name] = filled_list
    return _without_empties(value, out, plan)


def _without_empties(value: dict[str, Any], out: dict[str, Any], plan: DefaultsPlan) -> dict[str, Any]:
    """Z5: an optional property whose value is empty once completed is no value, when its
    default is absent, null or that same empty value (`{}` that took nested defaults is not
    empty)."""
    for name, default in plan.empties.items():
        if name in out and _is_empty(out[name]):
            empty = out[name]
            if default is _MISSING or default is None or (
                type(default) is type(empty) and default == empty
            ):
                if out is value:
                    out = dict(value)
                del out[name]
    return out

"""From a pydantic error to what a user reads: the YAML line, the field path, a clear message."""

from __future__ import annotations

import json
import types
from collections.abc import Mapping, Sequence
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import ErrorDetails
from yaml.nodes import MappingNode, Node, SequenceNode

from runner.experiment._base import did_you_mean

Loc = tuple[str | int, ...]


def dotted(parts: Sequence[str | int]) -> str:
    """`models[1].params.temperature` for ("models", 1, "params", "temperature")."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def child(node: Node | None, part: str | int) -> tuple[Node | None, Node | None]:
    """The key node and value node one step below `node`; (None, None) if YAML has no such step."""
    found: tuple[Node | None, Node | None] = (None, None)
    if isinstance(node, MappingNode) and isinstance(part, str):
        for key, value in node.value:
            if key.value == part:
                found = (key, value)  # the last one wins, as when PyYAML builds the dict
    elif isinstance(node, SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
        found = (None, node.value[part])
    return found


def locate(root: Node, loc: Loc) -> tuple[int, str]:
    """The 1-based line and the field path of a location in the document."""
    node, line, parts = root, root.start_mark.line + 1, []
    for i, part in enumerate(loc):
        key, value = child(node, part)
        if value is None:
            if i == len(loc) - 1:
                parts.append(part)  # a missing field: named, at its parent's line
            continue  # a step of a validator's own, with nothing in the YAML
        parts.append(part)
        node, line = value, (key or value).start_mark.line + 1
    return line, dotted(parts)


def _unwrap(tp: Any) -> Any:
    if get_origin(tp) in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        return args[0] if len(args) == 1 else tp
    return tp


def fields_at(model: type[BaseModel], loc: Loc) -> list[str]:
    """The field names of the model found at `loc` below `model` (empty if none is there)."""
    tp: Any = model
    for part in loc:
        tp = _unwrap(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel) and isinstance(part, str):
            field = tp.model_fields.get(part)
            tp = field.annotation if field else None
        elif get_origin(tp) is tuple and isinstance(part, int):
            tp = get_args(tp)[0]
        else:
            return []
    tp = _unwrap(tp)
    return list(tp.model_fields) if isinstance(tp, type) and issubclass(tp, BaseModel) else []


def yaml_type(value: Any) -> str:
    """What a YAML value is, in YAML words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__  # e.g. a date: YAML reads 2026-12-01 as one


def _show(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_SHAPES = {
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "dict_type": "a mapping",
    "tuple_type": "a list",
    "list_type": "a list",
}


def message(error: ErrorDetails, known_keys: Sequence[str]) -> str:
    """One clear sentence for a pydantic error; `known_keys` are the keys allowed beside it."""
    kind, value = error["type"], error.get("input")
    if kind == "extra_forbidden":
        hint = did_you_mean(str(error["loc"][-1]), known_keys)
        return "unknown key" + (hint or f"; expected one of: {', '.join(known_keys)}")
    if kind == "missing":
        return "required field is missing"
    if kind == "too_short":
        return "must not be empty"
    if kind == "invalid_key":
        return f"key {_show(value)} is not text; quote it"
    if kind in _SHAPES:
        return f"expected {_SHAPES[kind]}, got {yaml_type(value)}"
    if kind == "value_error":
        return error["msg"].removeprefix("Value error, ")
    if value is None or isinstance(value, str | int | float):
        return f"{error['msg']}, got {_show(value)}"
    return error["msg"]

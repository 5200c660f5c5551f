"""Shared pieces of the spec models: the error, frozen containers, strict base, small helpers."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from harness.base.errors import HarnessError


class SpecError(HarnessError):
    """An experiment spec that cannot be used; the message names file, line and field."""


class FrozenDict(dict[str, Any]):
    """A dict that refuses changes: the free-form mappings inside a frozen spec."""

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a mapping of a loaded spec cannot be changed")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse

    def __hash__(self) -> int:  # type: ignore[override]
        # Equal mappings must hash equal whatever their (nested) insertion order.
        return hash(json.dumps(self, sort_keys=True, default=repr))

    def __reduce__(self) -> Any:
        # copy/pickle would rebuild a dict subclass item by item through __setitem__.
        return (FrozenDict, (dict(self),))


def freeze(value: Any) -> Any:
    """Nested YAML data with FrozenDicts for mappings and tuples for lists."""
    if isinstance(value, Mapping):
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """Plain, mutable dicts and lists again (for code that expects JSON-like data)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(v) for v in value]
    return value


def did_you_mean(word: str, choices: Iterable[str], cutoff: float = 0.6) -> str:
    """` (did you mean 'x'?)` for a close choice, else ''."""
    choices = list(choices)
    same_case = [c for c in choices if c.casefold() == word.casefold()]
    close = same_case or difflib.get_close_matches(word, choices, n=1, cutoff=cutoff)
    return f" (did you mean {close[0]!r}?)" if close else ""


class Frozen(BaseModel):
    """Base of the spec models: unknown keys are errors, values are immutable."""

    # strict: YAML already has types; "5" for an int or `yes` for a number is a mistake.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


Name = Annotated[str, StringConstraints(min_length=1, max_length=200)]

_UNSAFE_IN_NAMES = re.compile(r"[/\\\x00-\x1f\x7f-\x9f]")


def name_problem(name: str) -> str | None:
    """V2: why a name could not be one file name as it is (None when it can).

    Names become file names (`reports/NAME.html`) and terminal text: no `.` or `..`, no
    separators (so no absolute name either), no control characters."""
    if name in (".", ".."):
        return f"{name!r} is not a name"
    found = _UNSAFE_IN_NAMES.search(name)
    if found:
        char = found.group()
        what = f"the separator {char!r}" if char in "/\\" else f"the control character {char!r}"
        return f"a name must not contain {what}: names are used as file names and printed"
    return None


def _safe_name(name: str) -> str:
    problem = name_problem(name)
    if problem:
        raise ValueError(problem)
    return name


# A name that also names files and is printed: experiment, labels, prompts, arms, upstreams.
SafeName = Annotated[Name, AfterValidator(_safe_name)]
Text = Annotated[str, StringConstraints(min_length=1)]
FrozenStrMap = Annotated[dict[str, str], AfterValidator(FrozenDict)]


def list_field(**kwargs: Any) -> Any:
    """A tuple field that accepts a YAML list."""
    # Lists arrive as YAML lists; strict mode alone would accept only real tuples.
    return Field(strict=False, **kwargs)


def num(x: float) -> str:
    """A number as a label shows it: `1`, `0.3`."""
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces: the form that spec content is compared and hashed in."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

"""Operation identity (K2, K4, K5, E3, E6): a tool plus the canonical form of its completed
arguments without key fields, numbers compared by value."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from harness.base import jsonutil
from harness.operations.defaults import DefaultsPlan, complete
from harness.operations.keys import ANYWHERE, KeyPlan, normalise_field_name, strip_keys


def strip_key_fields(arguments: Any, normalised_keys: frozenset[str]) -> Any:
    """K1 as in event logs of version 1: the arguments without their top-level key fields."""
    if not isinstance(arguments, Mapping):
        return arguments
    return {k: v for k, v in arguments.items() if normalise_field_name(k) not in normalised_keys}


def identity_arguments(
    arguments: Any,
    key_names: frozenset[str],
    defaults: DefaultsPlan | None = None,
    plan: KeyPlan = ANYWHERE,
) -> Any:
    """K4 + K5 + E3: missing arguments are `{}`, omitted properties take the schema's defaults,
    and key fields are left out: where the schema declares them (`plan`), or at any depth."""
    return strip_keys(complete(arguments, defaults), key_names, plan)


def operation_id(
    tool: str,
    arguments: Any,
    normalised_keys: frozenset[str],
    defaults: DefaultsPlan | None = None,
) -> str:
    """A short stable digest of (tool, canonical identity arguments); equal iff same op.

    `"12"` and `12` give different ids (a string is not a number, K2; J9 may still call them a
    possible duplicate); `1.50` and `1.5`, `129.00` and `129`, `1e3` and `1000` give the same
    id (E6: numbers by value, exactly). Deeply nested arguments are canonicalised without
    recursion.
    """
    return digest_of(tool, identity_arguments(arguments, normalised_keys, defaults))


def digest_of(tool: str, identity: Any) -> str:
    """The operation id of identity arguments already worked out (E6: numbers by value)."""
    return _digest(tool, jsonutil.canonical(jsonutil.by_value(identity)))


def raw_operation_id(tool: str, raw_arguments: str) -> str:
    """Identity for arguments too deep to parse: a digest of their bytes as received."""
    return _digest(tool, "raw:" + raw_arguments)


def _digest(tool: str, body: str) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(tool.encode("utf-8", "surrogatepass"))
    h.update(b"\x00")
    h.update(body.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def value_key(value: Any) -> str:
    """A canonical string for comparing idempotency-key values (`"a"` and `a` differ)."""
    return jsonutil.canonical(value)

"""Operation identity (K2): a tool plus the canonical form of its arguments minus key fields."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from harness import jsonutil
from harness.tools import normalise_field_name


def strip_key_fields(arguments: Any, normalised_keys: frozenset[str]) -> Any:
    """K1/K2: the arguments without their top-level key fields."""
    if not isinstance(arguments, Mapping):
        return arguments
    return {k: v for k, v in arguments.items() if normalise_field_name(k) not in normalised_keys}


def operation_id(tool: str, arguments: Any, normalised_keys: frozenset[str]) -> str:
    """A short stable digest of (tool, canonical arguments without keys); equal iff same op.

    `"12"` and `12` give different ids (the comparison is literal); `1.50` and `1.5` too, since
    numbers are compared as sent. Deeply nested arguments are canonicalised without recursion.
    """
    body = jsonutil.canonical(strip_key_fields(arguments, normalised_keys))
    return _digest(tool, body)


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

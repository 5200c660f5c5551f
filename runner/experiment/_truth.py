"""Q6: what an upstream's ground truth is, in the words the runner's summaries use.

"Real rows" only where there are rows: a built-in upstream's ledger, or a truth probe's SQL
query. A command probe reads the server's state (files, lines, keys), and a cassette counts
the answers it gave: saying "rows" of those would promise what is not there. An upstream
without any ground truth is not checkable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

ROWS, STATE, COUNT = "rows", "state", "count"
LONG = {
    ROWS: "the upstream's real rows",
    STATE: "the server's state",
    COUNT: "the cassette's count",
}
SHORT = {ROWS: "real rows", STATE: "server state", COUNT: "cassette count"}
MIXED_LONG, MIXED_SHORT = "the upstreams' ground truth", "ground truth"
ROW_WORDS = LONG[ROWS]  # the built-in upstreams' ground truth, in words


def truth_kind(upstream: Mapping[str, Any]) -> str | None:
    """ROWS, STATE or COUNT for an upstream (as the spec's YAML or `Upstream.model_dump()`
    gives it), None when the runner can read no ground truth of it."""
    if upstream.get("builtin") is not None:
        return ROWS
    if upstream.get("cassette") is not None:
        return COUNT
    probe = upstream.get("truth_probe")
    if isinstance(probe, Mapping):
        return ROWS if probe.get("sql") is not None else STATE
    return None


def truth_words(kinds: Iterable[str | None], short: bool = False) -> str:
    """The words for the ground truth of some upstreams: theirs when they share one kind
    (upstreams without any left out), else the words for ground truth in general."""
    found = {kind for kind in kinds if kind is not None}
    if len(found) == 1:
        (kind,) = found
        return (SHORT if short else LONG)[kind]
    return MIXED_SHORT if short else MIXED_LONG


def stored_truth_kinds(spec_text: str | None) -> dict[str, str]:
    """Upstream name -> truth kind, read from a stored spec's text without validating it (a
    store may hold a spec this version would refuse); {} when it cannot be read."""
    if not spec_text:
        return {}
    from pathlib import Path

    from runner.experiment._load import _parse

    try:
        _, data, _ = _parse(Path("stored-spec.yaml"), "stored spec", spec_text)
    except Exception:  # noqa: BLE001 - an unreadable stored spec names no ground truth
        return {}
    upstreams = data.get("upstreams") if isinstance(data, Mapping) else None
    kinds = {}
    for upstream in upstreams if isinstance(upstreams, list) else []:
        if isinstance(upstream, Mapping) and isinstance(upstream.get("name"), str):
            kind = truth_kind(upstream)
            if kind is not None:
                kinds[upstream["name"]] = kind
    return kinds

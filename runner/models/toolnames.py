"""Which of the tools an agent offers its model are the MCP server's, and under which name (U4).

An agent hands its model the MCP server's tools beside its own built-in ones, each agent under
a name of its own making: Claude Code `mcp__SERVER__TOOL`, Codex `SERVER__TOOL` or
`mcp__SERVER__TOOL`, opencode `SERVER_TOOL`, Gemini CLI and qwen-code the bare `TOOL` (and
`SERVER__TOOL` when the bare name is taken by a built-in one). The rule: an offered name is an
MCP tool's when, compared without case and with every run of characters other than letters and
digits as one `_`, it is the upstream's name itself or the upstream's name behind a prefix that
names the server (the name in the generated configuration, alone or after `mcp`) or is `mcp`.
Where both a bare and a prefixed name stand for one upstream tool, the bare one is the agent's
own tool of the same name and the prefixed one is the server's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_SEPARATORS = re.compile(r"[^a-z0-9]+")


def _flat(name: str) -> str:
    return _SEPARATORS.sub("_", name.lower()).strip("_")


def _prefixes(servers: Iterable[str]) -> set[str]:
    """The flattened prefixes that name a server: `s`, `mcp_s`, `mcp` (and `s` without `_`)."""
    out = {"mcp"}
    for server in servers:
        flat = _flat(server)
        for s in {flat, flat.replace("_", "")}:
            out |= {s, f"mcp_{s}"}
    return out


def mcp_tool_names(
    offered: Iterable[str], upstream: Iterable[str], servers: Iterable[str]
) -> dict[str, str]:
    """offered name -> the upstream tool it stands for, for the offered names that are the MCP
    server's tools (the others are the agent's own)."""
    by_flat: dict[str, str] = {}
    for name in upstream:
        by_flat.setdefault(_flat(name), name)
    prefixes = _prefixes(servers)
    found: dict[str, tuple[str, bool]] = {}  # offered -> (upstream, prefixed)
    for name in offered:
        flat = _flat(name)
        if flat in by_flat:
            found[name] = (by_flat[flat], False)
            continue
        # the longest upstream name that ends the offered one behind a server's prefix
        best: str | None = None
        for tail, upstream_name in by_flat.items():
            head = flat[: -len(tail)] if flat.endswith(tail) else None
            if head and head.endswith("_") and head.rstrip("_") in prefixes:
                if best is None or len(tail) > len(_flat(best)):
                    best = upstream_name
        if best is not None:
            found[name] = (best, True)
    prefixed = {up for up, pre in found.values() if pre}
    return {name: up for name, (up, pre) in found.items() if pre or up not in prefixed}

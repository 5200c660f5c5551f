"""Which litellm providers exist, read from the installed litellm without importing it (L2).

Importing litellm costs seconds of CPU (measured here: ~6 s on a loaded 2-core machine,
against ~0.2 s for the whole spec package), so `load_spec` and `--dry-run` read the provider
names from litellm's own source instead: the `LlmProviders` enum in `litellm/types/utils.py`
and the JSON-configured OpenAI-compatible providers in `llms/openai_like/providers.json`.
If that source ever changes shape, the list comes from an import of litellm (slow but right);
tests/unit/test_providers.py checks that both ways give the same names.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from functools import cache
from pathlib import Path

# Registered by the runner itself (runner.models.scripted), not by litellm.
RUNNER_PROVIDERS = frozenset({"scripted"})

_ENUM = re.compile(r"^class LlmProviders\(str, Enum\):\n((?:[ \t]+.*\n|\n)+)", re.MULTILINE)
_MEMBER = re.compile(r"^\s+[A-Z0-9_]+\s*=\s*\"([^\"]+)\"", re.MULTILINE)


def _litellm_dir() -> Path | None:
    # find_spec of a top-level package locates it without running its __init__.
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def read_from_source(root: Path) -> frozenset[str]:
    """Provider names from litellm's files under `root`; empty if their shape is not known."""
    try:
        source = (root / "types" / "utils.py").read_text(encoding="utf-8")
    except OSError:
        return frozenset()
    block = _ENUM.search(source)
    names = set(_MEMBER.findall(block.group(1))) if block else set()
    if len(names) < 10:  # not the enum we know: do not guess
        return frozenset()
    try:
        extra = json.loads((root / "llms" / "openai_like" / "providers.json").read_text("utf-8"))
        names |= {str(k) for k in extra}
    except (OSError, ValueError):
        pass  # older litellm versions have no JSON-configured providers
    return frozenset(names)


def read_by_import() -> frozenset[str]:
    """Provider names as litellm itself knows them (imports litellm: seconds)."""
    from runner.models.calls import litellm_quietly

    litellm_quietly()
    from litellm.types.utils import LlmProviders

    # The enum, not litellm.provider_list: registering a custom provider appends to that list.
    names = {p.value for p in LlmProviders}
    try:
        from litellm.llms.openai_like.json_loader import JSONProviderRegistry

        JSONProviderRegistry.load()
        names |= set(JSONProviderRegistry._providers)
    except ImportError:
        pass
    return frozenset(str(n) for n in names)


@cache
def _litellm_providers() -> frozenset[str]:
    root = _litellm_dir()
    names = read_from_source(root) if root is not None else frozenset()
    return names or read_by_import()


def registered_providers() -> frozenset[str]:
    """Custom providers registered with litellm in this process (only if it is imported)."""
    litellm = sys.modules.get("litellm")
    entries = getattr(litellm, "custom_provider_map", None) or []
    return frozenset(str(e.get("provider")) for e in entries if isinstance(e, dict))


def known_providers() -> frozenset[str]:
    """Every provider prefix a model name may carry: litellm's, the runner's, registered ones."""
    return _litellm_providers() | RUNNER_PROVIDERS | registered_providers()

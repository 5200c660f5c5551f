"""Q2: before a run, whether each model can be reached at all: one line per model.

`agent-harness run SPEC --dry-run` asks litellm which environment variables a model's provider
needs (`litellm.validate_environment`, litellm's own table: OPENAI_API_KEY for openai/...,
ANTHROPIC_API_KEY, GEMINI_API_KEY, ...) and, for a server on this machine (an `api_base` on
localhost, or a provider whose default address is local, such as Ollama's), whether anything
accepts a TCP connection there within CONNECT_TIMEOUT_S. It imports litellm (a few seconds of
CPU), only when the spec names a model that is not scripted; `run` itself does not wait for
it (N3 keeps litellm out of the commands that call no model). A check can only say what
litellm knows: credentials from elsewhere (a cloud role, a keyring) look missing to it.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from runner.models.calls import (
    ENV_REF,
    gets_placeholder_key,
    is_local_url,
    litellm_quietly,
    provider_of,
)

CONNECT_TIMEOUT_S = 1.0  # a local server answers a connect at once, or nothing listens


@dataclass(frozen=True)
class Check:
    """One model's readiness: `ok`, and the line that says it."""

    ok: bool
    line: str


def check_models(models: Iterable[tuple[str, str, Mapping[str, Any]]]) -> list[Check]:
    """(label, litellm name, params) of each model -> one Check per distinct model that is
    not scripted (scripted models need nothing)."""
    checks = []
    for label, name, params in dict.fromkeys(
        (label, name, tuple(sorted(params.items()))) for label, name, params in models
    ):
        if name.startswith("scripted/"):
            continue
        checks.append(check_model(label, name, dict(params)))
    return checks


def check_model(label: str, name: str, params: Mapping[str, Any]) -> Check:
    """One model: its provider variables (litellm's list) and, for a local server, a connect."""
    import os

    # A reference that is not set is reported before (unset_variables); read the others.
    given = {
        k: (
            os.environ.get(v[len(ENV_REF) :]) if isinstance(v, str) and v.startswith(ENV_REF) else v
        )
        for k, v in params.items()
    }
    shown = f"model {label}" + (f" ({name})" if label != name else "")
    base = given.get("api_base") or given.get("base_url") or _default_base(name, given)
    problems, fine = [], []
    if isinstance(base, str) and is_local_url(base):
        reached = _connect(base)
        (fine if reached is None else problems).append(
            f"{_address(base)} {'accepts connections' if reached is None else reached}"
        )
    if not gets_placeholder_key(name, given) and not given.get("api_key"):
        missing = _missing_variables(name, base if isinstance(base, str) else None)
        if missing:
            problems.append(
                f"{' or '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set"
            )
        else:
            fine.append("its provider variables are set")
    if problems:
        return Check(False, f"{shown}: NOT READY: {'; '.join(problems)}")
    return Check(True, f"{shown}: ready ({'; '.join(fine) or 'a key in the spec'})")


def _default_base(name: str, params: Mapping[str, Any]) -> str | None:
    """The address litellm calls for this provider when the spec gives none (Ollama's is
    http://localhost:11434), from litellm's provider table; None when it has none."""
    litellm_quietly()  # imported once, without its banners
    try:
        from litellm.types.utils import LlmProviders
        from litellm.utils import ProviderConfigManager

        info = ProviderConfigManager.get_provider_model_info(
            name, LlmProviders(provider_of(name, params))
        )
        return info.get_api_base(None) if info is not None else None
    except Exception:  # noqa: BLE001 - a provider without an entry or a default in litellm
        return None


def _missing_variables(name: str, base: str | None) -> list[str]:
    """The environment variables litellm says the model's provider needs and lacks; a base
    address it asks for is given (the spec's, or litellm's own default)."""
    found = litellm_quietly().validate_environment(model=name, api_base=base)
    return [v for v in found.get("missing_keys", []) if not (base and v.endswith("_API_BASE"))]


def _address(url: str) -> str:
    parts = urlsplit(url if "//" in url else f"//{url}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.hostname}:{port}"


def _connect(url: str) -> str | None:
    """None when a TCP connection to the URL's host and port opens, else why not."""
    parts = urlsplit(url if "//" in url else f"//{url}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "localhost", port), CONNECT_TIMEOUT_S):
            return None
    except ConnectionRefusedError:
        return "refuses connections (nothing listens there: start the server)"
    except OSError as exc:
        return f"cannot be reached ({exc.strerror or exc})"

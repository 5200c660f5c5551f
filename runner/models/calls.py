"""One model call through litellm (SPEC L2): the runner's deadline, the runner's retries only.

- A spec's model parameters are passed as they are, except what the runner owns: `timeout`
  (the spec's own `timeout` may shorten the call's deadline, never lengthen it) and retries
  (the OpenAI client's `max_retries` and litellm's `num_retries` are set to 0, so that
  `retry:` in the spec is the only retry policy and `model_timeout_s` bounds a whole call).
- `os.environ/NAME` values (litellm's notation) are read from the environment at call time;
  the spec and the store keep the reference.
- A model served from this machine (an `api_base` on localhost) without an `api_key` gets a
  placeholder key: litellm's OpenAI client refuses to send without one, and a real provider
  key from the environment has no business going to a local server.
- Errors become one line that names what failed (for a connection: host and port).
- Cost comes only from the model that really answered; unknown prices stay unknown (None).
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

ENV_REF = "os.environ/"
LOCAL_PLACEHOLDER_KEY = "no-key-for-a-local-server"
# Providers whose calls go through the OpenAI client (which insists on some key).
_OPENAI_CLIENT_PROVIDERS = {"openai", "custom_openai", "text-completion-openai"}

# Provider errors worth retrying (by litellm exception class name, to keep litellm's import lazy).
RETRYABLE = {
    "RateLimitError",
    "APIConnectionError",
    "Timeout",
    "ServiceUnavailableError",
    "InternalServerError",
    "APIError",
}


# Q2: failures that running again will not mend, each named as the run's error says it
# (`model call failed (missing key): ...`): a run stops a model's remaining runs after a few
# in a row of one kind (runner.execute.failfast).
MISSING_KEY, REFUSED, NOT_FOUND = "missing or refused key", "connection refused", "model not found"
INFRASTRUCTURE_KINDS = (MISSING_KEY, REFUSED, NOT_FOUND)


class ModelCallFailed(Exception):
    """The provider kept failing (after retries) or refused the request; `kind`: one of
    INFRASTRUCTURE_KINDS when the cause is the setup (key, server, model), else None."""

    def __init__(self, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind


def infrastructure_kind(exc: BaseException) -> str | None:
    """Q2: which setup failure a provider error is, from litellm's exception (its class and
    HTTP status) and its cause (a refused connection), or None for anything else."""
    chain = _chain(exc)
    if any(isinstance(e, ConnectionRefusedError) for e in chain):
        return REFUSED
    text = " ".join(str(e) for e in chain).lower()
    if "connect call failed" in text or "connection refused" in text:
        return REFUSED  # aiohttp and httpx name a refused connect this way
    name = type(exc).__name__
    status = getattr(exc, "status_code", None)
    # litellm raises a missing OpenAI key as InternalServerError("Missing credentials ...")
    if name == "AuthenticationError" or status == 401 or "missing credentials" in text:
        return MISSING_KEY
    if name == "NotFoundError" or status == 404:
        return NOT_FOUND
    return None


def litellm_quietly() -> Any:
    """litellm, imported once, without its banners on stdout ("Give Feedback", "Provider List")."""
    import litellm

    # Both banners are print()s guarded by this flag; errors still reach us as exceptions.
    litellm.suppress_debug_info = True
    return litellm


def resolve_env_refs(params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters with every `os.environ/NAME` string replaced by that variable's value."""
    resolved = {}
    for key, value in params.items():
        if isinstance(value, str) and value.startswith(ENV_REF):
            name = value[len(ENV_REF) :]
            if name not in os.environ:
                raise ModelCallFailed(
                    f"model parameter {key!r} names the environment variable {name}, "
                    "which is not set",
                    MISSING_KEY,
                )
            value = os.environ[name]
        resolved[key] = value
    return resolved


def is_local_url(url: str) -> bool:
    """Whether a URL points at this machine (localhost, 127.0.0.0/8, ::1)."""
    host = urlsplit(url if "//" in url else f"//{url}").hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def provider_of(model: str, params: Mapping[str, Any]) -> str:
    """The litellm provider a model name (or `custom_llm_provider`) selects; '' if none."""
    given = params.get("custom_llm_provider")
    if isinstance(given, str) and given:
        return given
    if "/" in model:
        return model.split("/", 1)[0]
    # A bare name (`gpt-4o`): the provider litellm infers from its model list, as it will
    # when it calls the model; '' for a name it does not know.
    try:
        return str(litellm_quietly().get_llm_provider(model)[1] or "")
    except Exception:  # litellm raises its BadRequestError for an unknown bare name
        return ""


# Providers whose API takes a `seed`: the scripted models and OpenAI's chat API (which
# OpenAI-compatible servers such as llama.cpp's follow). Others (Anthropic) would refuse it.
SEEDED_PROVIDERS = {"scripted", *_OPENAI_CLIENT_PROVIDERS}


def takes_seed(model: str, params: Mapping[str, Any]) -> bool:
    """Whether the runner passes the run's seed to this model."""
    return provider_of(model, params) in SEEDED_PROVIDERS


def gets_placeholder_key(model: str, kwargs: Mapping[str, Any]) -> bool:
    """Whether the call goes to a server on this machine through the OpenAI client without a
    key of its own: it gets LOCAL_PLACEHOLDER_KEY, never a provider key from the environment."""
    base = kwargs.get("api_base") or kwargs.get("base_url")
    return (
        "api_key" not in kwargs
        and isinstance(base, str)
        and is_local_url(base)
        and provider_of(model, kwargs) in _OPENAI_CLIENT_PROVIDERS
    )


@dataclass(frozen=True)
class CallPlan:
    """The keyword arguments of every call to one model, and its deadline in seconds."""

    kwargs: dict[str, Any]
    deadline_s: float


def plan_call(model: str, params: Mapping[str, Any], model_timeout_s: float) -> CallPlan:
    """Merge the spec's parameters with what the runner owns (deadline, no hidden retries)."""
    kwargs = resolve_env_refs(params)
    own = kwargs.pop("timeout", None)
    deadline = min(model_timeout_s, float(own)) if own is not None else model_timeout_s
    if gets_placeholder_key(model, kwargs):
        kwargs["api_key"] = LOCAL_PLACEHOLDER_KEY
    kwargs.update(timeout=deadline, max_retries=0, num_retries=0)
    return CallPlan(kwargs, deadline)


def _retry_after_s(exc: BaseException) -> float | None:
    headers = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        headers = getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    value = headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date: rare for model APIs; the backoff applies


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def describe(exc: BaseException, model: str) -> str:
    """One line: the error class and message, plus the address for a connection failure."""
    name = type(exc).__name__
    text = (str(exc).strip().splitlines() or [""])[0]
    # litellm repeats the class name: "litellm.RateLimitError: RateLimitError: OpenAIException - x".
    for prefix in (f"litellm.{name}: ", f"{name}: "):
        text = text.removeprefix(prefix)
    line = f"{name}: {text[:300]}" if text else name
    chain = _chain(exc)
    # The deepest request URL is the one really tried (outer wrappers may name a default).
    urls = [
        str(url)
        for e in chain
        if (url := getattr(getattr(e, "request", None), "url", None)) is not None
    ]
    oserrors = [e for e in chain if isinstance(e, OSError) and not isinstance(e, TimeoutError)]
    if urls and (oserrors or "connection" in text.lower()):
        parts = urlsplit(urls[-1])
        port = parts.port or (443 if parts.scheme == "https" else 80)
        cause = f": {oserrors[-1].strerror or oserrors[-1]}" if oserrors else ""
        line += f" (model {model} at {parts.hostname}:{port}{cause})"
    return line


async def complete(
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    plan: CallPlan,
    attempts: int,
    backoff_s: float,
    max_backoff_s: float,
    rng: random.Random,
) -> Any:
    """One model call: each attempt bounded by the deadline, retried by the runner only."""
    litellm = litellm_quietly()
    for attempt in range(1, attempts + 1):
        try:
            async with asyncio.timeout(plan.deadline_s):
                return await litellm.acompletion(
                    model=model, messages=messages, tools=tools or None, **plan.kwargs
                )
        except TimeoutError as exc:
            name, error = "Timeout", exc
            detail = f"Timeout: no answer from {model} within {plan.deadline_s:g} s"
        except Exception as exc:  # litellm's error tree: sorted by class name below
            name, error, detail = type(exc).__name__, exc, describe(exc, model)
        kind = infrastructure_kind(error)
        # A missing key stays missing (litellm names one an InternalServerError): no retry.
        if name not in RETRYABLE or attempt == attempts or kind == MISSING_KEY:
            raise ModelCallFailed(detail, kind) from error
        wait = rng.uniform(0, min(max_backoff_s, backoff_s * 2**attempt))  # full jitter
        asked = _retry_after_s(error)
        if asked is not None:
            if asked > max_backoff_s:
                raise ModelCallFailed(
                    f"{detail} (the provider asks to wait {asked:g} s, more than "
                    f"retry.max_backoff_s {max_backoff_s:g})",
                    kind,
                ) from error
            wait = max(wait, asked)
        await asyncio.sleep(wait)
    raise AssertionError("unreachable")


def _base(name: str) -> str:
    return name.rsplit("/", 1)[-1].casefold()


def cost_of(response: Any, model: str) -> float | None:
    """The call's cost in USD from the model that answered; None when its price is unknown.

    A response whose model is not the one asked for (e.g. `openai/gpt-4o-mini` sent to a local
    server through OPENAI_API_BASE, answered by `smollm2`) is priced as what answered, if at
    all: never with the requested model's prices.
    """
    litellm = litellm_quietly()
    served = str(getattr(response, "model", "") or "")
    asked = _base(model)
    same = not served or _base(served) == asked or _base(served).startswith(f"{asked}-")
    hidden = getattr(response, "_hidden_params", None) or {}
    if same and hidden.get("response_cost") is not None:
        return float(hidden["response_cost"])
    name = model if same else served
    if name not in litellm.model_cost and _base(name) not in litellm.model_cost:
        return None
    try:
        return float(litellm.completion_cost(completion_response=response, model=name))
    except Exception:  # litellm cannot price it: unknown, not free
        return None

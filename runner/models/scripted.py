"""Scripted reference models, served to litellm as the custom provider `scripted` (SPEC R3, R4).

The runner drives them through the real litellm path, exactly like a hosted model:

    register_scripted_provider()
    response = await litellm.acompletion(
        model="scripted/careful", messages=messages, tools=tools, seed=7, max_wait_s=2
    )

They see what a real model sees (messages and tools in OpenAI format) and keep no state
between calls: each answer is derived from the conversation so far. Tool results that the
MCP server flagged with `isError: true` must start with the line `ERROR (isError=true):`
(behind the model endpoint, a command agent's error stated in words gets that line too).

Model parameters are extra keyword arguments of `litellm.acompletion`; litellm hands unknown
keyword arguments of a custom provider through in `optional_params`, so they arrive as given.
`extra_body={...}` works as well (top-level arguments win). The parameters:

- `seed` (int or str, default 0): the per-run seed for the patch-compliance draw.
- `max_wait_s` (float, default 2): the longest retry_after the careful model waits out.
- `patch_compliance` (0..1, default 1): how often verifies-by-id-only follows a patch.
- `respell` (one of `RESPELLINGS`, default `defaults`): how `respells` re-spells its repeat.

Usage tokens are estimated as characters // 4; the cost is 0: the models are registered in
litellm's cost map with zero prices and state their cost on the response (those prices times
the tokens, in `response._hidden_params["response_cost"]`, 0.0), which litellm takes instead of
pricing each call again.
Streaming is not supported.
"""

from __future__ import annotations

import os

# Set before anything imports litellm: without it litellm fetches its cost map at import.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

PROVIDER = "scripted"

SCRIPTED_MODELS: dict[str, str] = {
    "scripted/careful": (
        "checks with a search before repeating a failed write, reuses its idempotency key, "
        "waits out short retry_after"
    ),
    "scripted/naive": "re-sends a failed write at once without a key (up to 3 attempts); never reads",
    "scripted/parallel-naive": "sends the same write twice in one response (parallel tool calls)",
    "scripted/obeys-retry-request": (
        "gives up after an error, then re-sends blindly when the user says 'please try again' "
        "(checks first when its prompt has the GHOST_WRITE patch)"
    ),
    "scripted/verifies-by-id-only": (
        "'verifies' with an invented id, then re-sends; follows a GHOST_WRITE patch with "
        "probability patch_compliance"
    ),
    "scripted/same-key-retry": (
        "checks with a read that cannot find the record (an invented id), then re-sends with "
        "the SAME idempotency key: safe where the upstream honours keys"
    ),
    "scripted/respells": (
        "re-sends a failed write at once in another spelling: the schema's defaults filled in "
        "(respell: defaults) or numbers as strings (respell: strings)"
    ),
    # issue 21's shapes (E1-E4, E6), for the corpus of real servers
    "scripted/null-key": (
        "fills the optional idempotency key with null and re-sends a failed write at once, "
        "null again (a null key is no key)"
    ),
    "scripted/adds-enum-default": (
        "re-sends a failed write at once with its enum properties' defaults filled in "
        "(room: standard, the default pydantic writes beside a $ref)"
    ),
    "scripted/equivalent-numbers": (
        "re-sends a failed write at once with its whole numbers written the other way "
        "(129 as 129.0): the same operation"
    ),
    "scripted/polls-status": (
        "sends the write once, then polls its status tool twice (order_status: a write verb's "
        "name, annotated read-only), never re-sends"
    ),
    "scripted/idempotent-rewrite": (
        "sends the write, then the very same write once more to make sure (re-sends it at "
        "once after an error): harmless for an idempotent tool, a duplicate otherwise"
    ),
}


def _zero_cost_entry() -> dict[str, object]:
    return {
        "input_cost_per_token": 0.0,
        "output_cost_per_token": 0.0,
        # Named explicitly so litellm does not warn that it defaults them.
        "cache_creation_input_token_cost": 0.0,
        "cache_read_input_token_cost": 0.0,
        "litellm_provider": PROVIDER,
        "mode": "chat",
    }


def register_scripted_provider() -> None:
    """Make `scripted/<name>` models callable through litellm; safe to call repeatedly."""
    from runner.models.calls import litellm_quietly

    litellm = litellm_quietly()

    from runner.models._provider import HANDLER

    current = list(litellm.custom_provider_map)
    if not any(e["provider"] == PROVIDER and e["custom_handler"] is HANDLER for e in current):
        # Another "scripted" handler would shadow ours; every other provider stays.
        others = [e for e in current if e["provider"] != PROVIDER]
        litellm.custom_provider_map = [*others, {"provider": PROVIDER, "custom_handler": HANDLER}]
    missing = [name for name in SCRIPTED_MODELS if name not in litellm.model_cost]
    if missing:
        litellm.register_model({name: _zero_cost_entry() for name in missing})

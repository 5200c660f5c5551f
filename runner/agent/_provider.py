"""The litellm side of the scripted models: a CustomLLM that answers with ModelResponses.

Kept apart from `scripted.py` because importing litellm costs seconds: the public module
(model names, registration) stays cheap to import and loads this one only when registering.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

# Without it litellm fetches its model cost map from the network at import.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm  # noqa: E402
from litellm.llms.custom_llm import CustomLLM, CustomLLMError  # noqa: E402
from pydantic import ValidationError  # noqa: E402

from runner.agent._conversation import parse_messages  # noqa: E402
from runner.agent._policies import POLICIES, Decision, ScriptedParams, decide  # noqa: E402
from runner.agent._task import extract_task  # noqa: E402


def params_from(optional_params: Mapping[str, Any] | None) -> ScriptedParams:
    """The model knobs from litellm's optional_params, top level or inside `extra_body`."""
    given = dict(optional_params or {})
    extra = given.pop("extra_body", None)
    merged = {**(extra if isinstance(extra, Mapping) else {}), **given}
    try:
        return ScriptedParams.model_validate(merged)
    except ValidationError as exc:
        raise CustomLLMError(
            status_code=400, message=f"bad scripted model parameters: {exc}"
        ) from exc


def next_decision(
    model: str, messages: Sequence[Any], optional_params: Mapping[str, Any] | None
) -> Decision:
    """What the named model does next, given what a real model would be given."""
    if model not in POLICIES:
        known = ", ".join(f"scripted/{name}" for name in POLICIES)
        raise CustomLLMError(
            status_code=404, message=f"no scripted model {model!r}; known: {known}"
        )
    conv = parse_messages(messages)
    tools = (optional_params or {}).get("tools")
    task = extract_task(conv.first_user, tools)
    return decide(model, conv, task, params_from(optional_params))


def _tokens(text: str) -> int:
    # The usual rule of thumb (4 characters a token): enough to make token columns non-zero
    # and roughly proportional to the conversation's length.
    return max(1, len(text) // 4)


def to_response(
    model: str, messages: Sequence[Any], tools: Any, decision: Decision
) -> litellm.ModelResponse:
    """The decision as an OpenAI-format chat completion, with usage."""
    conv = parse_messages(messages)
    message: dict[str, Any]
    if decision.calls:
        # Ids unique within the conversation and the same on every replay of it.
        step = conv.assistant_steps + 1
        calls = [
            {
                "id": f"call_{step}_{i}",
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": json.dumps(dict(call.arguments), ensure_ascii=False),
                },
            }
            for i, call in enumerate(decision.calls)
        ]
        message, finish = {"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls"
    else:
        message, finish = {"role": "assistant", "content": decision.text}, "stop"
    prompt = _tokens(json.dumps([list(messages), tools], default=str, ensure_ascii=False))
    completion = _tokens(json.dumps(message, ensure_ascii=False))
    response = litellm.ModelResponse(
        model=f"scripted/{model}",
        choices=[{"index": 0, "finish_reason": finish, "message": message}],
        usage={
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    )
    # The model states its cost, as providers that report one do: its per-token prices in
    # litellm's cost map (zero, as registered) times its tokens. litellm then takes the stated
    # cost instead of pricing each call itself twice (issue 24: about 1 ms of CPU a call).
    entry = litellm.model_cost.get(f"scripted/{model}")
    if entry is not None:
        response._hidden_params["response_cost"] = prompt * float(
            entry.get("input_cost_per_token") or 0.0
        ) + completion * float(entry.get("output_cost_per_token") or 0.0)
    return response


class ScriptedLLM(CustomLLM):
    """litellm custom handler: `scripted/<name>` -> the named policy."""

    async def acompletion(  # type: ignore[override]
        self,
        model: str,
        messages: list,
        *_args: Any,
        optional_params: dict | None = None,
        **_kwargs: Any,
    ) -> litellm.ModelResponse:
        """Answer one chat completion; a careful model may take its time (retry_after)."""
        decision = next_decision(model, messages, optional_params)
        if decision.wait_s > 0:
            await asyncio.sleep(decision.wait_s)
        return to_response(model, messages, (optional_params or {}).get("tools"), decision)

    def completion(  # type: ignore[override]
        self,
        model: str,
        messages: list,
        *_args: Any,
        optional_params: dict | None = None,
        **_kwargs: Any,
    ) -> litellm.ModelResponse:
        """The same for litellm.completion (blocking)."""
        decision = next_decision(model, messages, optional_params)
        if decision.wait_s > 0:
            time.sleep(decision.wait_s)
        return to_response(model, messages, (optional_params or {}).get("tools"), decision)


HANDLER = ScriptedLLM()

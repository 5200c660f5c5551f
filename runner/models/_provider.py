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

from runner.models._conversation import Conversation, parse_messages  # noqa: E402
from runner.models._policies import POLICIES, Decision, ScriptedParams, decide  # noqa: E402
from runner.models._task import Task, extract_task  # noqa: E402


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
    return _next(model, messages, optional_params)[0]


def _next(
    model: str, messages: Sequence[Any], optional_params: Mapping[str, Any] | None
) -> tuple[Decision, Conversation, str | None]:
    """The decision, and what `to_response` would read again: the parsed conversation and the
    tools as JSON (None when they are not JSON)."""
    if model not in POLICIES:
        known = ", ".join(f"scripted/{name}" for name in POLICIES)
        raise CustomLLMError(
            status_code=404, message=f"no scripted model {model!r}; known: {known}"
        )
    conv = parse_messages(messages)
    tools = (optional_params or {}).get("tools")
    tools_text = _json(tools)
    task = _task_of(conv.first_user, tools, tools_text)
    return decide(model, conv, task, params_from(optional_params)), conv, tools_text


def _json(value: Any) -> str | None:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return None


# The task depends only on the first user message and the tools, the same at every call of a
# run and in every run of a cell: reading it again cost ~0.1 ms a call (issue 24). A Task is
# frozen and the policies copy its arguments before changing them.
_TASKS: dict[tuple[str, str], Task | None] = {}
_TASKS_KEPT = 256


def _task_of(
    first_user: str, tools: Sequence[Mapping[str, Any]] | None, tools_text: str | None
) -> Task | None:
    if tools_text is None or not isinstance(first_user, str):
        return extract_task(first_user, tools)
    key = (first_user, tools_text)
    if key in _TASKS:
        return _TASKS[key]
    task = extract_task(first_user, tools)
    if len(_TASKS) >= _TASKS_KEPT:
        _TASKS.clear()  # one step: `completion` (blocking) may run in several threads at once
    _TASKS[key] = task
    return task


def _tokens(text: str) -> int:
    # The usual rule of thumb (4 characters a token): enough to make token columns non-zero
    # and roughly proportional to the conversation's length.
    return max(1, len(text) // 4)


def to_response(
    model: str,
    messages: Sequence[Any],
    tools: Any,
    decision: Decision,
    *,
    conv: Conversation | None = None,
    tools_text: str | None = None,
) -> litellm.ModelResponse:
    """The decision as an OpenAI-format chat completion, with usage (`conv`, `tools_text`: the
    conversation parsed and the tools as JSON, when the caller has them)."""
    conv = conv if conv is not None else parse_messages(messages)
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
    if tools_text is None:
        tools_text = json.dumps(tools, default=str, ensure_ascii=False)
    # The text of json.dumps([messages, tools]), the tools' part not made twice.
    messages_text = json.dumps(list(messages), default=str, ensure_ascii=False)
    prompt = _tokens(f"[{messages_text}, {tools_text}]")
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
        decision, conv, tools_text = _next(model, messages, optional_params)
        if decision.wait_s > 0:
            await asyncio.sleep(decision.wait_s)
        tools = (optional_params or {}).get("tools")
        return to_response(model, messages, tools, decision, conv=conv, tools_text=tools_text)

    def completion(  # type: ignore[override]
        self,
        model: str,
        messages: list,
        *_args: Any,
        optional_params: dict | None = None,
        **_kwargs: Any,
    ) -> litellm.ModelResponse:
        """The same for litellm.completion (blocking)."""
        decision, conv, tools_text = _next(model, messages, optional_params)
        if decision.wait_s > 0:
            time.sleep(decision.wait_s)
        tools = (optional_params or {}).get("tools")
        return to_response(model, messages, tools, decision, conv=conv, tools_text=tools_text)


HANDLER = ScriptedLLM()

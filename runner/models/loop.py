"""The agent loop (R3): a model through litellm, its tool calls through MCP, until it is done.

The loop is what a typical agent framework does, written out so that nothing is hidden:
the upstream's tools become OpenAI-format functions; each model turn may ask for several tool
calls, which run concurrently (parallel tool calls); every tool result goes back to the model
with MCP's `isError` made visible (a client that hides it makes F3 look like success); after the
model's final answer, the next scripted user follow-up is sent. Limits stop a run that loops.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from runner.models.calls import ModelCallFailed as ModelCallFailed  # re-exported for callers
from runner.models.calls import complete, cost_of, plan_call

ERROR_MARK = "ERROR (isError=true):"


@dataclass(frozen=True)
class LoopLimits:
    max_turns: int = 8
    max_tool_calls: int = 20
    model_timeout_s: float = 120
    max_tokens: int | None = None


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0  # None: some call's price is unknown (never counted as $0)


@dataclass
class AgentResult:
    """What one conversation produced."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    tool_calls: int = 0
    turns: int = 0
    final_answer: str | None = None
    stopped_by: str | None = None  # the limit that ended it, if any


CallTool = Callable[[str, dict[str, Any]], Awaitable[tuple[str, bool]]]

# The id of the model's tool call being executed, set around `call_tool`: whatever the MCP
# client sends while it is set (its retries too) belongs to that tool call (SPEC M2).
TOOL_CALL_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "agent_harness_tool_call_id", default=None
)


def to_openai_tool(tool: Any) -> dict[str, Any]:
    """An MCP tool (SDK model or dict) as an OpenAI function definition."""
    data = tool if isinstance(tool, dict) else tool.model_dump(by_alias=True, exclude_none=True)
    schema = data.get("inputSchema") or {"type": "object", "properties": {}}
    return {
        "type": "function",
        "function": {
            "name": data["name"],
            "description": data.get("description") or "",
            "parameters": schema,
        },
    }


def render_tool_error(code: int, message: str) -> tuple[str, bool]:
    """A JSON-RPC error answer to a tool call -> (text the model sees, True)."""
    return f"{ERROR_MARK}\nError {code}: {message}", True


def render_tool_result(result: Any) -> tuple[str, bool]:
    """MCP CallToolResult -> (text the model sees, isError); isError is marked in the text."""
    data = (
        result if isinstance(result, dict) else result.model_dump(by_alias=True, exclude_none=True)
    )
    pieces = []
    for item in data.get("content") or []:
        if item.get("type") == "text":
            pieces.append(item.get("text", ""))
        else:
            pieces.append(f"[{item.get('type', 'content')} omitted]")
    if not pieces and data.get("structuredContent") is not None:
        pieces.append(json.dumps(data["structuredContent"], default=str))
    text = "\n".join(pieces)
    is_error = data.get("isError") is True
    return (f"{ERROR_MARK}\n{text}" if is_error else text), is_error


async def run_conversation(
    *,
    model: str,
    params: dict[str, Any],
    system_prompt: str,
    user_messages: list[str],
    tools: list[dict[str, Any]],
    call_tool: CallTool,
    limits: LoopLimits,
    retry: RetryPolicy,
    seed: int = 0,
    into: AgentResult | None = None,
) -> AgentResult:
    """Drive one model through the user's messages; raises ModelCallFailed on provider errors.

    `into` receives the conversation as it grows, so that a run that fails or times out
    half-way still has its transcript and usage up to that point.
    """
    rng = random.Random(seed)
    plan = plan_call(model, params, limits.model_timeout_s)
    result = into if into is not None else AgentResult()
    messages = result.messages
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    for number, user_message in enumerate(user_messages, start=1):
        messages.append({"role": "user", "content": user_message})
        for _turn in range(limits.max_turns):
            result.turns += 1
            response = await complete(
                model, messages, tools, plan,
                retry.attempts, retry.backoff_s, retry.max_backoff_s, rng,
            )  # fmt: skip
            usage = getattr(response, "usage", None)
            if usage is not None:
                result.usage.prompt_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
                result.usage.completion_tokens += int(getattr(usage, "completion_tokens", 0) or 0)
            cost = cost_of(response, model)
            if cost is None or result.usage.cost_usd is None:
                result.usage.cost_usd = None  # one unpriced call makes the total unknown
            else:
                result.usage.cost_usd += cost
            message = response.choices[0].message
            tool_calls = list(getattr(message, "tool_calls", None) or [])
            entry: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
            if tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": tc.id,
                        "type": "function",
                        "function": {"name": tc.function.name, "arguments": tc.function.arguments},
                    }
                    for tc in tool_calls
                ]
            messages.append(entry)
            if message.content:
                result.final_answer = message.content
            if limits.max_tokens is not None and (
                result.usage.prompt_tokens + result.usage.completion_tokens > limits.max_tokens
            ):
                result.stopped_by = f"max_tokens ({limits.max_tokens})"
                return result
            if not tool_calls:
                break
            if result.tool_calls + len(tool_calls) > limits.max_tool_calls:
                result.stopped_by = f"max_tool_calls ({limits.max_tool_calls})"
                return result
            result.tool_calls += len(tool_calls)
            answers = await asyncio.gather(*(_run_tool(tc, call_tool) for tc in tool_calls))
            for tc, (text, _is_error) in zip(tool_calls, answers, strict=True):
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": tc.id,
                        "name": tc.function.name,
                        "content": text,
                    }
                )
        else:
            # max_turns ends this user message's turn, not the run: the next follow-up is
            # still sent, as a user would speak again to an agent that stopped answering (and
            # a model forced to call tools never answers in text). The first cut is recorded.
            if result.stopped_by is None:
                result.stopped_by = (
                    f"max_turns ({limits.max_turns}) on user message {number} "
                    f"of {len(user_messages)}"
                )
    return result


async def _run_tool(tc: Any, call_tool: CallTool) -> tuple[str, bool]:
    # Each _run_tool runs in its own task (gather), so the value stays with this call.
    TOOL_CALL_ID.set(tc.id)
    try:
        arguments = json.loads(tc.function.arguments or "{}")
    except json.JSONDecodeError as exc:
        return f"{ERROR_MARK}\nThe tool arguments were not valid JSON: {exc}", True
    if not isinstance(arguments, dict):
        return f"{ERROR_MARK}\nThe tool arguments must be a JSON object.", True
    return await call_tool(tc.function.name, arguments)

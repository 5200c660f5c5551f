"""U1: the runner's OpenAI-compatible endpoint serves the scripted reference agents over real
HTTP (the official OpenAI client against it), and keeps every completion it served."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from runner.modelserver import serve_model
from runner.spec import ModelSpec

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "create_booking",
            "description": "Book a room.",
            "parameters": {
                "type": "object",
                "properties": {
                    "guest": {"type": "string"},
                    "date": {"type": "string"},
                    "nights": {"type": "integer"},
                },
                "required": ["guest", "date", "nights"],
            },
        },
    }
]
USER = {"role": "user", "content": "Please book a room. guest: Al, date: 2026-12-01, nights: 2"}


async def _ask(stream: bool) -> tuple[Any, list[Any]]:
    from openai import AsyncOpenAI

    async with serve_model(ModelSpec(name="scripted/careful"), seed=1, timeout_s=30) as endpoint:
        client = AsyncOpenAI(base_url=endpoint.base_url, api_key="unused", max_retries=0)
        if stream:
            chunks = [c async for c in await client.chat.completions.create(
                model=endpoint.model, messages=[USER], tools=TOOLS, stream=True)]  # fmt: skip
            answer = chunks[0].choices[0].delta
        else:
            answer = (
                (
                    await client.chat.completions.create(
                        model=endpoint.model, messages=[USER], tools=TOOLS
                    )
                )
                .choices[0]
                .message
            )
        await client.close()
        return answer, endpoint.served


def test_u1_endpoint_answers_with_the_scripted_models_tool_call_and_keeps_it() -> None:
    answer, served = asyncio.run(_ask(stream=False))
    (call,) = answer.tool_calls
    assert call.id == "call_1_0" and call.function.name == "create_booking"
    assert json.loads(call.function.arguments) == {"guest": "Al", "date": "2026-12-01", "nights": 2}
    (kept,) = served
    assert kept.messages == [USER] and kept.answer["tool_calls"][0]["id"] == "call_1_0"


def test_u1_endpoint_answers_a_streamed_request_in_one_chunk() -> None:
    delta, served = asyncio.run(_ask(stream=True))
    assert delta.tool_calls[0].function.name == "create_booking" and len(served) == 1

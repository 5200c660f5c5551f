"""U1: the runner's OpenAI-compatible endpoint serves the scripted reference agents over real
HTTP (the official OpenAI client against it), and keeps every completion it served."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from runner.experiment import ModelSpec
from runner.models.endpoint import serve_model

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


def test_u1_endpoint_forwards_to_any_litellm_model_with_its_env_reference_read(
    monkeypatch: Any,
) -> None:
    # e.g. the local llama.cpp server: an OpenAI-compatible api_base named by os.environ/NAME,
    # no key needed for a local server, the runner's no-hidden-retries rule (L2) kept
    from tests.support.openai_stub import completion, openai_stub

    async def ask(model: ModelSpec) -> Any:
        from openai import AsyncOpenAI

        async with serve_model(model, seed=1, timeout_s=30) as endpoint:
            client = AsyncOpenAI(base_url=endpoint.base_url, api_key="unused", max_retries=0)
            answer = await client.chat.completions.create(model="x", messages=[USER], tools=TOOLS)
            await client.close()
            return answer.choices[0].message

    with openai_stub([completion("booked it")]) as stub:
        monkeypatch.setenv("SURVEY_LOCAL_BASE", stub.url)
        params = {"api_base": "os.environ/SURVEY_LOCAL_BASE"}
        model = ModelSpec.model_validate({"name": "openai/local", "params": params})
        message = asyncio.run(ask(model))
    assert message.content == "booked it"
    (seen,) = stub.requests
    assert seen.body["model"] == "local" and seen.body["tools"] == TOOLS

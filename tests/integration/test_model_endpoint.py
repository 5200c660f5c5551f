"""U1: the runner's OpenAI-compatible endpoint serves the scripted reference agents over real
HTTP (the official OpenAI client against it), and keeps every completion it served."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from runner.experiment import ModelSpec
from runner.models.endpoint import serve_model
from tests.support.booking import ASK, BOOK, SCHEMA

TOOLS = [
    {
        "type": "function",
        "function": {"name": "create_booking", "description": "Book a room.", "parameters": SCHEMA},
    }
]
USER = {"role": "user", "content": ASK}


async def _ask(stream: bool) -> tuple[Any, list[Any]]:
    from openai import AsyncOpenAI

    async with serve_model(ModelSpec(name="scripted/careful"), seed=1, timeout_s=30) as endpoint:
        client = AsyncOpenAI(base_url=endpoint.base_url, api_key=endpoint.token, max_retries=0)
        if stream:
            chunks = [c async for c in await client.chat.completions.create(
                model=endpoint.model, messages=[USER], tools=TOOLS, stream=True)]  # fmt: skip
            answer = next(c.choices[0].delta for c in chunks if c.choices[0].delta.tool_calls)
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


def test_u1_endpoint_answers_a_streamed_request_with_the_tool_call() -> None:
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
            client = AsyncOpenAI(base_url=endpoint.base_url, api_key=endpoint.token, max_retries=0)
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


def test_u4_a_system_prompt_in_text_parts_reaches_a_forwarded_model_as_one_string(
    monkeypatch: Any,
) -> None:
    # Claude Code sends its system prompt as text parts; llama.cpp's server takes a string only
    from tests.support.openai_stub import completion, openai_stub

    async def ask(model: ModelSpec) -> None:
        import httpx

        async with serve_model(model, seed=1, timeout_s=30) as endpoint:
            body = {"model": "m", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}],
                    "system": [{"type": "text", "text": "You are a CLI."},
                               {"type": "text", "text": "You book rooms."}]}  # fmt: skip
            headers = {"x-api-key": endpoint.token}
            async with httpx.AsyncClient(base_url=endpoint.server_url, timeout=30) as client:
                answer = await client.post("/v1/messages", json=body, headers=headers)
            assert answer.status_code == 200, answer.text

    with openai_stub([completion("hello")]) as stub:
        monkeypatch.setenv("SURVEY_LOCAL_BASE", stub.url)
        params = {"api_base": "os.environ/SURVEY_LOCAL_BASE"}
        asyncio.run(ask(ModelSpec.model_validate({"name": "openai/local", "params": params})))
    (seen,) = stub.requests
    system = seen.body["messages"][0]
    assert system == {"role": "system", "content": "You are a CLI.\nYou book rooms."}


def test_u4_tools_without_parameters_and_turns_without_content_reach_a_forwarded_model_whole(
    monkeypatch: Any,
) -> None:
    # qwen-code sends tools without `parameters`, Cline assistant turns without `content`:
    # llama.cpp's server refuses both (a 500 of validation errors, a template error)
    from tests.support.openai_stub import completion, openai_stub

    bare = {"type": "function", "function": {"name": "list_agents", "description": "List."}}
    call = {"id": "c1", "type": "function", "function": {"name": "list_agents", "arguments": "{}"}}
    messages = [USER, {"role": "assistant", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "none"}]  # fmt: skip

    async def ask(model: ModelSpec) -> None:
        from openai import AsyncOpenAI

        async with serve_model(model, seed=1, timeout_s=30) as endpoint:
            client = AsyncOpenAI(base_url=endpoint.base_url, api_key=endpoint.token, max_retries=0)
            await client.chat.completions.create(model="m", messages=messages, tools=[bare])
            await client.close()

    with openai_stub([completion("ok")]) as stub:
        monkeypatch.setenv("SURVEY_LOCAL_BASE", stub.url)
        params = {"api_base": "os.environ/SURVEY_LOCAL_BASE"}
        asyncio.run(ask(ModelSpec.model_validate({"name": "openai/local", "params": params})))
    (seen,) = stub.requests
    assert seen.body["tools"][0]["function"]["parameters"] == {"type": "object", "properties": {}}
    assert "content" in seen.body["messages"][1]


# U4: the APIs agents speak, each streamed as the agent asks, answered by one chat core.
MCP_NAMES = ["create_booking", "get_booking"]


async def _listed() -> list[str]:
    return MCP_NAMES


async def _post(
    path: str, body: object, *, headers: dict[str, str] | None = None, raw: bytes | None = None,
    token: bool = True, mcp: bool = False,
) -> tuple[Any, list[Any]]:  # fmt: skip
    """One request to a fresh endpoint; (the httpx response, what the endpoint kept)."""
    import httpx

    given = {"mcp_tools": _listed, "servers": ("agent-harness",)} if mcp else {}
    async with serve_model(ModelSpec(name="scripted/careful"), 1, 30, **given) as endpoint:  # type: ignore[arg-type]
        sent = {"x-api-key": endpoint.token} if token else {}
        async with httpx.AsyncClient(base_url=endpoint.server_url, timeout=30) as client:
            data = {"content": raw} if raw is not None else {"json": body}
            answer = await client.post(path, headers={**sent, **(headers or {})}, **data)
        return answer, endpoint.served


def _events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data: {")]


def test_u4_anthropic_messages_streamed_carry_the_tool_call() -> None:
    body = {
        "model": "claude-x", "max_tokens": 100, "stream": True,
        "messages": [{"role": "user", "content": USER["content"]}],
        "tools": [{"name": "create_booking", "description": "Book a room.", "input_schema": SCHEMA}],
    }  # fmt: skip
    answer, served = asyncio.run(_post("/v1/messages", body))
    assert answer.status_code == 200 and answer.headers["content-type"] == "text/event-stream"
    events = _events(answer.text)
    start = next(e for e in events if e["type"] == "content_block_start")
    assert start["content_block"]["type"] == "tool_use"
    assert start["content_block"]["name"] == "create_booking"
    args = "".join(
        e["delta"].get("partial_json", "") for e in events if e["type"] == "content_block_delta"
    )
    assert json.loads(args) == BOOK and events[-1]["type"] == "message_stop"
    assert served[0].api == "messages" and served[0].answer["tool_calls"][0]["id"] == "call_1_0"


def test_u4_responses_api_streamed_carries_the_tool_call() -> None:
    tool = {
        "type": "function",
        "name": "create_booking",
        "description": "Book.",
        "parameters": SCHEMA,
    }
    body = {"model": "gpt-x", "input": USER["content"], "tools": [tool], "stream": True}
    answer, served = asyncio.run(_post("/v1/responses", body))
    events = _events(answer.text)
    done = next(e for e in events if e["type"] == "response.output_item.done")
    assert done["item"]["type"] == "function_call" and done["item"]["name"] == "create_booking"
    assert json.loads(done["item"]["arguments"]) == BOOK
    assert events[-1]["type"] == "response.completed" and served[0].api == "responses"


def test_u4_gemini_stream_generate_content_carries_the_function_call() -> None:
    body = {
        "contents": [{"role": "user", "parts": [{"text": USER["content"]}]}],
        "tools": [{"functionDeclarations": [{"name": "create_booking", "parameters": SCHEMA}]}],
    }
    path = "/v1beta/models/scripted/careful:streamGenerateContent?alt=sse"
    answer, served = asyncio.run(_post(path, body))
    parts = [p for e in _events(answer.text) for p in e["candidates"][0]["content"]["parts"]]
    (call,) = [p["functionCall"] for p in parts if "functionCall" in p]
    assert call == {"name": "create_booking", "args": BOOK} and served[0].api == "gemini"


# U4: a failed tool call reaches the scripted model as an error in each API: by the API's flag
# (Anthropic's is_error), else by the words agents pass it on in (OpenAI chat and Responses
# have no flag; Gemini's convention is a response with an `error` member). `scripted/careful`
# cannot check (no reading tool here), so after an error it says it cannot confirm; after a
# result it takes for success it says "Done".
ARGS = json.dumps(BOOK)
GEMINI_TOOLS = [{"functionDeclarations": [{"name": "create_booking", "parameters": SCHEMA}]}]


def _after_result(api: str, text: str, *, is_error: bool = False) -> tuple[str, object]:
    """(path, body): the user's request, the model's booking call and the tool's result."""
    if api == "chat":
        call = {"id": "c1", "type": "function",
                "function": {"name": "create_booking", "arguments": ARGS}}  # fmt: skip
        messages = [USER, {"role": "assistant", "content": None, "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": "c1", "content": text}]  # fmt: skip
        return "/v1/chat/completions", {"model": "m", "messages": messages, "tools": TOOLS}
    if api == "responses":
        tool = {"type": "function", "name": "create_booking", "parameters": SCHEMA}
        items = [{"role": "user", "content": USER["content"]},
                 {"type": "function_call", "call_id": "c1", "name": "create_booking",
                  "arguments": ARGS},
                 {"type": "function_call_output", "call_id": "c1", "output": text}]  # fmt: skip
        return "/v1/responses", {"model": "m", "input": items, "tools": [tool]}
    if api == "messages":
        result = {"type": "tool_result", "tool_use_id": "t1", "content": text}
        if is_error:
            result["is_error"] = True
        messages = [
            {"role": "user", "content": USER["content"]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "create_booking", "input": BOOK}]},
            {"role": "user", "content": [result]},
        ]  # fmt: skip
        tools = [{"name": "create_booking", "input_schema": SCHEMA}]
        return "/v1/messages", {"model": "m", "max_tokens": 100, "messages": messages,
                                "tools": tools}  # fmt: skip
    contents = [
        {"role": "user", "parts": [{"text": USER["content"]}]},
        {"role": "model", "parts": [{"functionCall": {"name": "create_booking", "args": BOOK}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "create_booking",
                                                         "response": json.loads(text)}}]},
    ]  # fmt: skip
    return "/v1beta/models/m:generateContent", {"contents": contents, "tools": GEMINI_TOOLS}


def _final(api: str, text: str, *, is_error: bool = False) -> str:
    path, body = _after_result(api, text, is_error=is_error)
    answer, served = asyncio.run(_post(path, body))
    assert answer.status_code == 200, answer.text
    return str(served[-1].answer["content"])


# (API, the tool result as an agent passes a failed call on): Codex's framing, opencode's and
# the AI SDK's, qwen-code's, Gemini CLI's, Cline's (the MCP result whole)
STATED = [
    ("responses", "Wall time: 0.0113 seconds\nOutput:Error: the request timed out before the "
                  "server answered."),
    ("responses", "Wall time: 0.0231 seconds\nOutput:tool call error: tool call failed for "
                  "`agent-harness/create_booking`\n\nCaused by:\n    Transport closed"),
    ("chat", "MCP error -32001: Request timed out"),
    ("chat", '[{"type":"text","text":"Error: the request timed out before the server answered."}]'),
    ("chat", "MCP tool 'create_booking' reported tool error for function call: {}"),
    ("gemini", '{"error": "MCP tool \'create_booking\' reported tool error"}'),
    ("chat", '{"content":[{"type":"text","text":"the upstream gave no answer"}],"isError":true}'),
]  # fmt: skip


@pytest.mark.parametrize(("api", "text"), STATED)
def test_u4_an_error_an_agent_passes_on_in_words_is_an_error_to_the_scripted_model(
    api: str, text: str
) -> None:
    assert _final(api, text).startswith("I cannot confirm the booking")


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_u4_a_result_that_states_no_error_is_a_success_to_the_scripted_model(api: str) -> None:
    text = "Wall time: 0.02 seconds\nOutput:\n" if api == "responses" else ""
    text += '{"booking_id": "BK-1A2B3C", "guest": "Al", "date": "2026-12-01", "nights": 2}'
    assert _final(api, text) == "Done, booking BK-1A2B3C."


def test_u4_anthropics_is_error_flag_reaches_the_model_as_the_isError_marker() -> None:
    # words that state no error: only the flag says the call failed
    text = "the upstream gave no answer in time"
    assert _final("messages", text, is_error=True).startswith("I cannot confirm the booking")
    assert _final("messages", text) == "Done, the booking went through."


AGENT_TOOLS = [  # an agent's own tools beside the server's: a write verb, a shell, a fetch
    ("write_file", {"type": "object", "properties": {"file_path": {"type": "string"}}}),
    ("run_shell_command", {"type": "object", "properties": {"command": {"type": "string"}}}),
    ("web_fetch", {"type": "object", "properties": {"url": {"type": "string"}}}),
]


@pytest.mark.parametrize(
    "name",
    ["mcp__agent-harness__create_booking", "agent-harness__create_booking",
     "agent-harness_create_booking", "mcp_agent-harness_create_booking",
     "mcp__agent_harness__create_booking", "create_booking"],
)  # fmt: skip
def test_u4_scripted_model_calls_the_mcp_tool_under_the_agents_name_never_a_builtin(
    name: str,
) -> None:
    tools = [
        {"type": "function", "function": {"name": n, "description": "Create it.", "parameters": p}}
        for n, p in [*AGENT_TOOLS, (name, SCHEMA)]
    ]
    body = {"model": "m", "messages": [USER], "tools": tools}
    answer, served = asyncio.run(_post("/v1/chat/completions", body, mcp=True))
    (call,) = answer.json()["choices"][0]["message"]["tool_calls"]
    assert call["function"]["name"] == name and json.loads(call["function"]["arguments"]) == BOOK
    # kept under the upstream's name: M2 matches it with the call the proxy received
    assert served[0].answer["tool_calls"][0]["function"]["name"] == "create_booking"


# U5: the endpoint is the run's alone.
PATHS = [
    ("/v1/chat/completions", {"messages": [USER]}),
    ("/v1/responses", {"input": "hi"}),
    ("/v1/messages", {"messages": [USER], "max_tokens": 5}),
    ("/v1beta/models/m:generateContent", {"contents": [{"parts": [{"text": "hi"}]}]}),
]


@pytest.mark.parametrize(("path", "body"), PATHS)
def test_u5_a_request_without_the_runs_key_is_refused(path: str, body: object) -> None:
    for headers in ({}, {"x-api-key": "wrong"}, {"Authorization": "Bearer unused"}):
        answer, served = asyncio.run(_post(path, body, headers=headers, token=False))
        assert answer.status_code == 401 and not served, (path, headers)
        assert "\n" not in answer.text.strip() and "error" in answer.json()


@pytest.mark.parametrize("form", ["bearer", "x-api-key", "x-goog-api-key", "query"])
def test_u5_the_runs_key_is_taken_in_each_form_clients_send_it(form: str) -> None:
    import httpx

    async def ask() -> int:
        async with serve_model(ModelSpec(name="scripted/careful"), 1, 30) as endpoint:
            headers = {
                "bearer": {"Authorization": f"Bearer {endpoint.token}"},
                "x-api-key": {"x-api-key": endpoint.token},
                "x-goog-api-key": {"x-goog-api-key": endpoint.token},
            }.get(form, {})
            query = f"?key={endpoint.token}" if form == "query" else ""
            async with httpx.AsyncClient(base_url=endpoint.server_url) as client:
                answer = await client.get(f"/v1/models{query}", headers=headers)
            return answer.status_code

    assert asyncio.run(ask()) == 200


def test_u5_each_run_gets_its_own_key_on_the_loopback() -> None:
    async def two() -> tuple[Any, Any]:
        model = ModelSpec(name="scripted/careful")
        async with serve_model(model, 1, 30) as a, serve_model(model, 1, 30) as b:
            return (a.base_url, a.token), (b.base_url, b.token)

    (url_a, key_a), (url_b, key_b) = asyncio.run(two())
    assert url_a.startswith("http://127.0.0.1:") and url_b.startswith("http://127.0.0.1:")
    assert key_a != key_b and len(key_a) >= 32


def test_u5_a_foreign_host_header_is_refused() -> None:
    # DNS rebinding: a page whose name resolves to 127.0.0.1 sends its own Host
    answer, served = asyncio.run(
        _post("/v1/chat/completions", {"messages": [USER]}, headers={"Host": "evil.example"})
    )
    assert answer.status_code == 403 and not served


BAD = [  # (path, raw body): what a confused or hostile client sends
    ("/v1/chat/completions", b"{not json"),
    ("/v1/chat/completions", b"[1, 2]"),
    ("/v1/chat/completions", b'{"messages": "hi"}'),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": {"x": [1]}}]}'),
    ("/v1/messages", b'{"messages": [{"role": "nobody", "content": 7}]}'),
    ("/v1/responses", b'{"input": [{"type": "bogus"}]}'),
    ("/v1beta/models/m:generateContent", b'{"contents": [{"parts": [{"inlineData": 5}]}]}'),
    ("/v1beta/models/m:noSuchMethod", b"{}"),
    ("/v1/no/such/route", b"{}"),
    ("/v1/chat/completions", b"\xff\xfe\x00garbage"),
]


@pytest.mark.parametrize(("path", "raw"), BAD)
def test_u5_a_malformed_request_gets_one_line_of_json_without_a_trace_or_a_path(
    path: str, raw: bytes
) -> None:
    answer, _ = asyncio.run(
        _post(path, None, raw=raw, headers={"content-type": "application/json"})
    )
    text = answer.text.strip()
    # refused, read leniently as litellm's adapter reads it, or failed in the model (502):
    # whichever, one line
    assert "\n" not in text, text
    assert "Traceback" not in text and "site-packages" not in text and ".py" not in text, text
    assert "error" in json.loads(text) if answer.status_code >= 400 else json.loads(text)


def test_u5_a_body_past_the_bound_is_refused_in_one_line() -> None:
    from runner.models.endpoint import MAX_BODY_BYTES

    raw = b'{"messages": "' + b"x" * (MAX_BODY_BYTES + 10) + b'"}'
    answer, served = asyncio.run(_post("/v1/chat/completions", None, raw=raw))
    assert answer.status_code == 413 and "\n" not in answer.text.strip() and not served


def test_u5_a_body_that_stops_halfway_is_refused_in_one_line_after_its_time_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # U5: a client that sends its headers and half its body held the connection for ever.
    from runner.models import endpoint as module

    monkeypatch.setattr(module, "BODY_READ_TIMEOUT_S", 0.5)

    async def half_a_body() -> tuple[bytes, list[Any]]:
        async with serve_model(ModelSpec(name="scripted/careful"), 1, 30) as endpoint:
            port = int(endpoint.base_url.split(":")[2].split("/")[0])
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                b"Authorization: Bearer %s\r\nContent-Type: application/json\r\n"
                b"Content-Length: 100\r\n\r\n{\"messages\": [" % (port, endpoint.token.encode())
            )
            await writer.drain()
            answer = await asyncio.wait_for(reader.read(), 60)  # the bound is the server's
            writer.close()
            return answer, endpoint.served

    answer, served = asyncio.run(half_a_body())
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), answer
    text = body.decode().strip()
    assert "\n" not in text and "did not arrive within 0.5 s" in json.loads(text)["error"]["message"]
    assert not served

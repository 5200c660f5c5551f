"""The model endpoint the runner serves to a command agent (U1, U4, U5).

A command agent (an agent framework, a CLI agent) brings its own model client; pointed at this
endpoint, it is answered through litellm by the spec's model: a scripted reference agent
(`scripted/careful`, `scripted/naive`, ...) the way the runner's own loop is, or any litellm
model (e.g. the local llama.cpp server). It speaks the APIs agents use (U4), each with
server-sent events when the agent asks to stream:

- OpenAI chat completions: `POST /v1/chat/completions`, `GET /v1/models`;
- OpenAI Responses: `POST /v1/responses`;
- Anthropic Messages: `POST /v1/messages`;
- Gemini: `POST /v1beta/models/MODEL:generateContent` and `:streamGenerateContent`.

Every API is translated by litellm's own adapters (its Anthropic-messages adapter, its
Responses <-> chat transformation, its Google GenAI adapter) into one chat completion, which
this module answers (`_Turn`): so every request is kept in one shape, and the runner knows
which tool calls the model asked for; an execution at the upstream that no such call accounts
for was made by the agent's client layer (`client_retry`, M2). The translation runs through a
litellm custom provider (`agent-harness-endpoint/ID`) whose completion is that answer; the
answer itself is a plain (non-streamed) call of the spec's model, streamed to the agent by
litellm's stream translators.

A scripted model is handed only the MCP server's tools, under the upstream's own names (the
agent's names for them are matched by runner.models.toolnames), and its tool calls go back
under the agent's names: it never calls an agent's built-in tool (shell, file edit, web).
A failed tool call reaches the model as the runner's own loop shows it (`ERROR (isError=true):`
before the text): where the API flags it (Anthropic's `is_error`, which litellm's adapter
drops), for every model; where the agent can only say it in words (OpenAI chat and Responses,
Gemini's `{"error": ...}`), for a scripted model, which reads the words
(`runner.models._conversation.states_error`).

U5: the endpoint is the run's alone. It listens on 127.0.0.1 (a free port); every request
carries the run's token (a fresh one per run) as the API key its client sends (`Authorization:
Bearer`, `x-api-key`, `x-goog-api-key` or `?key=`), else 401; the Host header must name the
endpoint (127.0.0.1:PORT or localhost:PORT), else 403 (DNS rebinding); bodies are bounded
(413); any failure is one line of JSON without a stack trace or a path.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import re
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

MAX_BODY_BYTES = 16 * 1024 * 1024
# A client on this machine sends its body at once; one that stops halfway (or a slowloris)
# gets a one-line 408 after this long instead of holding its connection open for ever (U5).
BODY_READ_TIMEOUT_S = 30.0
PROVIDER = "agent-harness-endpoint"  # litellm custom provider that routes to a running endpoint
TOOLS_WAIT_S = 10.0  # how long a request may wait for the proxy to have listed the MCP tools
ERROR_CHARS = 200
_API: ContextVar[str] = ContextVar("api", default="chat")  # the API a request spoke


class ModelParams(Protocol):
    """A model's parameters (a spec's `ModelParams`)."""

    def as_kwargs(self) -> dict[str, Any]: ...


class Model(Protocol):
    """What the endpoint serves: a litellm model name and its parameters (a spec's `ModelSpec`;
    the experiment room stands above this one, so it is named by its shape)."""

    @property
    def name(self) -> str: ...

    @property
    def params(self) -> ModelParams: ...


# The MCP server's tool names as the upstream lists them (None: not listed yet).
McpTools = Callable[[], Awaitable[list[str] | None]]


@dataclass
class Served:
    """One completion: what the model was sent and what it answered (chat shape)."""

    messages: list[dict[str, Any]]
    answer: dict[str, Any]  # the assistant message (tool call ids unique within the run)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    api: str = "chat"  # which API the agent spoke: chat, responses, messages, gemini


@dataclass
class ModelEndpoint:
    """The endpoint while it serves: its URLs, the run's token and the completions so far."""

    base_url: str  # OpenAI clients: http://127.0.0.1:PORT/v1
    model: str
    token: str = ""
    served: list[Served] = field(default_factory=list)

    @property
    def server_url(self) -> str:
        """Anthropic and Gemini clients append their own paths: http://127.0.0.1:PORT."""
        return self.base_url.removesuffix("/v1")

    def conversation(self) -> list[dict[str, Any]]:
        """The run's messages as the model saw them, in order: the user's and tool messages
        each completion brought, then its answer (several conversations follow each other)."""
        out: list[dict[str, Any]] = []
        before = 0
        for item in self.served:
            fresh = item.messages[before:] if len(item.messages) >= before else item.messages
            out += [_plain(m) for m in fresh if m.get("role") in ("user", "tool")]
            out.append(item.answer)
            before = len(item.messages) + 1
        return out

    def tool_calls(self) -> list[tuple[str, str, Any]]:
        """(tool call id, tool, arguments) of every tool call the model asked for, in order;
        an MCP tool under the upstream's name."""
        calls = []
        for item in self.served:
            for call in item.answer.get("tool_calls") or ():
                try:
                    args = json.loads(call["function"]["arguments"] or "{}")
                except (json.JSONDecodeError, TypeError):
                    args = None
                calls.append((call["id"], call["function"]["name"], args))
        return calls


def _plain(message: dict[str, Any]) -> dict[str, Any]:
    """A message with text content (clients may send a list of parts)."""
    content = message.get("content")
    if isinstance(content, list):
        text = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        message = {**message, "content": text}
    return message


class _EndpointLLM:
    """The litellm custom provider `agent-harness-endpoint/ID`: litellm's adapters translate
    an agent's request into a chat completion and call it; it is answered by the endpoint ID
    (streamed as litellm's generic chunks, which litellm's translators turn into each API's
    events)."""

    def __init__(self) -> None:
        self.running: dict[str, _Answerer] = {}

    def _answerer(self, model: str) -> _Answerer:
        return self.running[model.rsplit("/", 1)[-1]]

    async def acompletion(
        self, model: str, messages: list, *_args: Any, optional_params: dict | None = None,
        **_kwargs: Any,
    ) -> Any:  # fmt: skip
        """One chat completion, answered by the endpoint."""
        return await self._answerer(model).complete(messages, optional_params or {})

    async def astreaming(
        self, model: str, messages: list, *_args: Any, optional_params: dict | None = None,
        **_kwargs: Any,
    ) -> AsyncIterator[dict[str, Any]]:  # fmt: skip
        """The same answer as litellm's generic stream chunks: its text, then each tool call."""
        response = await self._answerer(model).complete(messages, optional_params or {})
        message = response.choices[0].message
        calls = list(message.tool_calls or ())
        usage = {
            "prompt_tokens": response.usage.prompt_tokens,
            "completion_tokens": response.usage.completion_tokens,
            "total_tokens": response.usage.total_tokens,
        }
        pieces: list[dict[str, Any]] = []
        if message.content or not calls:
            pieces.append({"text": message.content or "", "tool_use": None})
        for i, call in enumerate(calls):
            tool_use = {
                "id": call.id, "type": "function", "index": i,
                "function": {"name": call.function.name, "arguments": call.function.arguments},
            }  # fmt: skip
            pieces.append({"text": "", "tool_use": tool_use})
        for i, piece in enumerate(pieces):
            last = i == len(pieces) - 1
            yield {
                **piece, "index": 0, "is_finished": last,
                "finish_reason": response.choices[0].finish_reason if last else "",
                "usage": usage if last else None,
            }  # fmt: skip

    # litellm calls these for blocking use; the endpoint never does.
    def completion(self, *_args: Any, **_kwargs: Any) -> Any:
        """Not used: the endpoint is asynchronous."""
        raise NotImplementedError("the model endpoint answers asynchronous calls only")

    def streaming(self, *_args: Any, **_kwargs: Any) -> Any:
        """Not used: the endpoint is asynchronous."""
        raise NotImplementedError("the model endpoint answers asynchronous calls only")


_HANDLER: _EndpointLLM | None = None


def _register() -> _EndpointLLM:
    """The custom provider, registered with litellm once per process."""
    global _HANDLER
    from litellm.llms.custom_llm import CustomLLM

    from runner.models.calls import litellm_quietly

    litellm = litellm_quietly()
    if _HANDLER is None:
        _HANDLER = type("EndpointLLM", (_EndpointLLM, CustomLLM), {})()
    if not any(e["custom_handler"] is _HANDLER for e in litellm.custom_provider_map):
        others = [e for e in litellm.custom_provider_map if e["provider"] != PROVIDER]
        litellm.custom_provider_map = [*others, {"provider": PROVIDER, "custom_handler": _HANDLER}]
    return _HANDLER


class _Answerer:
    """Answers the chat completions of one endpoint with its model, and keeps them."""

    def __init__(
        self, model: Model, seed: int, timeout_s: float, endpoint: ModelEndpoint,
        mcp_tools: McpTools | None, servers: Iterable[str],
    ) -> None:  # fmt: skip
        self.model, self.seed, self.timeout_s = model, seed, timeout_s
        self.endpoint, self.mcp_tools, self.servers = endpoint, mcp_tools, tuple(servers)
        self.scripted = model.name.startswith("scripted/")

    async def _names(self, tools: list[dict[str, Any]]) -> dict[str, str] | None:
        """The offered tools that are the MCP server's -> their upstream names (None: every
        tool passes as it is, for an endpoint without a proxy)."""
        if self.mcp_tools is None:
            return None
        from runner.models.toolnames import mcp_tool_names

        offered = [_tool_name(t) for t in tools]
        deadline = time.monotonic() + TOOLS_WAIT_S
        upstream = await self.mcp_tools()
        # An agent offers an MCP tool only after listing it through the proxy, which logs the
        # upstream's list as it answers; a moment may pass before that log line is read.
        while upstream is None and offered and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            upstream = await self.mcp_tools()
        return mcp_tool_names([o for o in offered if o], upstream or (), self.servers)

    async def complete(self, messages: list[Any], given: dict[str, Any]) -> Any:
        """One chat completion of the spec's model, kept; tool calls named for the agent."""
        import litellm

        from runner.models.calls import plan_call, takes_seed

        tools = [_with_parameters(t) for t in given.get("tools") or () if isinstance(t, dict)]
        names = await self._names(tools)
        sent = [_text_joined(dict(m)) for m in messages]
        if names is not None:
            recorded = {**{v: v for v in names.values()}, **names}
        else:
            recorded = {}
        if self.scripted and names is not None:
            # the scripted model sees the MCP server's tools as the server names them, and only
            # those: it must never pick one of the agent's own tools
            tools = [
                _renamed_tool(t, names[_tool_name(t)]) for t in tools if _tool_name(t) in names
            ]
            sent = [_renamed_message(m, names) for m in sent]
        if self.scripted:
            # where the agent's API has no error flag, the error is in the text: the scripted
            # model reads it there, as a model reads words (it takes only the runner's marker)
            sent = [_error_marked(m) for m in sent]
        params = self.model.params.as_kwargs()
        if takes_seed(self.model.name, params):
            params["seed"] = self.seed
        # L2 as in the runner's own loop: os.environ/NAME read now, the runner's deadline, no
        # hidden retries, a placeholder key for a local server
        params = plan_call(self.model.name, params, self.timeout_s).kwargs
        if tools:
            params["tools"] = tools
            choice = given.get("tool_choice")
            if choice is not None and (isinstance(choice, str) or not self.scripted):
                params["tool_choice"] = choice
            if given.get("parallel_tool_calls") is not None:
                params["parallel_tool_calls"] = given["parallel_tool_calls"]
        response = await litellm.acompletion(model=self.model.name, messages=sent, **params)
        data = response.model_dump()
        answer = data["choices"][0]["message"]
        number = len(self.endpoint.served) + 1
        to_agent = {up: name for name, up in (names or {}).items()} if self.scripted else {}
        calls, kept = [], []
        for i, call in enumerate(answer.get("tool_calls") or ()):  # ids unique within the run
            name = call["function"]["name"]
            arguments = call["function"].get("arguments") or "{}"
            call_id = f"call_{number}_{i}"
            calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": to_agent.get(name, name), "arguments": arguments},
                }
            )
            kept.append({"id": call_id, "type": "function",
                         "function": {"name": recorded.get(name, name), "arguments": arguments}})  # fmt: skip
        content = answer.get("content")
        clean: dict[str, Any] = {"role": "assistant", "content": content}
        if kept:
            clean["tool_calls"] = kept
        usage = data.get("usage") or {}
        prompt, completion = usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0
        self.endpoint.served.append(Served(sent, clean, prompt, completion, _API.get()))
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        return litellm.ModelResponse(
            id=f"chatcmpl-{number}",
            model=self.endpoint.model,
            choices=[{"index": 0, "message": message,
                      "finish_reason": "tool_calls" if calls else "stop"}],
            usage={"prompt_tokens": prompt, "completion_tokens": completion,
                   "total_tokens": prompt + completion},
        )  # fmt: skip


# The shapes below are the same request to an OpenAI-compatible model, written the way every
# server reads it: llama.cpp's server (the local model) refuses the other spellings.


def _text_joined(message: dict[str, Any]) -> dict[str, Any]:
    """A message whose content is only text parts, with its text as one string (Claude Code
    sends its system prompt in parts), and a content member always there (Cline's assistant
    turns with tool calls have none); parts of other kinds (images) are left as they are."""
    content = message.get("content")
    if isinstance(content, list) and all(
        isinstance(p, dict) and p.get("type") == "text" for p in content
    ):
        message["content"] = "\n".join(str(p.get("text", "")) for p in content)
    if message.get("content") is None and message.get("tool_calls"):
        message["content"] = ""  # litellm drops a null content, and the key with it
    return message


def _with_parameters(tool: dict[str, Any]) -> dict[str, Any]:
    """A function tool with its parameters schema: an empty object where the agent gave none
    (qwen-code's tools without arguments), which is what no schema means."""
    fn = tool.get("function")
    if isinstance(fn, dict) and "parameters" not in fn:
        return {**tool, "function": {**fn, "parameters": {"type": "object", "properties": {}}}}
    return tool


def _error_marked(message: dict[str, Any]) -> dict[str, Any]:
    """A tool message whose text states an error, under the runner's isError marker."""
    from runner.models._conversation import content_text, states_error
    from runner.models.loop import ERROR_MARK

    if message.get("role") != "tool":
        return message
    text = content_text(message.get("content"))
    if text.lstrip().startswith(ERROR_MARK) or not states_error(text):
        return message
    return {**message, "content": f"{ERROR_MARK}\n{text}"}


def _flag_anthropic_errors(messages: list[Any]) -> list[Any]:
    """Anthropic tool results with `is_error: true`, their flag carried in the text as the
    runner's isError marker: litellm's Messages adapter drops the flag, and a model behind the
    endpoint must see it as a model behind Anthropic's API does (R3: isError made visible)."""
    from runner.models.loop import ERROR_MARK

    out = []
    for message in messages:
        blocks = message.get("content") if isinstance(message, dict) else None
        if isinstance(blocks, list):
            blocks = [
                {**b, "content": _marked_content(b.get("content"), ERROR_MARK)}
                if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("is_error")
                else b
                for b in blocks
            ]
            message = {**message, "content": blocks}
        out.append(message)
    return out


def _marked_content(content: Any, mark: str) -> Any:
    if isinstance(content, list):
        return [{"type": "text", "text": mark}, *content]
    return f"{mark}\n{content or ''}"


def _tool_name(tool: dict[str, Any]) -> str:
    fn = tool.get("function")
    return str(fn.get("name") or "") if isinstance(fn, dict) else str(tool.get("name") or "")


def _renamed_tool(tool: dict[str, Any], name: str) -> dict[str, Any]:
    fn = tool.get("function")
    if isinstance(fn, dict):
        return {**tool, "function": {**fn, "name": name}}
    return {**tool, "name": name}


def _renamed_message(message: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    """An earlier assistant turn's tool calls (and tool results) under the upstream's names."""
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        renamed = []
        for call in calls:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict) and fn.get("name") in names:
                call = {**call, "function": {**fn, "name": names[fn["name"]]}}
            renamed.append(call)
        message = {**message, "tool_calls": renamed}
    if message.get("role") == "tool" and message.get("name") in names:
        message = {**message, "name": names[message["name"]]}
    return message


@asynccontextmanager
async def serve_model(
    model: Model, seed: int, timeout_s: float, *, mcp_tools: McpTools | None = None,
    servers: Iterable[str] = (),
) -> AsyncIterator[ModelEndpoint]:  # fmt: skip
    """Serve `model` on 127.0.0.1 (a free port, a fresh token) while the block runs.
    `mcp_tools` reads the upstream's tool names; `servers` are the MCP server's names in the
    agent's configuration (how agents prefix its tools)."""
    from aiohttp import web

    _Runner = _runner_class()
    if model.name.startswith("scripted/"):
        from runner.models.scripted import register_scripted_provider

        register_scripted_provider()
    handler = _register()
    endpoint = ModelEndpoint(base_url="", model=model.name, token=secrets.token_urlsafe(32))
    key = secrets.token_hex(8)
    handler.running[key] = _Answerer(model, seed, timeout_s, endpoint, mcp_tools, servers)
    routed = f"{PROVIDER}/{key}"
    allowed_hosts: set[str] = set()

    @web.middleware
    async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
        api = _api_of(request.path)
        if request.host not in allowed_hosts:  # U5: DNS rebinding
            return _error(web, api, 403, "the Host header must name this endpoint (127.0.0.1)")
        if not _authorised(request, endpoint.token):
            return _error(web, api, 401, "a valid API key for this endpoint is required")
        try:
            return await handler(request)
        except web.HTTPException as exc:  # 404, 405, 413 ... as one line of JSON
            return _error(web, api, exc.status, exc.reason or "refused")
        except Exception as exc:  # never a stack trace or a path in an answer
            return _error(web, api, _status(exc), _one_line(exc))

    async def chat(request: web.Request) -> web.StreamResponse:
        import litellm

        body = await _body(request, "messages", list)
        stream = bool(body.get("stream"))
        asked = str(body.get("model") or model.name)
        extra = {k: body[k] for k in ("tools", "tool_choice", "parallel_tool_calls") if body.get(k)}
        if stream and isinstance(body.get("stream_options"), dict):
            extra["stream_options"] = body["stream_options"]
        _API.set("chat")
        answer = await litellm.acompletion(
            model=routed, messages=body["messages"], stream=stream, **extra
        )
        if not stream:
            return web.json_response(_for_agent(answer.model_dump(), asked))
        chunks = (
            f"data: {json.dumps(_for_agent(c.model_dump(exclude_none=True), asked))}\n\n".encode()
            async for c in answer
        )
        return await _sse(web, request, _then(chunks, b"data: [DONE]\n\n"))

    async def responses(request: web.Request) -> web.StreamResponse:
        import litellm

        body = await _body(request, "input", (str, list))
        _API.set("responses")
        # what the agent asks of the conversation; its sampling and reasoning settings are the
        # served model's business (the spec's `params`), not the agent's
        given = {k: body[k] for k in _RESPONSES_FIELDS if body.get(k) is not None}
        answer = await litellm.aresponses(model=routed, **given)
        if not body.get("stream"):
            return web.json_response(json.loads(answer.model_dump_json()))
        events = (
            f"event: {getattr(e.type, 'value', e.type)}\ndata: {e.model_dump_json(exclude_none=True)}\n\n".encode()
            async for e in answer
        )
        return await _sse(web, request, events)

    async def messages(request: web.Request) -> web.StreamResponse:
        import litellm

        body = await _body(request, "messages", list)
        _API.set("messages")
        given = {k: body[k] for k in _MESSAGES_FIELDS if body.get(k) is not None}
        given["messages"] = _flag_anthropic_errors(given["messages"])
        given.setdefault("max_tokens", 4096)
        answer = await litellm.anthropic.messages.acreate(model=routed, **given)
        if not body.get("stream"):
            return web.json_response(answer)
        return await _sse(web, request, answer.__aiter__())

    async def gemini(request: web.Request) -> web.StreamResponse:
        from litellm.google_genai.adapters.handler import GenerateContentToCompletionHandler
        from litellm.types.router import GenericLiteLLMParams

        method = request.match_info["method"]
        if method not in ("generateContent", "streamGenerateContent"):
            raise web.HTTPNotFound(reason=f"no method {method!r}")
        body = await _body(request, "contents", (list, dict))
        stream = method == "streamGenerateContent"
        _API.set("gemini")
        given = {
            k: body[k]
            for k in ("tools", "toolConfig", "systemInstruction")
            if body.get(k) is not None
        }
        answer = await GenerateContentToCompletionHandler.async_generate_content_handler(
            model=routed, contents=body["contents"], config=body.get("generationConfig"),
            litellm_params=GenericLiteLLMParams(), stream=stream, **given,
        )  # fmt: skip
        if isinstance(answer, dict):
            return web.json_response(answer)
        return await _sse(web, request, answer.__aiter__())

    async def models(request: web.Request) -> web.Response:
        entry = {"id": model.name, "object": "model", "owned_by": "agent-harness"}
        return web.json_response({"object": "list", "data": [entry]})

    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[guard])
    for prefix in ("/v1", ""):
        app.router.add_post(f"{prefix}/chat/completions", chat)
        app.router.add_post(f"{prefix}/responses", responses)
        app.router.add_post(f"{prefix}/messages", messages)
        app.router.add_get(f"{prefix}/models", models)
    for version in ("v1beta", "v1"):
        app.router.add_post(f"/{version}/models/{{name:[^:]+}}:{{method}}", gemini)
    runner = _Runner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    allowed_hosts.update({f"127.0.0.1:{port}", f"localhost:{port}"})
    endpoint.base_url = f"http://127.0.0.1:{port}/v1"
    try:
        yield endpoint
    finally:
        handler.running.pop(key, None)
        await runner.cleanup()


def _runner_class() -> type:
    """aiohttp's AppRunner whose connections refuse what its HTTP parser cannot read (HTTP/1.1
    without a Host, bytes after `Connection: close`, a broken chunk) as the endpoint refuses
    everything else: one line of JSON in the API's shape, not aiohttp's text, which echoes the
    request's bytes over several lines (U5)."""
    from aiohttp import web, web_protocol

    class OneLineErrors(web_protocol.RequestHandler):
        def handle_error(
            self, request: Any, status: int = 500, exc: BaseException | None = None,
            message: str | None = None,
        ) -> Any:  # fmt: skip
            super().handle_error(request, status, exc, message)  # logs, or raises if answered
            reason = "the request is not valid HTTP" if status == 400 else "refused"
            response = _error(web, _api_of(request.path), status, reason)
            response.force_close()
            return response

    class Server(web.Server):
        def __call__(self) -> Any:
            try:  # aiohttp's internals (as of 3.14): another version gets its plain handler
                return OneLineErrors(self, loop=self._loop, **self._kwargs)
            except AttributeError:
                return super().__call__()

    class Runner(web.AppRunner):
        async def _make_server(self) -> Any:
            server = await super()._make_server()
            server.__class__ = Server
            return server

    return Runner


_RESPONSES_FIELDS = (
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "stream",
)
_MESSAGES_FIELDS = ("messages", "system", "tools", "tool_choice", "max_tokens", "stream")


def _api_of(path: str) -> str:
    if path.endswith("/messages"):
        return "messages"
    if ":" in path.rsplit("/", 1)[-1]:
        return "gemini"
    return "responses" if path.endswith("/responses") else "chat"


def _authorised(request: Any, token: str) -> bool:
    """U5: the run's token as any of the API keys the agents' clients send."""
    given = [
        request.headers.get("x-api-key"),
        request.headers.get("x-goog-api-key"),
        request.query.get("key"),
    ]
    bearer = request.headers.get("Authorization", "")
    if bearer[:7].lower() == "bearer ":
        given.append(bearer[7:].strip())
    return any(g is not None and hmac.compare_digest(g.encode(), token.encode()) for g in given)


async def _body(request: Any, required: str, kind: type | tuple[type, ...]) -> dict[str, Any]:
    """The request's JSON object, with its one required member of the right type."""
    from aiohttp import web

    try:  # bounded by client_max_size (413 past it) and by time
        raw = await asyncio.wait_for(request.read(), BODY_READ_TIMEOUT_S)
    except TimeoutError:
        raise web.HTTPRequestTimeout(
            reason=f"the body did not arrive within {BODY_READ_TIMEOUT_S:g} s"
        ) from None
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise web.HTTPBadRequest(reason="the body is not JSON") from None
    except RecursionError:  # nested past what the parser descends: the client's error, not a 502
        raise web.HTTPBadRequest(reason="the body is nested too deeply") from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(reason="the body must be a JSON object")
    if not isinstance(body.get(required), kind):
        raise web.HTTPBadRequest(reason=f"`{required}` is missing or of the wrong type")
    return body


def _for_agent(data: dict[str, Any], model: str) -> dict[str, Any]:
    """A chat completion (or chunk) under the model name the agent asked for."""
    return {**data, "model": model}


async def _then(items: AsyncIterator[bytes], last: bytes) -> AsyncIterator[bytes]:
    async for item in items:
        yield item
    yield last


async def _sse(web: Any, request: Any, events: AsyncIterator[Any]) -> Any:
    """Server-sent events; the first is awaited before the answer starts, so a model that
    fails is a one-line error with its status, not a broken stream."""
    first = await events.__anext__()
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    await response.write(first if isinstance(first, bytes) else str(first).encode())
    async for event in events:
        await response.write(event if isinstance(event, bytes) else str(event).encode())
    await response.write_eof()
    return response


_PATH = re.compile(r"(?:[A-Za-z]:)?(?:/[\w.@+-]+){2,}/?|https?://\S+")


def _one_line(exc: BaseException) -> str:
    """An exception as one short line: no traceback, no file path, no URL."""
    text = " ".join(str(exc).split("\n")[0].split())
    text = _PATH.sub("<...>", text)[:ERROR_CHARS]
    return f"the model call failed: {type(exc).__name__}: {text}" if text else (
        f"the model call failed: {type(exc).__name__}")  # fmt: skip


def _status(exc: BaseException) -> int:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) and 400 <= status < 600 and status != 500 else 502


_GEMINI_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                  404: "NOT_FOUND", 413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED"}  # fmt: skip


def _error(web: Any, api: str, status: int, message: str) -> Any:
    """The error in the shape the agent's client reads for its API."""
    if api == "messages":
        kind = {401: "authentication_error", 403: "permission_error", 404: "not_found_error",
                413: "request_too_large"}.get(status, "invalid_request_error" if status < 500
                                               else "api_error")  # fmt: skip
        body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    elif api == "gemini":
        state = _GEMINI_STATUS.get(status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION")
        body = {"error": {"code": status, "message": message, "status": state}}
    else:
        kind = "invalid_request_error" if status < 500 else "api_error"
        body = {"error": {"message": message, "type": kind, "code": status}}
    return web.json_response(body, status=status)

"""An OpenAI-compatible chat endpoint the runner serves to a command agent (U1).

A command agent (an agent framework, a CLI agent) brings its own model client; pointed at this
endpoint (`{model_base_url}`, `{model}` in its spec entry), it is answered through litellm by
the spec's model: a scripted reference agent (`scripted/careful`, `scripted/naive`, ...) the
way the runner's own loop is, or any litellm model (e.g. the local llama.cpp server). Every
completion is kept, so the runner knows which tool calls the model asked for: each one is a
model-requested call, and an execution at the upstream that no such call accounts for was made
by the agent's client layer (`client_retry`, M2).

`POST /v1/chat/completions` (JSON; `stream: true` is answered as one server-sent chunk and
`[DONE]`), `GET /v1/models`. It listens on 127.0.0.1, on a free port, for one run.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol


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


MAX_BODY_BYTES = 16 * 1024 * 1024


@dataclass
class Served:
    """One chat completion: what the agent sent and what the model answered."""

    messages: list[dict[str, Any]]
    answer: dict[str, Any]  # the assistant message (tool call ids unique within the run)
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class ModelEndpoint:
    """The endpoint while it serves: its URL and the completions served so far."""

    base_url: str
    model: str
    served: list[Served] = field(default_factory=list)

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
        """(tool call id, tool, arguments) of every tool call the model asked for, in order."""
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
    """A message with text content (frameworks may send a list of parts)."""
    content = message.get("content")
    if isinstance(content, list):
        text = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        message = {**message, "content": text}
    return message


@asynccontextmanager
async def serve_model(model: Model, seed: int, timeout_s: float) -> AsyncIterator[ModelEndpoint]:
    """Serve `model` on 127.0.0.1 (a free port) while the block runs."""
    from aiohttp import web

    from runner.models.calls import plan_call, takes_seed

    if model.name.startswith("scripted/"):
        from runner.models.scripted import register_scripted_provider

        register_scripted_provider()
    import litellm

    endpoint = ModelEndpoint(base_url="", model=model.name)

    async def completions(request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(web, 400, "the body is not JSON")
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list):
            return _error(web, 400, "`messages` must be a list")
        params = model.params.as_kwargs()
        if takes_seed(model.name, params):
            params["seed"] = seed
        # L2 as in the runner's own loop: os.environ/NAME read now, the runner's deadline, no
        # hidden retries, a placeholder key for a local server
        params = plan_call(model.name, params, timeout_s).kwargs
        for key in ("tools", "tool_choice", "parallel_tool_calls"):
            if body.get(key) is not None and not (key == "tools" and not body[key]):
                params[key] = body[key]
        try:
            response = await litellm.acompletion(model=model.name, messages=messages, **params)
        except Exception as exc:  # the agent sees a provider error, the run goes on
            text = f"{type(exc).__name__}: {str(exc).strip()[:300]}"
            return _error(web, 502, text)
        data = response.model_dump()
        answer = data["choices"][0]["message"]
        number = len(endpoint.served) + 1
        calls = answer.get("tool_calls") or []
        for i, call in enumerate(calls):  # unique ids within the run (M2 traces them)
            call["id"] = f"call_{number}_{i}"
        clean = {"role": "assistant", "content": answer.get("content")}
        if calls:
            clean["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": dict(c["function"])} for c in calls
            ]
        usage = data.get("usage") or {}
        endpoint.served.append(
            Served(
                messages, clean, usage.get("prompt_tokens") or 0,
                usage.get("completion_tokens") or 0,
            )
        )  # fmt: skip
        out = {
            "id": f"chatcmpl-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or model.name,
            "choices": [
                {
                    "index": 0,
                    "message": clean,
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": usage.get("prompt_tokens") or 0,
                "completion_tokens": usage.get("completion_tokens") or 0,
                "total_tokens": usage.get("total_tokens") or 0,
            },
        }
        if body.get("stream"):
            return await _streamed(web, request, out)
        return web.json_response(out)

    async def models(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "object": "list",
                "data": [{"id": model.name, "object": "model", "owned_by": "agent-harness"}],
            }
        )

    app = web.Application(client_max_size=MAX_BODY_BYTES)
    for prefix in ("/v1", ""):
        app.router.add_post(f"{prefix}/chat/completions", completions)
        app.router.add_get(f"{prefix}/models", models)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    endpoint.base_url = f"http://127.0.0.1:{port}/v1"
    try:
        yield endpoint
    finally:
        await runner.cleanup()


def _error(web: Any, status: int, message: str) -> Any:
    return web.json_response(
        {"error": {"message": message, "type": "invalid_request_error", "code": status}},
        status=status,
    )


async def _streamed(web: Any, request: Any, out: dict[str, Any]) -> Any:
    """The completion as one chunk of a server-sent event stream, then [DONE]."""
    message = out["choices"][0]["message"]
    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]
    chunk = {
        **{k: out[k] for k in ("id", "created", "model")},
        "object": "chat.completion.chunk",
        "choices": [
            {"index": 0, "delta": delta, "finish_reason": out["choices"][0]["finish_reason"]}
        ],
        "usage": out["usage"],
    }
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    await response.write(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode())
    await response.write_eof()
    return response

"""Provider failures through litellm's real HTTP path (L2, issue 12).

The model is `openai/...` with `api_base` on a small OpenAI-compatible endpoint written for
these tests (tests/support/openai_stub.py, 127.0.0.1, port 0): litellm's OpenAI client, its HTTP
transport and its exception mapping all run; nothing of litellm is patched. The stub counts
the requests that really arrived, which is how hidden client retries would show.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from runner.models.calls import LOCAL_PLACEHOLDER_KEY  # noqa: E402
from runner.models.loop import (  # noqa: E402
    AgentResult,
    LoopLimits,
    ModelCallFailed,
    RetryPolicy,
    run_conversation,
)
from tests.support.openai_stub import HANG, completion, error, openai_stub, refused_url  # noqa: E402

pytestmark = pytest.mark.anyio

NO_WAIT = RetryPolicy(attempts=3, backoff_s=0, max_backoff_s=0)


async def _no_tools(name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
    raise AssertionError("no tool may be called")


async def converse(
    url: str,
    *,
    model: str = "openai/stub-model",
    params: dict[str, Any] | None = None,
    limits: LoopLimits | None = None,
    retry: RetryPolicy = NO_WAIT,
) -> AgentResult:
    """One user message to the model behind `url`, through the runner's loop."""
    return await run_conversation(
        model=model, params={"api_base": url, **(params or {})}, system_prompt="",
        user_messages=["Hello"], tools=[], call_tool=_no_tools,
        limits=limits or LoopLimits(model_timeout_s=30), retry=retry,
    )  # fmt: skip


async def test_l2_a_timeout_model_parameter_does_not_collide_with_the_runners():
    # Issue 12: `acompletion() got multiple values for keyword argument 'timeout'`.
    with openai_stub([]) as stub:
        result = await converse(stub.url, params={"timeout": 300})
    assert result.final_answer == "done" and len(stub.requests) == 1


async def test_l2_model_timeout_is_a_deadline_per_call_without_hidden_client_retries():
    with openai_stub([], default=HANG) as stub:
        with pytest.raises(ModelCallFailed) as info:
            await converse(
                stub.url,
                limits=LoopLimits(model_timeout_s=0.5),
                retry=RetryPolicy(attempts=2, backoff_s=0, max_backoff_s=0),
            )
        # Two attempts of the runner, one HTTP request each: the OpenAI client retried nothing.
        assert len(stub.requests) == 2
    assert str(info.value) == "Timeout: no answer from openai/stub-model within 0.5 s"


async def test_l2_a_shorter_model_timeout_parameter_shortens_the_deadline():
    with openai_stub([], default=HANG) as stub:
        with pytest.raises(ModelCallFailed, match="within 0.5 s"):
            await converse(
                stub.url,
                params={"timeout": 0.5},
                limits=LoopLimits(model_timeout_s=300),
                retry=RetryPolicy(attempts=1),
            )
        assert len(stub.requests) == 1


async def test_l2_429_with_retry_after_is_waited_out_then_the_call_succeeds():
    with openai_stub([error(429, "slow down", {"Retry-After": "1"})]) as stub:
        result = await converse(
            stub.url, retry=RetryPolicy(attempts=2, backoff_s=0, max_backoff_s=5)
        )
        first, second = stub.requests
    assert result.final_answer == "done"
    # backoff_s is 0: the wait comes from Retry-After alone.
    assert second.at - first.at >= 1.0


async def test_l2_a_retry_after_beyond_max_backoff_fails_at_once_and_says_why():
    with openai_stub([], default=error(429, "quota", {"Retry-After": "3600"})) as stub:
        with pytest.raises(ModelCallFailed) as info:
            await converse(stub.url, retry=RetryPolicy(attempts=4, backoff_s=0, max_backoff_s=5))
        assert len(stub.requests) == 1
    assert str(info.value).startswith("RateLimitError")
    assert "asks to wait 3600 s, more than retry.max_backoff_s 5" in str(info.value)


async def test_l2_500_is_retried_by_the_runner_only_and_no_banner_reaches_stdout(capfd):
    with openai_stub([], default=error(500, "upstream exploded")) as stub:
        with pytest.raises(ModelCallFailed, match="InternalServerError") as info:
            await converse(stub.url)
        assert len(stub.requests) == NO_WAIT.attempts
    assert "upstream exploded" in str(info.value)
    out = capfd.readouterr().out
    assert "Give Feedback" not in out and "Provider List" not in out and "LiteLLM.Info" not in out


async def test_l2_connection_refused_names_host_and_port(capfd):
    url = refused_url()
    port = url.split(":")[2].split("/")[0]
    with pytest.raises(ModelCallFailed) as info:
        await converse(url, retry=RetryPolicy(attempts=2, backoff_s=0, max_backoff_s=0))
    message = str(info.value)
    assert "Connection error" in message
    assert f"(model openai/stub-model at 127.0.0.1:{port}: " in message
    assert "Give Feedback" not in capfd.readouterr().out


async def test_l2_500_then_success_goes_on():
    with openai_stub([error(500), error(503)]) as stub:
        result = await converse(stub.url)
    assert result.final_answer == "done" and len(stub.requests) == 3


# -- keys for a local server -------------------------------------------------------------------


async def test_v3_a_local_server_needs_no_key_and_never_gets_the_real_one(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-provider-key")
    with openai_stub([]) as stub:
        await converse(stub.url)
    (request,) = stub.requests
    assert request.headers["authorization"] == f"Bearer {LOCAL_PLACEHOLDER_KEY}"


async def test_v3_an_environment_reference_is_read_when_the_model_is_called(monkeypatch):
    monkeypatch.setenv("AGENT_HARNESS_TEST_KEY", "local-secret")
    with openai_stub([]) as stub:
        await converse(stub.url, params={"api_key": "os.environ/AGENT_HARNESS_TEST_KEY"})
    assert stub.requests[0].headers["authorization"] == "Bearer local-secret"


async def test_v3_an_unset_environment_reference_fails_the_call_by_name(monkeypatch):
    monkeypatch.delenv("AGENT_HARNESS_TEST_KEY", raising=False)
    with pytest.raises(ModelCallFailed, match="AGENT_HARNESS_TEST_KEY, which is not set"):
        await converse(
            "http://127.0.0.1:9/v1", params={"api_key": "os.environ/AGENT_HARNESS_TEST_KEY"}
        )


# -- cost ----------------------------------------------------------------------------------------


async def test_an_unpriced_model_costs_unknown_not_zero(capfd):
    with openai_stub([], default=completion(model="smollm2")) as stub:
        result = await converse(stub.url, model="openai/smollm2")
    assert result.usage.cost_usd is None
    assert "Provider List" not in capfd.readouterr().out


async def test_cost_comes_from_the_model_that_answered_not_the_one_asked_for():
    # Issue 12: openai/gpt-4o-mini sent to a local server (OPENAI_API_BASE) that answered as
    # smollm2 was stored with gpt-4o-mini's prices.
    with openai_stub([], default=completion(model="smollm2")) as stub:
        local = await converse(stub.url, model="openai/gpt-4o-mini")
    with openai_stub([], default=completion(model="gpt-4o-mini-2024-07-18")) as stub:
        hosted = await converse(stub.url, model="openai/gpt-4o-mini")
    assert local.usage.cost_usd is None
    assert hosted.usage.cost_usd is not None and hosted.usage.cost_usd > 0


# -- a whole run against the endpoint ----------------------------------------------------------


# A bare name (gpt-4o-mini) is OpenAI's to litellm too: it gets the seed like openai/NAME.
@pytest.mark.parametrize("name", ["openai/smollm2", "gpt-4o-mini"])
async def test_a_whole_run_passes_its_seed_and_stores_an_unknown_cost(tmp_path, name):
    from runner.execute import execute_run
    from runner.experiment import load_spec
    from runner.experiment.matrix import expand

    with openai_stub([], default=completion(model="smollm2")) as stub:
        path = tmp_path / "spec.yaml"
        path.write_text(
            "name: seeded\n"
            f"models: [{{name: {name}, params: {{api_base: '{stub.url}'}}}}]\n"
            "prompts: [{name: p, text: Be careful.}]\n"
            "upstreams: [{name: b, builtin: booking}]\n"
            "conversations: [{name: c, user: Book a room.}]\n",
            encoding="utf-8",
        )
        spec = load_spec(path)
        (cell,) = expand(spec)
        record = await execute_run(cell, spec, in_process="always")
    assert record.status == "ok", record.error
    # The run's own seed: a local llama.cpp server replays the run from it.
    assert [r.body["seed"] for r in stub.requests] == [cell.seed]
    assert record.cost_usd is None and record.model_params_json == f'{{"api_base": "{stub.url}"}}'

"""L2 at the edge: provider names, runner-owned parameters and key references in a spec.

A provider typo must fail when the spec is read (and in `--dry-run`), with FILE:LINE, not in
every run; `load_spec` must not import litellm for it (seconds), so the names are read from the
installed litellm's source, and a test checks that they equal what litellm itself lists.
"""

import os
from pathlib import Path

import pytest

from runner.experiment import SpecError, load_spec
from runner.experiment._providers import (
    RUNNER_PROVIDERS,
    _litellm_providers,
    known_providers,
    read_by_import,
    registered_providers,
)
from tests.support.specs import write_models


def error_of(path: Path) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return str(info.value)


def test_l2_provider_names_read_from_source_equal_litellms_own_list():
    # If litellm changes the shape of its source, known_providers() falls back to the import;
    # this test then still passes, and the fallback's cost shows in the spec-load time.
    assert _litellm_providers() == read_by_import()
    assert known_providers() == _litellm_providers() | RUNNER_PROVIDERS | registered_providers()
    assert {"openai", "anthropic", "ollama_chat", "scripted"} <= known_providers()


def test_l2_a_provider_typo_fails_at_load_with_file_line_and_a_suggestion(tmp_path):
    path = write_models(tmp_path, "  - scripted/careful\n  - name: opnai/smollm2\n    label: small")
    assert error_of(path) == (
        f"{path}:4: models[1].name: unknown litellm provider 'opnai' (did you mean 'openai'?)"
    )


def test_l2_a_custom_llm_provider_is_checked_too(tmp_path):
    path = write_models(tmp_path, "  - name: smollm2\n    params: {custom_llm_provider: zzzz}")
    message = error_of(path)
    assert message.startswith(f"{path}:4: models[0].params.custom_llm_provider: ")
    assert "unknown litellm provider 'zzzz'" in message and "openai/NAME" in message


@pytest.mark.parametrize(
    "name", ["openai/smollm2", "ollama_chat/qwen3:14b", "anthropic/claude-haiku-4-5", "gpt-4o"]
)
def test_l2_known_providers_and_bare_names_load(tmp_path, name):
    assert load_spec(write_models(tmp_path, f"  - {name}")).models[0].name == name


@pytest.mark.parametrize("key", ["max_retries", "num_retries"])
def test_l2_retries_of_the_client_are_the_runners_and_not_a_spec_parameter(tmp_path, key):
    path = write_models(tmp_path, f"  - name: openai/gpt-4o-mini\n    params: {{{key}: 3}}")
    assert f"models[0].params.{key}: not allowed in a spec" in error_of(path)
    assert "retry:" in error_of(path)


def test_l2_a_model_timeout_parameter_is_allowed(tmp_path):
    # It shortens the runner's per-call deadline (tests/integration/test_provider_errors.py).
    spec = load_spec(write_models(tmp_path, "  - name: openai/gpt-4o-mini\n    params: {timeout: 30}"))
    assert spec.models[0].params.timeout == 30


def test_v3_api_key_as_an_environment_reference_loads_and_keeps_the_reference(tmp_path):
    path = write_models(tmp_path, "  - name: openai/x\n    params: {api_key: os.environ/LOCAL_KEY}")
    spec = load_spec(path)
    assert spec.models[0].params.as_kwargs()["api_key"] == "os.environ/LOCAL_KEY"
    assert "LOCAL_KEY" not in os.environ  # loading never needs the variable, calling does


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("sk-live-123", "never write a key into a spec"),
        ("os.environ/1-bad", "expected os.environ/"),
    ],
)
def test_v3_a_literal_key_or_a_broken_reference_is_refused(tmp_path, value, says):
    path = write_models(tmp_path, f"  - name: openai/x\n    params: {{api_key: {value}}}")
    message = error_of(path)
    assert message.startswith(f"{path}:4: models[0].params.api_key: ") and says in message
    assert "sk-live-123" not in message  # an error message does not repeat a secret


def test_l2_the_honesty_judges_provider_is_checked_too(tmp_path):
    path = write_models(tmp_path, "  - scripted/careful")
    path.write_text(path.read_text() + "honesty: {judge: opnai/gpt-4o-mini}\n", encoding="utf-8")
    assert "honesty.judge: unknown litellm provider 'opnai' (did you mean 'openai'?)" in error_of(
        path
    )

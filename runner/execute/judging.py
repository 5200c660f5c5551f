"""What the runner judges after a run, beyond the harness's report: honesty (M1), from what the
run left (transcript, events, the upstream's rows). The cause of each duplicate (M2) is
runner/analysis/attribution.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runner.experiment import ExperimentSpec
from runner.honesty import (
    HonestyVerdict,
    JudgeModel,
    final_words,
    honesty_state,
    judge_deterministic,
    judge_with_model,
)


def judge_model(spec: ExperimentSpec) -> JudgeModel | None:
    """The spec's judge model with the runner's limits and retries; None for the word lists."""
    settings = spec.honesty
    if not settings.uses_model:
        return None
    params = settings.params.as_kwargs()
    # The runner's deadline and retries are the only ones (L2): `timeout` sets the deadline.
    timeout = params.pop("timeout", None) or spec.limits.model_timeout_s
    return JudgeModel(
        name=settings.judge, params=params, timeout_s=timeout, attempts=spec.retry.attempts,
        backoff_s=spec.retry.backoff_s,
    )  # fmt: skip


async def judge_honesty(
    spec: ExperimentSpec,
    messages: Sequence[Mapping[str, Any]],
    truth: list[dict[str, Any]] | None,
    events: Sequence[Any],
    seed: int,
) -> HonestyVerdict:
    """The run's honesty verdict from the spec's judge."""
    state = honesty_state(truth, messages, events)
    words, why_none = final_words(messages)
    model = judge_model(spec)
    name = model.name if model else "deterministic"
    if state.measurable and words is None:
        return HonestyVerdict("not_measurable", None, None, 1.0, name, extra={"why": why_none})
    if model is None:
        return judge_deterministic(words, state)
    return await judge_with_model(model, words, state, seed=seed)

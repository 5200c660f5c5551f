"""Honesty (SPEC M1, R9): did the agent tell its user the truth about what happened?

The agent's final words are set against the upstream's real state, in both directions: a
claimed success with nothing written, a claimed failure although the write exists. Two judges:
`judge_deterministic` (multilingual word lists, no model; the offline default) and
`judge_with_model` (an LLM through litellm). `runner.honesty.agreement` measures the
deterministic judge on the labelled messages in `labelled.jsonl`.
"""

from runner.honesty._claims import read_claim
from runner.honesty._details import contradiction
from runner.honesty._judge import DETERMINISTIC, judge_deterministic
from runner.honesty._llm import JudgeModel, judge_prompt, judge_with_model, parse_answer
from runner.honesty._model import (
    AGENT_VIEWS,
    CLAIMS,
    DISHONEST,
    LABEL_MEANINGS,
    LABELS,
    AgentView,
    Claim,
    ClaimKind,
    HonestyState,
    HonestyVerdict,
    Label,
    label_for,
)
from runner.honesty._state import final_words, honesty_state

__all__ = [
    "AGENT_VIEWS",
    "CLAIMS",
    "DETERMINISTIC",
    "DISHONEST",
    "LABELS",
    "LABEL_MEANINGS",
    "AgentView",
    "Claim",
    "ClaimKind",
    "HonestyState",
    "HonestyVerdict",
    "JudgeModel",
    "Label",
    "contradiction",
    "final_words",
    "honesty_state",
    "judge_deterministic",
    "judge_prompt",
    "judge_with_model",
    "label_for",
    "parse_answer",
    "read_claim",
]

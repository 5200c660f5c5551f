"""Who acts and what is said: models, system prompts, patch arms, conversations."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from runner.experiment._base import (
    Frozen,
    Name,
    SafeName,
    Text,
    did_you_mean,
    freeze,
    list_field,
    thaw,
)
from runner.models.respell import Respelling
from runner.models.scripted import SCRIPTED_MODELS


class ModelParams(BaseModel):
    """Keyword arguments for litellm.acompletion: common ones are checked, others passed on."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True)

    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    timeout: float | None = Field(default=None, gt=0)
    api_base: str | None = None
    api_version: str | None = None
    # The scripted models' own knobs (runner.models._policies.ScriptedParams).
    patch_compliance: float | None = Field(default=None, ge=0, le=1)
    max_wait_s: float | None = Field(default=None, ge=0)
    respell: Respelling | None = None

    @model_validator(mode="before")
    @classmethod
    def _freeze_extras(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            return {k: v if k in cls.model_fields else freeze(v) for k, v in data.items()}
        return data

    def as_kwargs(self) -> dict[str, Any]:
        """The parameters that are set, as plain mutable keyword arguments."""
        return thaw(self.model_dump(exclude_none=True))


# Keys the runner sets itself, or that must not live in a spec file.
RESERVED_PARAMS = {
    "model": "the model is `name`",
    "messages": "the runner builds the conversation",
    "tools": "the tools come from the upstream",
    "stream": "the runner does not stream",
    "seed": "the runner passes a per-run seed derived from the top-level `seed`",
    # L2: the runner's retries are the only retries, so `model_timeout_s` bounds a whole call.
    "max_retries": "the runner retries model calls itself: use the spec's `retry:`",
    "num_retries": "the runner retries model calls itself: use the spec's `retry:`",
}
# A key is never written into a spec: only a reference to an environment variable (litellm's
# notation), which the runner reads at call time and the store keeps as the reference (V3).
ENV_REF = "os.environ/"
SECRET_PARAMS = ("api_key",)
# Further litellm parameters, known so that a near-miss of one is reported as a typo.
OTHER_KNOWN_PARAMS = (
    "top_k stop n presence_penalty frequency_penalty logit_bias user response_format tool_choice "
    "parallel_tool_calls logprobs top_logprobs extra_headers extra_body base_url drop_params "
    "reasoning_effort thinking custom_llm_provider keep_alive num_ctx api_key"
).split()


class ModelSpec(Frozen):
    """A litellm model name with its parameters; `label` only changes how it is shown."""

    name: Name  # a litellm name such as openai/gpt-4o: never a path, the label may be
    label: SafeName | None = None
    params: ModelParams = Field(default_factory=ModelParams)

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, data: Any) -> Any:
        return {"name": data} if isinstance(data, str) else data

    @field_validator("name")
    @classmethod
    def _known_scripted(cls, name: str) -> str:
        if name.startswith("scripted/") and name not in SCRIPTED_MODELS:
            known = sorted(SCRIPTED_MODELS)
            raise ValueError(f"unknown scripted model {name!r}{did_you_mean(name, known)}")
        return name

    @property
    def display_name(self) -> str:
        """The label, else the model name."""
        return self.label or self.name

    def identity(self) -> Any:
        """What makes this a distinct condition (hashed into cell ids): name and parameters."""
        return {"name": self.name, "params": self.params.as_kwargs()}


DETERMINISTIC_JUDGE = "deterministic"


class HonestySettings(Frozen):
    """Who judges the agent's final words against the real state (SPEC M1)."""

    # `deterministic`: word lists, no model, offline (the default); else a litellm model name.
    judge: Name = DETERMINISTIC_JUDGE
    params: ModelParams = Field(default_factory=ModelParams)

    @field_validator("judge")
    @classmethod
    def _a_judge(cls, judge: str) -> str:
        if judge in SCRIPTED_MODELS:
            raise ValueError(
                f"{judge!r} is a scripted reference agent, not a judge; use "
                f"{DETERMINISTIC_JUDGE!r} (offline, no model) or a litellm model name"
            )
        if judge != DETERMINISTIC_JUDGE and "/" not in judge:
            hint = did_you_mean(judge, [DETERMINISTIC_JUDGE], 0.75)
            if hint:
                raise ValueError(f"unknown judge {judge!r}{hint}")
        return judge

    @model_validator(mode="after")
    def _params_need_a_model(self) -> HonestySettings:
        if self.judge == DETERMINISTIC_JUDGE and self.params.model_dump(exclude_none=True):
            raise ValueError(f"the {DETERMINISTIC_JUDGE} judge takes no `params`")
        return self

    @property
    def uses_model(self) -> bool:
        """Whether a model judges (else the deterministic word lists)."""
        return self.judge != DETERMINISTIC_JUDGE


class Prompt(Frozen):
    """A named system prompt; after `load_spec`, `text` holds a `file`'s contents."""

    name: SafeName
    text: str = ""
    file: Text | None = None

    @model_validator(mode="before")
    @classmethod
    def _needs_name(cls, data: Any) -> Any:
        if isinstance(data, str):
            raise ValueError("a prompt needs a name: write {name: ..., text: ...} or {name, file}")
        return data

    @model_validator(mode="after")
    def _one_source(self) -> Prompt:
        if ("text" in self.model_fields_set) == (self.file is not None):
            raise ValueError("a prompt needs exactly one of `text` and `file`")
        return self

    def identity(self) -> Any:
        """The prompt text: two names for one text are one condition."""
        return self.text


class PatchArm(Frozen):
    """An arm of the patch A/B test: `none`, `auto` or a named text (SPEC R2)."""

    name: SafeName
    text: Text | None = None
    file: Text | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, data: Any) -> Any:
        if isinstance(data, str):
            if data not in ("none", "auto"):
                raise ValueError(
                    f"a patch arm is `none`, `auto`, {{name, file}} or {{name, text}}, got {data!r}"
                )
            return {"name": data}
        return data

    @model_validator(mode="after")
    def _one_source(self) -> PatchArm:
        given = (self.text is not None) + (self.file is not None)
        if self.name in ("none", "auto") and given:
            raise ValueError(f"{self.name!r} is a reserved arm and takes no text or file")
        if self.name not in ("none", "auto") and given != 1:
            raise ValueError("a named patch needs exactly one of `text` and `file`")
        return self

    @property
    def kind(self) -> Literal["none", "auto", "text"]:
        """`none` (no patch), `auto` (the harness's own patches) or `text` (a given text)."""
        return self.name if self.name in ("none", "auto") else "text"  # type: ignore[return-value]

    def identity(self) -> Any:
        """`none`, `auto`, or name and text."""
        return self.kind if self.kind != "text" else {"name": self.name, "text": self.text}


class Conversation(Frozen):
    """The user's side: the first message, then each follow-up after the agent's final reply."""

    name: SafeName
    user: Text
    follow_ups: tuple[Text, ...] = list_field(default=())
    # Crossed with these upstreams only (default: every one), e.g. a booking request is not
    # put to the payment service. Not part of the cell: the cells it does take keep their ids.
    upstreams: tuple[Name, ...] | None = list_field(default=None, min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _needs_name(cls, data: Any) -> Any:
        if isinstance(data, str):
            raise ValueError("a conversation needs a name: write {name: ..., user: ...}")
        return data

    def identity(self) -> Any:
        """The messages, without the name."""
        return {"user": self.user, "follow_ups": list(self.follow_ups)}

    def meets(self, upstream: str) -> bool:
        """Whether this conversation is run against the upstream named so."""
        return self.upstreams is None or upstream in self.upstreams

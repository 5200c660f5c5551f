"""The experiment as a whole: its dimensions plus limits, retries and proxy settings."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, PrivateAttr, field_validator

from runner.experiment._agents import AgentSpec
from runner.experiment._base import Frozen, FrozenDict, SafeName, list_field
from runner.experiment._environment import Scenario, Upstream
from runner.experiment._models import Conversation, HonestySettings, ModelSpec, PatchArm, Prompt

# A run of the matrix takes a few hundred bytes before it runs and seconds to minutes when it
# does: 100,000 runs are days of model calls, 100 x 100 x 10,000 would be 40 GB of memory.
DEFAULT_MAX_MATRIX_RUNS = 100_000
# Runs in flight at once (issue 37: 500 runs waiting 5 s on their model is a real shape). Each
# costs about 1-2 MB and a few descriptors, and `run` raises its soft descriptor limit to the
# hard one; past this, spread the runs over machines (--shard, --executor ray).
MAX_CONCURRENCY = 1024


class Limits(Frozen):
    """Where a run (or the experiment) stops."""

    max_turns: int = Field(default=8, gt=0)  # model calls per user message
    max_tool_calls: int = Field(default=20, gt=0)  # per run
    model_timeout_s: float = Field(default=120, gt=0)
    run_timeout_s: float = Field(default=600, gt=0)
    upstream_timeout_s: float = Field(default=60, gt=0)
    # How long the agent's MCP client waits for one tool call before it gives up and tells
    # the model the call timed out, as agent frameworks do (F9 measures what comes next);
    # none: it waits for the answer (the proxy answers within upstream_timeout_s).
    tool_timeout_s: float | None = Field(default=None, gt=0)
    max_tokens: int | None = Field(default=None, gt=0)  # total per run
    budget_usd: float | None = Field(default=None, gt=0)  # total for the whole experiment
    # V13: the most runs the matrix may have (computed from the spec before a run is built).
    max_matrix_runs: int = Field(default=DEFAULT_MAX_MATRIX_RUNS, ge=1, le=100_000_000)


class RetrySettings(Frozen):
    """Retries of model calls after provider rate limits and transient errors."""

    attempts: int = Field(default=4, ge=1, le=100)
    backoff_s: float = Field(default=1.0, ge=0)
    max_backoff_s: float = Field(default=30, ge=0)


class StopEarly(Frozen):
    """Optional sequential stopping per cell (M3): off unless the spec sets `stop_early`.

    A cell stops taking new runs once at least `min_runs` ran and the Wilson interval of its
    duplicate rate (at `confidence`) lies wholly below or above `threshold`.
    """

    threshold: float = Field(gt=0, lt=1)
    min_runs: int = Field(default=5, ge=1)
    # 99 %, not 95 %: a look after every run is many looks. At a true rate equal to the
    # threshold, 95 % stops on a wrong side in 27 % of 50-run cells, 99 % in 6 %
    # (bench/sim_sequential_stop.py).
    confidence: float = Field(default=0.99, gt=0, lt=1)


class ProxySettings(Frozen):
    """How the runner starts `agent-harness proxy`."""

    fault_delay_ms: int = Field(default=0, ge=0, le=600_000)
    audit_tools: Literal["on", "off"] = "off"
    in_process: Literal["auto", "always", "never"] = "auto"
    # How the agent reaches the proxy: stdio, or streamable HTTP to `proxy --listen` (H1).
    agent: Literal["stdio", "http"] = "stdio"

    @field_validator("audit_tools", mode="before")
    @classmethod
    def _yaml_bool(cls, value: Any) -> Any:
        # YAML 1.1 reads a bare on/off as a boolean.
        return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value


class ExperimentSpec(Frozen):
    """A whole experiment, validated; `runner.experiment.matrix.expand` turns it into runs."""

    name: SafeName  # V2: the default report is reports/NAME.html
    description: str | None = None
    # Models driven through the runner's own agent loop, and (U1) agents that are commands;
    # at least one of the two (runner.experiment._checks). A written list must not be empty.
    models: tuple[ModelSpec, ...] = list_field(default=(), min_length=1)
    agents: tuple[AgentSpec, ...] = list_field(default=(), min_length=1)
    prompts: tuple[Prompt, ...] = list_field(min_length=1)
    patches: tuple[PatchArm, ...] = list_field(default=(PatchArm(name="none"),), min_length=1)
    upstreams: tuple[Upstream, ...] = list_field(min_length=1)
    scenarios: tuple[Scenario, ...] = list_field(
        default=(Scenario.model_validate("none"),), min_length=1
    )
    conversations: tuple[Conversation, ...] = list_field(min_length=1)
    runs: int = Field(default=1, ge=1, le=10_000)
    limits: Limits = Field(default_factory=Limits)
    concurrency: int = Field(default=4, ge=1, le=MAX_CONCURRENCY)
    # litellm model-name glob -> runs in flight at once over the models it matches (one pool
    # per glob: "openai/*": 4 caps a provider). Held wherever the runs go (--executor ray).
    concurrency_per_model: Annotated[
        dict[str, Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)]], AfterValidator(FrozenDict)
    ] = Field(default_factory=FrozenDict)
    seed: int = 0
    retry: RetrySettings = Field(default_factory=RetrySettings)
    proxy: ProxySettings = Field(default_factory=ProxySettings)
    # Not part of any run id: the judge reads a finished run, it does not change it.
    honesty: HonestySettings = Field(default_factory=HonestySettings)
    stop_early: StopEarly | None = None
    # I3: each run's spans (the run, its tool calls) over OTLP as the OTEL_* variables say,
    # from the run's events after it ended; not part of any run id.
    otel: bool = False
    # The folder the spec file lies in (load_spec sets it; no key of the YAML, no part of any
    # run id): a command agent's argv may name files beside the spec (Q1).
    _folder: Path | None = PrivateAttr(default=None)

    @property
    def folder(self) -> Path | None:
        """The spec file's folder, absolute; None for a spec not read from a file."""
        return self._folder

    def matrix_dimensions(self) -> list[tuple[str, int]]:
        """(what, how many) per dimension of the matrix, conversations counted per upstream
        they meet; their product is `matrix_size` (V13: known before a run is built)."""
        upstreams = {u.name for u in self.upstreams}
        pairs = sum(
            len(upstreams) if c.upstreams is None else len(upstreams & set(c.upstreams))
            for c in self.conversations
        )
        return [
            ("model", len(self.models) + len(self.agents)),
            ("prompt", len(self.prompts)),
            ("patch arm", len(self.patches)),
            ("scenario", len(self.scenarios)),
            ("upstream-conversation pair", pairs),
            ("repetition", self.runs),
        ]

    @property
    def agents_under_test(self) -> tuple[ModelSpec | AgentSpec, ...]:
        """The matrix's model dimension: the models, then the command agents (U1)."""
        return (*self.models, *self.agents)

    def matrix_size(self) -> int:
        """How many runs the matrix has, computed without building it."""
        size = 1
        for _, count in self.matrix_dimensions():
            size *= count
        return size

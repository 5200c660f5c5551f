"""Where the agent acts: the upstream MCP server and the scenario the proxy plays."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, Field, create_model, field_validator, model_validator

from harness.proxy import FAULTS, SCENARIOS, Param, PlanConfig, error_rate_problem
from runner.experiment._base import (
    Frozen,
    FrozenDict,
    FrozenStrMap,
    Name,
    SafeName,
    Text,
    did_you_mean,
    list_field,
    num,
    thaw,
)
from runner.experiment._contents import command_files, digest


def _no_commas(values: tuple[str, ...] | None) -> tuple[str, ...] | None:
    # The proxy takes these as comma-separated flags (X1).
    if values is not None and any(not v or "," in v for v in values):
        raise ValueError("entries must be non-empty and contain no ','")
    return values


CommaFree = Annotated[tuple[str, ...] | None, AfterValidator(_no_commas)]


ENV_REFERENCE = "os.environ/"  # litellm's spelling of "the value of this variable"


def _env_names(env: FrozenDict) -> FrozenDict:
    if any(not k or "=" in k for k in env):
        raise ValueError("environment variable names must be non-empty and contain no '='")
    return env


EnvMap = Annotated[FrozenStrMap, AfterValidator(_env_names)]  # an `env:` of names and values


# T1: a probe's bounds (defaults, and the largest values a spec may set).
PROBE_TIMEOUT_S, PROBE_MAX_TIMEOUT_S = 10.0, 600.0
PROBE_OUTPUT_BYTES, PROBE_MAX_OUTPUT_BYTES = 4_000_000, 64_000_000


class TruthProbe(Frozen):
    """T1: how the runner reads an upstream's state before and after each run: a read-only
    command (its standard output) or one SQL query against a SQLite or DuckDB file (its rows);
    each line or row is one record (docs/runner.md, "Truth probes")."""

    command: tuple[Name, ...] | None = list_field(default=None)  # argv, no shell
    cwd: Text | None = None  # like an upstream's `cwd`, relative to where the runner starts
    env: EnvMap = Field(default_factory=FrozenDict)
    sql: Text | None = None
    database: Text | None = None  # a SQLite or DuckDB file, opened read-only
    timeout_s: float = Field(default=PROBE_TIMEOUT_S, gt=0, le=PROBE_MAX_TIMEOUT_S)
    max_output_bytes: int = Field(default=PROBE_OUTPUT_BYTES, ge=1, le=PROBE_MAX_OUTPUT_BYTES)

    @model_validator(mode="after")
    def _one_kind(self) -> TruthProbe:
        if (self.command is None) == (self.sql is None):
            raise ValueError(
                "a truth probe is a `command` (a list: the program and its arguments) or an "
                "`sql` query with its `database` file, exactly one of them"
            )
        if self.command is not None and not self.command:
            raise ValueError("`command` needs the program to run: [program, arg, ...]")
        if self.sql is not None and self.database is None:
            raise ValueError("an `sql` probe needs the `database` file it reads (SQLite or DuckDB)")
        if self.sql is None and self.database is not None:
            raise ValueError("`database` goes with an `sql` probe")
        if self.sql is not None and (self.cwd is not None or self.env):
            raise ValueError("`cwd` and `env` go with a `command` probe")
        return self


class Upstream(Frozen):
    """The MCP server behind the proxy: a built-in kind, a command or a URL, plus overrides."""

    name: SafeName
    builtin: str | None = None
    command: Name | None = None
    url: Text | None = None  # a streamable HTTP endpoint (H1)
    headers: FrozenStrMap = Field(default_factory=FrozenDict)  # for `url`: os.environ/NAME
    transport: Literal["stdio", "http"] = "stdio"  # how a built-in is served to the proxy
    args: tuple[str, ...] = list_field(default=())
    env: EnvMap = Field(default_factory=FrozenDict)
    cwd: Text | None = None  # like `command`, relative to where the runner is started
    write_tools: CommaFree = list_field(default=None)
    read_tools: CommaFree = list_field(default=None)
    key_fields: CommaFree = list_field(default=None)
    # E1: tools whose repeats are harmless (--idempotent-tools), and whether the upstream's
    # idempotentHint annotations count (--distrust-annotations)
    idempotent_tools: CommaFree = list_field(default=None)
    distrust_annotations: bool = False
    # Z1: tools whose calls carry an SQL statement (--statement-tools); Z4: only isError
    # refuses (--strict-errors); Z7: the shipped server profiles off (--no-profiles)
    statement_tools: CommaFree = list_field(default=None)
    strict_errors: bool = False
    profiles: bool = True
    # T1: the upstream's own state, read before and after each run (not for built-ins, whose
    # rows the runner reads already)
    truth_probe: TruthProbe | None = None
    # U2: a recorded session replayed (`agent-harness replay`), relative to where the runner is
    # started; its count of answered calls is the run's ground truth
    cassette: Text | None = None
    unmatched: Literal["error", "nearest"] | None = None  # the replay's --unmatched

    @field_validator("cassette")
    @classmethod
    def _readable_cassette(cls, path: str | None) -> str | None:
        if path is not None:
            from harness.cassette import CassetteError, load

            try:
                load(path)  # validated whole now: a broken cassette fails the spec, not a run
            except CassetteError as exc:
                raise ValueError(str(exc)) from None
        return path

    @field_validator("builtin")
    @classmethod
    def _known_builtin(cls, kind: str | None) -> str | None:
        from runner.upstreams.kinds import KINDS  # the names only: not the servers

        if kind is not None and kind not in KINDS:
            known = sorted(KINDS)
            raise ValueError(
                f"unknown built-in upstream {kind!r}{did_you_mean(kind, known)}; "
                f"known: {', '.join(known)}"
            )
        return kind

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        from urllib.parse import urlsplit

        if url is not None:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError("`url` must be an http:// or https:// URL")
            if parts.username is not None or parts.password is not None:
                raise ValueError(  # V3: a credential in a URL would be stored with the spec
                    "`url` must not carry a user name or password; send credentials in "
                    "`headers` (os.environ/NAME)"
                )
        return url

    @field_validator("headers")
    @classmethod
    def _headers_from_environment(cls, headers: FrozenDict) -> FrozenDict:
        from harness.proxy import valid_header_name

        for name, value in headers.items():
            if not valid_header_name(name):
                raise ValueError(f"{name!r} is not an HTTP header name")
            variable = value[len(ENV_REFERENCE) :] if value.startswith(ENV_REFERENCE) else ""
            if not variable or "=" in variable:
                raise ValueError(  # V3: secrets stay out of specs, stores and command lines
                    f"header {name}: give its value as os.environ/NAME (the runner's "
                    f"environment variable NAME holds it), not the value itself"
                )
        return headers

    @model_validator(mode="after")
    def _one_kind(self) -> Upstream:
        kinds = (self.builtin, self.command, self.url, self.cassette)
        if sum(x is not None for x in kinds) != 1:
            raise ValueError(
                "an upstream needs exactly one of `builtin`, `command`, `url` and `cassette`"
            )
        if self.unmatched is not None and self.cassette is None:
            raise ValueError("`unmatched` goes with a `cassette` upstream")
        if self.cassette is not None and self.truth_probe is not None:
            raise ValueError("a cassette's count of answered calls is its ground truth; "
                             "`truth_probe` is for a `command` or `url` upstream")  # fmt: skip
        if self.command is None and (self.args or self.env or self.cwd is not None):
            raise ValueError("only a `command` upstream takes `args`, `env` or `cwd`")
        if self.url is None and self.headers:
            raise ValueError("`headers` go with a `url` upstream")
        if self.builtin is not None and self.truth_probe is not None:
            raise ValueError("a built-in upstream's rows are read already; `truth_probe` is "
                             "for a `command` or `url` upstream")  # fmt: skip
        if self.builtin is None and self.transport != "stdio":
            raise ValueError("`transport` chooses how a built-in upstream is served; a `url` "
                             "is HTTP and a `command` stdio already")  # fmt: skip
        return self

    def identity(self) -> Any:
        """The configuration without the name (defaults left out, so new fields keep ids),
        and what the files it reads hold (V18: a re-recorded cassette is a new condition)."""
        data = thaw(self.model_dump(exclude={"name"}, exclude_defaults=True))
        contents: dict[str, str] = {}
        if self.cassette is not None and (sha := digest(self.cassette)) is not None:
            contents[self.cassette] = sha
        if self.command is not None:
            contents |= command_files([self.command, *self.args], self.cwd)
        if self.truth_probe is not None and self.truth_probe.command is not None:
            contents |= command_files(self.truth_probe.command, self.truth_probe.cwd)
        if contents:
            data["contents"] = contents
        return data


def _asks_the_registry(param: Param) -> AfterValidator:
    """A parameter's value checked by the fault registry's own rule (`Param.problem`), named
    as the spec names it; the error stays at its FILE:LINE."""

    def check(value: float) -> float:
        problem = param.problem(value, param.key)
        if problem is not None:
            raise ValueError(problem)
        return value

    return AfterValidator(check)


def _params_model(kind: str) -> type[Frozen]:
    """The mapping a parameterised scenario takes (`{F9: {latency_ms: 1500}}`): one field per
    parameter the fault's class declares, with its type and default, its bounds checked by the
    registry (H2)."""
    fields: dict[str, Any] = {}
    for param in FAULTS[kind].params:
        fields[param.key] = (
            Annotated[param.kind, _asks_the_registry(param)],
            Field(default=param.default, description=param.help),
        )
    return create_model(f"{kind}Params", __base__=Frozen, __doc__=f"{kind}'s parameters.", **fields)


def _error_rate(rate: float) -> float:
    problem = error_rate_problem(rate, "error_rate")  # the registry's rule (S9)
    if problem is not None:
        raise ValueError(problem)
    return rate


# Every scenario with parameters, and the model of its mapping (the fault registry).
PARAM_MODELS: dict[str, type[Frozen]] = {
    name: _params_model(name) for name in SCENARIOS if FAULTS[name].params
}
# Module attributes, so that pickle finds them (a spec travels to Ray workers and processes).
globals().update({model.__name__: model for model in PARAM_MODELS.values()})


class ChaosParams(Frozen):
    """Chaos mode: every call fails with probability error_rate (S9)."""

    error_rate: Annotated[float, AfterValidator(_error_rate)]
    seed: int | None = None


ScenarioKind = Literal[("none", *SCENARIOS, "chaos")]  # the fault registry (harness.faults)
_MAPPED = (*PARAM_MODELS, "chaos")  # the keys a scenario mapping may have
_SCENARIO_FORMS = (
    f"none, {SCENARIOS[0]}..{SCENARIOS[-1]}, "
    + ", ".join(
        f"{{{name}: {{{', '.join(f'{p.key}: {p.metavar}' for p in FAULTS[name].params)}}}}}"
        for name in PARAM_MODELS
    )
    + " or {chaos: {error_rate: R, seed: N}}"
)


class _ScenarioFields(Frozen):
    """A fault plan; a field per parameterised fault (`F2`, `F9`, added from the registry
    below) and `chaos` mirror the YAML, so errors point at their keys."""

    kind: ScenarioKind
    chaos: ChaosParams | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_yaml(cls, data: Any) -> Any:
        kinds = list(get_args(ScenarioKind))
        if isinstance(data, str):
            if data == "chaos":
                raise ValueError("chaos needs an error rate: {chaos: {error_rate: 0.3}}")
            if data not in kinds:
                hint = did_you_mean(data, kinds)
                raise ValueError(f"unknown scenario {data!r}{hint}; use {_SCENARIO_FORMS}")
            return {"kind": data, **({data: {}} if data in PARAM_MODELS else {})}
        if isinstance(data, Mapping):
            if len(data) != 1 or next(iter(data)) not in _MAPPED:
                keys = ", ".join(map(str, data)) or "none"
                first = str(next(iter(data), ""))
                if len(data) == 1 and first in kinds:
                    raise ValueError(f"{first} takes no parameters: write it as {first}")
                raise ValueError(
                    f"a scenario mapping has one key, {', '.join(_MAPPED[:-1])} or chaos "
                    f"(got: {keys}{did_you_mean(first, _MAPPED) if len(data) == 1 else ''})"
                )
            ((kind, params),) = data.items()
            return {"kind": kind, kind: {} if params is None else params}
        return data

    def _params(self) -> Frozen | None:
        return getattr(self, self.kind, None) if self.kind in PARAM_MODELS else None

    def plan(self, run_seed: int, fault_delay_ms: int) -> PlanConfig:
        """The fault plan the proxy plays for this scenario (checked by the registry as it is
        built): a chaos scenario without a seed of its own takes the run's, so every run is
        replayable; `fault_delay_ms` applies only where a fault is played."""
        given = self._params()
        values = {} if given is None else {
            p.field: getattr(given, p.key) for p in FAULTS[self.kind].params
        }  # fmt: skip
        chaos = self.chaos
        return PlanConfig(
            scenario=self.kind if self.kind in SCENARIOS else None,
            chaos_error_rate=chaos.error_rate if chaos else None,
            seed=(chaos.seed if chaos.seed is not None else run_seed) if chaos else None,
            fault_delay_ms=fault_delay_ms if self.kind != "none" else 0,
            **values,
        )

    @property
    def label(self) -> str:
        """A stable name: `none`, `F1`, `F2(retry_after=1)`, `F9(latency_ms=1500)`,
        `chaos(rate=0.3,seed=7)`."""
        given = self._params()
        if given is not None:  # the defaults are left out: `F2` however it was written
            changed = [
                f"{p.key}={num(getattr(given, p.key))}"
                for p in FAULTS[self.kind].params
                if getattr(given, p.key) != p.default
            ]
            return f"{self.kind}({','.join(changed)})" if changed else self.kind
        if self.chaos is not None:
            seed = "" if self.chaos.seed is None else f",seed={self.chaos.seed}"
            return f"chaos(rate={num(self.chaos.error_rate)}{seed})"
        return self.kind

    def identity(self) -> Any:
        """The label: it carries every parameter."""
        return self.label


Scenario = create_model(
    "Scenario",
    __base__=_ScenarioFields,
    __doc__="A fault plan: `none`, a fault, a fault with parameters, or chaos.",
    **{name: (model | None, None) for name, model in PARAM_MODELS.items()},
)

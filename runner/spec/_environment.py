"""Where the agent acts: the upstream MCP server and the scenario the proxy plays."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, Field, field_validator, model_validator

from harness.proxy import MAX_RETRY_AFTER_S, SCENARIOS
from runner.spec._base import (
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


def _no_commas(values: tuple[str, ...] | None) -> tuple[str, ...] | None:
    # The proxy takes these as comma-separated flags (X1).
    if values is not None and any(not v or "," in v for v in values):
        raise ValueError("entries must be non-empty and contain no ','")
    return values


CommaFree = Annotated[tuple[str, ...] | None, AfterValidator(_no_commas)]


ENV_REFERENCE = "os.environ/"  # litellm's spelling of "the value of this variable"


class Upstream(Frozen):
    """The MCP server behind the proxy: a built-in kind, a command or a URL, plus overrides."""

    name: SafeName
    builtin: str | None = None
    command: Name | None = None
    url: Text | None = None  # a streamable HTTP endpoint (H1)
    headers: FrozenStrMap = Field(default_factory=FrozenDict)  # for `url`: os.environ/NAME
    transport: Literal["stdio", "http"] = "stdio"  # how a built-in is served to the proxy
    args: tuple[str, ...] = list_field(default=())
    env: FrozenStrMap = Field(default_factory=FrozenDict)
    cwd: Text | None = None  # like `command`, relative to where the runner is started
    write_tools: CommaFree = list_field(default=None)
    read_tools: CommaFree = list_field(default=None)
    key_fields: CommaFree = list_field(default=None)

    @field_validator("builtin")
    @classmethod
    def _known_builtin(cls, kind: str | None) -> str | None:
        # Imported here: the servers pull in the MCP SDK (a second), which reading a spec
        # without built-ins, or code that only needs the types, should not pay for.
        from runner.upstreams import BUILTIN_UPSTREAMS

        if kind is not None and kind not in BUILTIN_UPSTREAMS:
            known = sorted(BUILTIN_UPSTREAMS)
            raise ValueError(
                f"unknown built-in upstream {kind!r}{did_you_mean(kind, known)}; "
                f"known: {', '.join(known)}"
            )
        return kind

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: FrozenDict) -> FrozenDict:
        if any(not k or "=" in k for k in env):
            raise ValueError("environment variable names must be non-empty and contain no '='")
        return env

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
        if sum(x is not None for x in (self.builtin, self.command, self.url)) != 1:
            raise ValueError("an upstream needs exactly one of `builtin`, `command` and `url`")
        if self.command is None and (self.args or self.env or self.cwd is not None):
            raise ValueError("only a `command` upstream takes `args`, `env` or `cwd`")
        if self.url is None and self.headers:
            raise ValueError("`headers` go with a `url` upstream")
        if self.builtin is None and self.transport != "stdio":
            raise ValueError("`transport` chooses how a built-in upstream is served; a `url` "
                             "is HTTP and a `command` stdio already")  # fmt: skip
        return self

    def identity(self) -> Any:
        """The configuration without the name (defaults left out, so new fields keep ids)."""
        return thaw(self.model_dump(exclude={"name"}, exclude_defaults=True))


DEFAULT_RETRY_AFTER_S = 60  # the proxy's own default (S3)


class F2Params(Frozen):
    """F2's parameter: the retry_after the 429 announces, in seconds."""

    retry_after: float = Field(default=DEFAULT_RETRY_AFTER_S, gt=0, le=MAX_RETRY_AFTER_S)


class ChaosParams(Frozen):
    """Chaos mode: every call fails with probability error_rate (S9)."""

    error_rate: float = Field(ge=0, le=1)
    seed: int | None = None


ScenarioKind = Literal[("none", *SCENARIOS, "chaos")]  # the fault registry (harness.faults)
_SCENARIO_FORMS = (
    f"none, {SCENARIOS[0]}..{SCENARIOS[-1]}, {{F2: {{retry_after: S}}}} or "
    "{chaos: {error_rate: R, seed: N}}"
)


class Scenario(Frozen):
    """A fault plan; the fields `F2`/`chaos` mirror the YAML so errors point at their keys."""

    kind: ScenarioKind
    F2: F2Params | None = None
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
            return {"kind": data, **({"F2": {}} if data == "F2" else {})}
        if isinstance(data, Mapping):
            if len(data) != 1 or next(iter(data)) not in ("F2", "chaos"):
                keys = ", ".join(map(str, data)) or "none"
                raise ValueError(f"a scenario mapping has one key, F2 or chaos (got: {keys})")
            ((kind, params),) = data.items()
            return {"kind": kind, kind: {} if params is None else params}
        return data

    @property
    def label(self) -> str:
        """A stable name: `none`, `F1`, `F2(retry_after=1)`, `chaos(rate=0.3,seed=7)`."""
        # F2 with the default wait is plain `F2`, however it was written.
        if self.F2 is not None and self.F2.retry_after != DEFAULT_RETRY_AFTER_S:
            return f"F2(retry_after={num(self.F2.retry_after)})"
        if self.chaos is not None:
            seed = "" if self.chaos.seed is None else f",seed={self.chaos.seed}"
            return f"chaos(rate={num(self.chaos.error_rate)}{seed})"
        return self.kind

    def proxy_args(self) -> tuple[str, ...]:
        """The `agent-harness proxy` flags for this scenario (X1)."""
        if self.chaos is not None:
            seed = () if self.chaos.seed is None else ("--seed", str(self.chaos.seed))
            return ("--mode", "chaos", "--error-rate", num(self.chaos.error_rate), *seed)
        if self.F2 is not None:
            return ("--scenario", "F2", "--retry-after", num(self.F2.retry_after))
        return () if self.kind == "none" else ("--scenario", self.kind)

    def identity(self) -> Any:
        """The label: it carries every parameter."""
        return self.label

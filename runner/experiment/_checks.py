"""What a schema cannot check: unique names, distinct conditions, parameters, combinations."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any

from harness.proxy import HTTP_ONLY
from runner.experiment._base import canonical_json, did_you_mean
from runner.experiment._environment import Upstream
from runner.experiment._experiment import ExperimentSpec
from runner.experiment._locate import Loc
from runner.experiment._models import (
    ENV_REF,
    OTHER_KNOWN_PARAMS,
    RESERVED_PARAMS,
    SECRET_PARAMS,
    ModelParams,
    ModelSpec,
)
from runner.experiment._providers import known_providers

Problem = tuple[Loc, str]


def _unique(
    key: str,
    items: Sequence[Any],
    what: str,
    name_of: Callable[[Any], str],
    name_loc: Callable[[Any], Loc] = lambda item: ("name",),
) -> Iterator[Problem]:
    # Equal content under two names would give both the same cell ids: one condition, not two.
    names: dict[str, int] = {}
    contents: dict[str, int] = {}
    for i, item in enumerate(items):
        name, content = name_of(item), canonical_json(item.identity())
        if name in names:
            yield (
                (key, i, *name_loc(item)),
                f"duplicate {what} {name!r} (also {key}[{names[name]}])",
            )
        elif content in contents:
            j = contents[content]
            other = f"{key}[{j}] ({name_of(items[j])!r})"
            yield (key, i), f"{name!r} is the same condition as {other}: it would share its run ids"
        names.setdefault(name, i)
        contents.setdefault(content, i)


def _dimensions(spec: ExperimentSpec) -> Iterator[Problem]:
    def model_loc(model: Any) -> Loc:
        return ("label",) if model.label else ("name",)

    yield from _unique("models", spec.models, "model", lambda m: m.display_name, model_loc)
    yield from _unique("agents", spec.agents, "agent", lambda a: a.name)
    if not spec.models and not spec.agents:
        yield (
            (),
            "give `models` (run through the runner's agent loop), `agents` (commands, U1) or both",
        )
    labels = {m.display_name: i for i, m in enumerate(spec.models)}
    for i, agent in enumerate(spec.agents):
        if agent.name in labels:
            why = f"an agent and a model (models[{labels[agent.name]}]) share this name"
            yield ("agents", i, "name"), f"{why}: runs are labelled by it"
    for key in ("prompts", "patches", "upstreams", "conversations"):
        yield from _unique(key, getattr(spec, key), "name", lambda x: x.name)
    yield from _unique("scenarios", spec.scenarios, "scenario", lambda s: s.label, lambda s: ())


_KNOWN_PARAMS = [*ModelParams.model_fields, *OTHER_KNOWN_PARAMS]


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _params(spec: ExperimentSpec) -> Iterator[Problem]:
    given = [(("models", i, "params"), m.params) for i, m in enumerate(spec.models)]
    given += [
        (("agents", i, "model", "params"), a.model.params)
        for i, a in enumerate(spec.agents)
        if a.model is not None
    ]
    given.append((("honesty", "params"), spec.honesty.params))
    for where, params in given:
        for key, value in params.as_kwargs().items():
            loc = (*where, key)
            if isinstance(value, str) and value.startswith(ENV_REF):
                if not _ENV_NAME.fullmatch(value[len(ENV_REF) :]):
                    yield loc, f"{value!r}: expected {ENV_REF}NAME with a variable name"
            elif key in SECRET_PARAMS:
                yield (
                    loc,
                    (
                        f"never write a key into a spec: use {ENV_REF}NAME (litellm's reference to "
                        "an environment variable, read when the model is called)"
                    ),
                )
        for key in params.model_extra or {}:
            loc = (*where, key)
            if key in RESERVED_PARAMS:
                yield loc, f"not allowed in a spec: {RESERVED_PARAMS[key]}"
            elif key not in OTHER_KNOWN_PARAMS and (hint := did_you_mean(key, _KNOWN_PARAMS, 0.8)):
                # Unknown names go to the provider unchecked; a near miss is almost surely a typo.
                yield loc, f"unknown parameter{hint}"


def _providers(spec: ExperimentSpec) -> Iterator[Problem]:
    """L2: a provider litellm does not know fails here, not in every run."""
    models = [(("models", i), m.name, m.params) for i, m in enumerate(spec.models)]
    models += [
        (("agents", i, "model"), a.model.name, a.model.params)
        for i, a in enumerate(spec.agents)
        if a.model is not None
    ]
    if "/" in spec.honesty.judge:  # `deterministic` needs no model
        models.append((("honesty",), spec.honesty.judge, spec.honesty.params))
    field = {"models": "name", "honesty": "judge", "agents": "name"}
    for where, name, params in models:
        given = params.as_kwargs().get("custom_llm_provider")
        if isinstance(given, str):
            loc, prefix = (*where, "params", "custom_llm_provider"), given
        elif "/" in name:
            loc, prefix = (*where, field[str(where[0])]), name.split("/", 1)[0]
        else:
            continue  # litellm infers a bare name's provider from its model list
        known = known_providers()
        if prefix not in known:
            hint = did_you_mean(prefix, known, 0.75) or (
                "; litellm names a model provider/model, e.g. openai/NAME for any "
                "OpenAI-compatible server (with api_base)"
            )
            yield loc, f"unknown litellm provider {prefix!r}{hint}"


def _combinations(spec: ExperimentSpec) -> Iterator[Problem]:
    kinds = [p.kind for p in spec.patches]
    if "auto" in kinds and "none" not in kinds:
        why = "`auto` inserts the patches of this experiment's unpatched runs"
        yield ("patches", kinds.index("auto")), f"{why}: add the `none` arm"
    for i, scenario in enumerate(spec.scenarios):
        if scenario.kind in HTTP_ONLY and spec.models and spec.proxy.agent != "http":
            yield ("scenarios", i), f"{scenario.kind} exists only over HTTP: set proxy.agent: http"
        stdio = [a.name for a in spec.agents if a.transport != "http"]
        if scenario.kind in HTTP_ONLY and stdio:
            why = f"{scenario.kind} exists only over HTTP"
            yield ("scenarios", i), f"{why}: agent {stdio[0]!r} needs `transport: http`"
    if spec.proxy.in_process == "always" and spec.proxy.agent == "http":
        yield ("proxy", "in_process"), "`always` hosts the proxy in process: no HTTP agent side"
    elif spec.proxy.in_process == "always":
        others = [u for u in spec.upstreams if u.builtin is None or u.transport != "stdio"]
        if others:
            why = "`always` can host only built-in upstreams served over stdio in process"
            what = "a command" if others[0].command else (
                "a URL" if others[0].url else "served over HTTP")  # fmt: skip
            yield ("proxy", "in_process"), f"{why}; {others[0].name!r} is {what}"
    yield from _pairings(spec)
    names = [m.name for m in spec.agents_under_test]  # U1: a command agent by its name
    for glob in spec.concurrency_per_model:
        if not any(fnmatchcase(name, glob) for name in names):
            hint = did_you_mean(glob, names) or f"; the models are {', '.join(names)}"
            yield ("concurrency_per_model", glob), f"matches no model{hint}"
    if spec.retry.max_backoff_s < spec.retry.backoff_s:
        yield ("retry", "max_backoff_s"), "must not be below `backoff_s`"


def _pairings(spec: ExperimentSpec) -> Iterator[Problem]:
    """Conversations limited to some upstreams: names that exist, and no upstream left out."""
    upstreams = [u.name for u in spec.upstreams]
    unknown = [
        (("conversations", i, "upstreams", j), name)
        for i, conversation in enumerate(spec.conversations)
        for j, name in enumerate(conversation.upstreams or ())
        if name not in upstreams
    ]
    for loc, name in unknown:
        hint = did_you_mean(name, upstreams) or f"; the upstreams are {', '.join(upstreams)}"
        yield loc, f"no upstream named {name!r}{hint}"
    if unknown:
        return  # a misspelt name leaves its upstream out: one error, not two
    for k, name in enumerate(upstreams):
        if not any(conversation.meets(name) for conversation in spec.conversations):
            why = "every conversation names its `upstreams` and none names this one"
            yield ("upstreams", k), f"{name!r} would get no runs: {why}"


def unset_variables(
    spec: ExperimentSpec,
    models: Iterable[ModelSpec],
    upstreams: Iterable[Upstream],
    environ: Mapping[str, str],
) -> list[str]:
    """One line per environment variable that an `os.environ/NAME` reference of these models
    (their top-level parameters, as litellm reads them), of the honesty judge or of these
    upstreams' headers names, and that `environ` lacks: found before any run starts."""
    places: dict[str, str] = {}  # variable -> the first place naming it
    named: list[tuple[str, Any]] = [
        (f"model {m.display_name}: params.{key}", value)
        for m in dict.fromkeys(models)
        for key, value in m.params.as_kwargs().items()
    ]
    named += [  # U1: a command agent's env
        (f"agent {a.name}: env {key}", value)
        for a in dict.fromkeys(models)
        for key, value in getattr(a, "env", {}).items()
    ]
    if spec.honesty.uses_model:
        named += [(f"honesty judge {spec.honesty.judge}: params.{key}", value)
                  for key, value in spec.honesty.params.as_kwargs().items()]  # fmt: skip
    named += [
        (f"upstream {u.name}: header {header}", value)
        for u in dict.fromkeys(upstreams)
        for header, value in u.headers.items()
    ]
    for place, value in named:
        if isinstance(value, str) and value.startswith(ENV_REF):
            variable = value[len(ENV_REF) :]
            if variable not in environ:
                places.setdefault(variable, place)
    return [
        f"{place} names the environment variable {variable} ({ENV_REF}{variable}), which is not set"
        for variable, place in places.items()
    ]


def matrix_problem(spec: ExperimentSpec) -> str | None:
    """V13: the matrix's size against `limits.max_matrix_runs`, before a run is built."""
    size, cap = spec.matrix_size(), spec.limits.max_matrix_runs
    if size <= cap:
        return None
    dims = " x ".join(
        f"{n:,} {what}{'' if n == 1 else 's'}" for what, n in spec.matrix_dimensions()
    )
    return (
        f"the matrix has {size:,} runs ({dims}), more than limits.max_matrix_runs allows "
        f"({cap:,}); make the spec smaller, or raise limits.max_matrix_runs"
    )


def _matrix(spec: ExperimentSpec) -> Iterator[Problem]:
    problem = matrix_problem(spec)
    if problem:
        yield ("runs",), problem


def check(spec: ExperimentSpec) -> list[Problem]:
    """Every problem of a spec that validated, as (location, message)."""
    return [
        *_dimensions(spec), *_params(spec), *_providers(spec), *_combinations(spec),
        *_matrix(spec),
    ]  # fmt: skip

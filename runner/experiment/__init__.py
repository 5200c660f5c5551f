"""The experiment spec (SPEC R2): YAML -> a validated, frozen `ExperimentSpec`, checked once.

`load_spec(path)` is the only way in. It parses the YAML, validates it with pydantic (unknown
keys are errors: a typo must not silently change an experiment), reads the prompt and patch
files, and checks what a schema cannot see (unique names, distinct conditions, reserved model
parameters). Every problem becomes one line `FILE:LINE: FIELD: message` in a `SpecError`.
`runner.experiment.matrix.expand(spec)` turns the spec into the matrix of cells, each run
once; `runner.experiment.records` holds what each run leaves (the store's rows).
"""

from runner.experiment._agents import PLACEHOLDERS, AgentSpec, resolved_command
from runner.experiment._base import (
    FrozenDict,
    SpecError,
    canonical_json,
    did_you_mean,
    freeze,
    name_problem,
    thaw,
)
from runner.experiment._checks import matrix_problem, unset_variables
from runner.experiment._environment import ChaosParams, Scenario, TruthProbe, Upstream
from runner.experiment._experiment import (
    ExperimentSpec,
    Limits,
    ProxySettings,
    RetrySettings,
    StopEarly,
)
from runner.experiment._load import load_spec
from runner.experiment._models import (
    Conversation,
    HonestySettings,
    ModelParams,
    ModelSpec,
    PatchArm,
    Prompt,
)
from runner.experiment._truth import ROW_WORDS, stored_truth_kinds, truth_kind, truth_words
from runner.experiment._truth import ROWS as TRUTH_ROWS

__all__ = [
    "PLACEHOLDERS",
    "ROW_WORDS",
    "AgentSpec",
    "ChaosParams",
    "Conversation",
    "ExperimentSpec",
    "FrozenDict",
    "HonestySettings",
    "Limits",
    "ModelParams",
    "ModelSpec",
    "PatchArm",
    "Prompt",
    "ProxySettings",
    "RetrySettings",
    "Scenario",
    "SpecError",
    "StopEarly",
    "TRUTH_ROWS",
    "TruthProbe",
    "Upstream",
    "canonical_json",
    "did_you_mean",
    "freeze",
    "load_spec",
    "matrix_problem",
    "name_problem",
    "resolved_command",
    "stored_truth_kinds",
    "thaw",
    "truth_kind",
    "truth_words",
    "unset_variables",
]

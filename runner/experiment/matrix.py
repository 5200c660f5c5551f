"""The matrix of runs (SPEC R1): every combination of the spec's dimensions, `runs` times each.

A cell is one combination of model, prompt, patch arm, upstream, scenario and conversation.
Its id is a hash of what the cell means (model name and parameters, prompt text, patch text,
upstream configuration, scenario, messages), not of names or positions in the YAML: renaming
a prompt or reordering a list keeps every id, so an interrupted sweep resumes where it stopped
and a finished run is never run twice. Changing a prompt's text makes new cells.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from itertools import product
from typing import Any

from runner.experiment import (
    AgentSpec,
    Conversation,
    ExperimentSpec,
    FrozenDict,
    ModelSpec,
    PatchArm,
    Prompt,
    Scenario,
    SpecError,
    Upstream,
    canonical_json,
    did_you_mean,
    matrix_problem,
)

DIMENSIONS = ("model", "prompt", "patch", "upstream", "scenario", "conversation")
# Bumped only if the hashed content changes shape on purpose: every id changes with it.
ID_VERSION = 1


def _digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class RunCell:
    """One run: a cell of the matrix and its repetition (1..runs), with stable ids."""

    experiment: str
    model: ModelSpec | AgentSpec  # U1: a command agent stands where a model does
    prompt: Prompt
    patch: PatchArm
    upstream: Upstream
    scenario: Scenario
    conversation: Conversation
    repetition: int
    cell_id: str  # the cell without its repetition
    run_id: str  # experiment + cell + repetition
    # The cell without its patch arm: the unpatched runs whose patches `auto` inserts (with
    # the experiment: like cell_id, it does not contain the experiment's name).
    group_id: str
    # Per repetition of a group, from the spec's seed: the patch arms of one repetition share
    # it (a paired design: the scripted models and a chaos fault plan draw from it, M3).
    seed: int
    labels: Mapping[str, str]  # for display and `select`: one entry per dimension

    def __hash__(self) -> int:
        return hash(self.run_id)


def cell_content(
    model: ModelSpec | AgentSpec,
    prompt: Prompt,
    upstream: Upstream,
    scenario: Scenario,
    conversation: Conversation,
) -> dict[str, Any]:
    """What a cell means without its patch arm (its group), as hashed into the ids."""
    return {
        "v": ID_VERSION,
        "model": model.identity(),
        "prompt": prompt.identity(),
        "upstream": upstream.identity(),
        "scenario": scenario.identity(),
        "conversation": conversation.identity(),
    }


def run_id(experiment: str, cell_id: str, repetition: int) -> str:
    """The stable id of one repetition of a cell in an experiment."""
    return _digest([experiment, cell_id, repetition])


def run_seed(base_seed: int, key: str) -> int:
    """A deterministic seed for a key, in 0..2**31-1 so that every provider accepts it."""
    digest = hashlib.sha256(f"{base_seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def _label(part: Any) -> str:
    if isinstance(part, ModelSpec | AgentSpec):
        return part.display_name
    if isinstance(part, Scenario):
        return part.label
    return part.name


def expand(spec: ExperimentSpec) -> list[RunCell]:
    """Every run of the spec: all `none`-arm runs first, then the patched arms.

    `auto` needs the unpatched runs of its group finished first. Within each of the two
    phases the repetition is the outer loop, so that a sweep cut short (a budget, Ctrl-C)
    leaves a balanced sample rather than every run of a few cells.
    """
    problem = matrix_problem(spec)  # V13: before a single run is built
    if problem:
        raise SpecError(f"experiment {spec.name}: {problem}")
    dimensions = (
        spec.agents_under_test,
        spec.prompts,
        spec.patches,
        spec.upstreams,
        spec.scenarios,
        spec.conversations,
    )
    cells = []
    for parts in product(*dimensions):
        cell = dict(zip(DIMENSIONS, parts, strict=True))
        if not cell["conversation"].meets(cell["upstream"].name):
            continue
        unpatched = cell_content(**{d: part for d, part in cell.items() if d != "patch"})
        ids = {
            "cell_id": _digest({**unpatched, "patch": cell["patch"].identity()}),
            "group_id": _digest(unpatched),
        }
        cells.append((cell, ids, FrozenDict({d: _label(part) for d, part in cell.items()})))
    runs = []
    for repetition in range(1, spec.runs + 1):
        for cell, ids, labels in cells:
            run = run_id(spec.name, ids["cell_id"], repetition)
            # The group, not the cell: every patch arm of this repetition gets the same seed.
            seed = run_seed(spec.seed, run_id(spec.name, ids["group_id"], repetition))
            runs.append(
                RunCell(
                    spec.name,
                    **cell,
                    **ids,
                    repetition=repetition,
                    run_id=run,
                    seed=seed,
                    labels=labels,
                )
            )
    runs.sort(key=lambda r: r.patch.kind != "none")  # stable: keeps the order within each phase
    return runs


def _parse_filter(text: str) -> tuple[str, str]:
    key, sep, pattern = text.partition("=")
    key = key.strip()
    if not sep:
        raise SpecError(f"filter {text!r}: expected key=glob, e.g. model=scripted/*")
    if key not in DIMENSIONS:
        hint = did_you_mean(key, DIMENSIONS)
        raise SpecError(f"filter {text!r}: unknown key {key!r}{hint}; use {', '.join(DIMENSIONS)}")
    return key, pattern


def select(cells: Iterable[RunCell], only: Sequence[str]) -> list[RunCell]:
    """The runs matching every `key=glob` filter (keys: the dimensions; `*` via fnmatch)."""
    filters = [_parse_filter(text) for text in only]

    def matches(cell: RunCell, key: str, pattern: str) -> bool:
        # A model can be picked by its label or by its litellm name.
        names = (cell.labels[key], cell.model.name) if key == "model" else (cell.labels[key],)
        return any(fnmatchcase(name, pattern) for name in names)

    return [c for c in cells if all(matches(c, key, pattern) for key, pattern in filters)]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def describe(cells: Sequence[RunCell]) -> str:
    """A dry-run listing: the size of each dimension, the number of runs, one line per cell."""
    if not cells:
        return "no runs selected"
    per_cell: dict[str, list[RunCell]] = {}
    for cell in cells:
        per_cell.setdefault(cell.cell_id, []).append(cell)
    sizes = " x ".join(
        _plural(len({c.labels[d] for c in cells}), "patch arm" if d == "patch" else d)
        for d in DIMENSIONS
    )
    counts = sorted({len(runs) for runs in per_cell.values()})
    reps = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    header = ("cell_id", *DIMENSIONS, "runs")
    rows = [
        (cell_id, *(runs[0].labels[d] for d in DIMENSIONS), str(len(runs)))
        for cell_id, runs in per_cell.items()
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    table = [
        "  ".join(value.ljust(width) for value, width in zip(row, widths, strict=True)).rstrip()
        for row in (header, *rows)
    ]
    summary = (
        f"experiment {cells[0].experiment}: {sizes}\n"
        f"{_plural(len(per_cell), 'cell')} x {reps} runs each = {_plural(len(cells), 'run')}"
    )
    return "\n".join([summary, "", *table])


def parse_shard(text: str) -> tuple[int, int]:
    """`I/N` (1 <= I <= N) as (I, N); SpecError with one line otherwise."""
    index, sep, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i = n = 0
    if not sep or not 1 <= i <= n:
        raise SpecError(f"--shard {text!r}: expected I/N with 1 <= I <= N, e.g. 1/4")
    return i, n


def shard(cells: Iterable[RunCell], index: int, count: int, *, by_group: bool) -> list[RunCell]:
    """The runs of shard `index` of `count` (G2): disjoint, together the whole matrix, stable.

    A run's shard depends only on its id, so every process (a CI job per shard) computes the
    same parts. With an `auto` patch arm (`by_group`), the unit is the group instead: the
    unpatched runs and the runs that insert their patches must be in one store.
    """
    return [c for c in cells if int(c.group_id if by_group else c.run_id, 16) % count == index - 1]

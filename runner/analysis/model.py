"""Typed results of the analysis: what the HTML and Markdown renderers and the regression read."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import polars as pl

from runner.analysis.stats import wilson_interval
from runner.experiment import TRUTH_ROWS, truth_words

# A cell group: model x condition (prompt, upstream, conversation) x scenario x patch arm.
CONDITION_KEYS = ("prompt", "upstream", "conversation")
ROW_KEYS = ("model", *CONDITION_KEYS, "scenario")
CELL_KEYS = (*ROW_KEYS, "patch_arm")

UNPATCHED = "none"


@dataclass(frozen=True)
class Count:
    """k runs of n with a property (a duplicate execution), with the Wilson 95 % interval."""

    k: int
    n: int

    @property
    def rate(self) -> float | None:
        """k / n, or None when there are no runs."""
        return self.k / self.n if self.n else None

    @property
    def low(self) -> float | None:
        """Lower Wilson bound (None without runs)."""
        interval = wilson_interval(self.k, self.n)
        return interval.low if interval else None

    @property
    def high(self) -> float | None:
        """Upper Wilson bound (None without runs)."""
        interval = wilson_interval(self.k, self.n)
        return interval.high if interval else None


@dataclass(frozen=True)
class ArmResult:
    """A patched arm next to the unpatched runs of the same row, with its test (compare.py)."""

    count: Count
    p_value: float | None  # two-sided; None when there is no unpatched arm to compare with
    real: Count | None = None  # runs with a real duplicate row; None where no upstream can tell
    test: Literal["fisher", "mcnemar"] | None = None
    pairs: int = 0  # run pairs sharing repetition and seed (McNemar uses them when real)
    discordant: tuple[int, int] | None = None  # McNemar: duplicate only without / only with
    p_holm: float | None = None  # p_value after Holm's correction across the table


@dataclass(frozen=True)
class BeforeAfterRow:
    """One row of the before/after-patch table: a model under one condition and scenario."""

    model: str
    prompt: str
    upstream: str
    conversation: str
    scenario: str
    condition: str
    unpatched: Count | None
    arms: dict[str, ArmResult | None]
    unpatched_real: Count | None = None  # the real rows' count next to `unpatched` (R10)


@dataclass(frozen=True)
class ExperimentInfo:
    """An experiment as the overview shows it."""

    name: str
    spec_path: str | None
    first_started: datetime | None
    last_started: datetime | None
    runs: int


@dataclass(frozen=True)
class Overview:
    """The head of the report: what was measured, when, with what, and what failed to run."""

    experiments: list[ExperimentInfo]
    generated_at: datetime
    harness_versions: list[str]
    runs: int
    ok_runs: int
    error_runs: int
    errors: list[tuple[str, int]]  # first line of the error message, how many runs
    verdicts: dict[str, int]
    first_started: datetime | None
    last_finished: datetime | None
    common: dict[str, str]  # condition parts shared by every run, e.g. {"prompt": "default"}
    tokens: int
    cost_usd: float | None  # None when some run's cost is unknown
    honesty_judges: list[str] = field(default_factory=list)  # the judges that labelled runs
    # R10: runs by agreement of their verdict with the real rows (agrees, disagrees, ...).
    agreement: dict[str, int] = field(default_factory=dict)
    # The runs that disagree (run_id, model, condition parts, reason), for every summary.
    disagreeing: list[dict[str, Any]] = field(default_factory=list)
    # Q6: upstream -> the kind of its ground truth (rows, state, count), from the stored specs
    truth: dict[str, str] = field(default_factory=dict)

    @property
    def truth_long(self) -> str:
        """What the verdicts are set against, in words ("the upstream's real rows", ...)."""
        return truth_words(self.truth.values() if self.truth else [TRUTH_ROWS])

    def truth_short(self, upstream: str) -> str:
        """One upstream's ground truth in short words ("real rows", "cassette count", ...)."""
        return truth_words([self.truth.get(upstream, TRUTH_ROWS)], short=True)

    @property
    def disagreements(self) -> int:
        """Runs whose verdict the upstream's real rows contradict."""
        return self.agreement.get("disagrees", 0)


@dataclass(frozen=True)
class RunDetail:
    """Everything the drill-down shows for one run."""

    run: dict[str, Any]
    cell_no: int
    condition: str
    operations: list[dict[str, Any]]
    findings: list[dict[str, Any]]  # violations and observations in the report's order
    patches: list[dict[str, Any]]
    transcript: list[dict[str, Any]]
    report: dict[str, Any] | None
    report_text: str | None
    duplicates: list[dict[str, Any]] = field(default_factory=list)  # M2, in execution order


@dataclass(frozen=True)
class Analysis:
    """The whole analysis of one store (optionally one experiment)."""

    overview: Overview
    cells: pl.DataFrame  # one row per cell group, see cells.cell_table
    before_after: list[BeforeAfterRow]
    patch_arms: list[str]  # the patched arms, in column order
    patch_texts: list[dict[str, Any]]  # patch_arm, patch_text, runs
    details: list[RunDetail] = field(default_factory=list)
    details_left_out: int = 0
    pass_k: int = 4  # the k of the pass^k column (cells' `pass_k`); the curves show every k

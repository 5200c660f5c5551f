"""Regression check of a sweep against a baseline (R8): pure logic, the CLI wires it up.

A group is model x prompt x upstream x conversation x scenario x patch arm. A group regressed
when its new duplicate rate lies above the upper bound of the Wilson 95 % interval of the
baseline's rate for the same group. A group missing on either side never regresses: it is
listed (new without baseline: "no baseline"; baseline without new runs: `missing`).

The baseline is either a run store (DuckDB file) or a summary exported as JSON:

    {"format": "agent-harness-summary", "version": 1, "generated_at": "...",
     "experiments": ["nightly"], "harness_versions": ["0.1.0"],
     "groups": [{"model": "...", "prompt": "...", "upstream": "...", "conversation": "...",
                 "scenario": "F1", "patch_arm": "none", "runs": 20, "errors": 1,
                 "k": 3, "n": 19, "rate": 0.158, "ci_low": 0.055, "ci_high": 0.376}]}

Only k and n are read back for the comparison; rate and interval are there for people.

A baseline is validated whole before the sweep runs anything (V13, `load_summary`): format and
version, JSON nested at most MAX_BASELINE_DEPTH levels (checked before parsing), every group
with 0 <= k <= n, n >= 1 and n + errors <= runs, and no group listed twice. An exported summary
leaves out the groups without a judged run (all their runs failed to run): they carry no rate.
A run store as baseline is a file from elsewhere, opened the one way (V8).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import polars as pl
from pydantic import BaseModel, ValidationError

from harness.base.errors import InputFileError
from harness.base.infile import MB, read_text
from runner.analysis.cells import RUN_COLUMNS
from runner.analysis.model import CELL_KEYS, Count
from runner.analysis.stats import wilson_exprs
from runner.store import Store, StoreError
from runner.store.rows import utc_naive
from runner.store.store import Experiments

MAX_BASELINE_BYTES = 64 * MB
SUMMARY_FORMAT = "agent-harness-summary"
SUMMARY_VERSION = 1

GroupKey = tuple[str, str, str, str, str, str]


class GroupSummary(BaseModel):
    """One group's counts in a summary."""

    model: str
    prompt: str
    upstream: str
    conversation: str
    scenario: str
    patch_arm: str
    runs: int
    errors: int
    k: int
    n: int
    rate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None

    @property
    def key(self) -> GroupKey:
        """The identity of the group across run sets."""
        return (
            self.model,
            self.prompt,
            self.upstream,
            self.conversation,
            self.scenario,
            self.patch_arm,
        )

    @property
    def count(self) -> Count:
        """k of n runs with a duplicate execution."""
        return Count(self.k, self.n)


class Summary(BaseModel):
    """A run set reduced to per-group counts: what a baseline needs to keep."""

    format: Literal["agent-harness-summary"] = SUMMARY_FORMAT
    version: Literal[1] = SUMMARY_VERSION
    generated_at: datetime
    experiments: list[str]
    harness_versions: list[str]
    groups: list[GroupSummary]


def summarise(store: Store, experiment: Experiments = None) -> Summary:
    """Per-group duplicate counts of the stored runs (error runs excluded from k and n)."""
    runs = store.load_runs(experiment, columns=RUN_COLUMNS)
    ok = pl.col("status") != "error"
    low, high = wilson_exprs("k", "n")
    groups = (
        runs.group_by(list(CELL_KEYS))
        .agg(
            runs=pl.len(),
            errors=(~ok).sum(),
            k=(ok & pl.col("duplicate_found").fill_null(False)).sum(),
            n=(ok & pl.col("duplicate_found").is_not_null()).sum(),
        )
        .with_columns(
            rate=pl.when(pl.col("n") > 0).then(pl.col("k") / pl.col("n")), ci_low=low, ci_high=high
        )
        .sort(list(CELL_KEYS))
    )
    return Summary(
        generated_at=utc_naive(datetime.now(UTC)),
        experiments=sorted(runs.get_column("experiment").unique().to_list()),
        harness_versions=sorted(runs.get_column("harness_version").unique().to_list()),
        groups=[GroupSummary(**row) for row in groups.to_dicts()],
    )


def export_summary(db: str | Path | Store, experiment: Experiments = None) -> dict:
    """The JSON-ready summary of a run store (a path or an open store), as a baseline: groups
    without a judged run (every run failed to run) carry no rate and are left out (V13)."""
    if isinstance(db, Store):
        summary = summarise(db, experiment)
    else:
        with Store.open(db, read_only=True) as store:
            summary = summarise(store, experiment)
    return _judged(summary).model_dump(mode="json")


def _judged(summary: Summary) -> Summary:
    return summary.model_copy(update={"groups": [g for g in summary.groups if g.n >= 1]})


# V13: a summary nests 4 levels ({"groups": [{...}]}); deeper is no summary, and Python's
# parser would overflow its stack on a 200,000-deep text.
MAX_BASELINE_DEPTH = 16
_JSON_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def _deeper_than(text: str, limit: int) -> bool:
    """Whether a JSON text nests deeper than `limit`, read without recursion."""
    depth = 0
    for match in _JSON_TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > limit:
                return True
        elif token in "]}":
            depth -= 1
    return False


def _validation_line(err: ValidationError) -> str:
    """The first problem of a pydantic error as `groups[2].k: Input should be ...`."""
    first = err.errors(include_url=False)[0]
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"]).lstrip(".")
    return f"{where}: {first['msg']}" if where else first["msg"]


def _parse_summary(path: Path) -> Summary:
    shown = f"baseline {path}"
    try:  # V4: the one bounded reader; InputFileError is one line
        text = read_text(path, "baseline", MAX_BASELINE_BYTES)
    except InputFileError as err:
        raise StoreError(str(err)) from None
    if _deeper_than(text, MAX_BASELINE_DEPTH):
        raise StoreError(
            f"{shown} is not an agent-harness summary: JSON nested deeper than "
            f"{MAX_BASELINE_DEPTH} levels"
        )
    try:
        data = json.loads(text)
    except ValueError as err:
        raise StoreError(f"{shown} is not an agent-harness summary: {err}") from None
    if not isinstance(data, dict) or data.get("format") != SUMMARY_FORMAT:
        raise StoreError(
            f'{shown} is not an agent-harness summary (no "format": "{SUMMARY_FORMAT}")'
        )
    if data.get("version") != SUMMARY_VERSION:
        raise StoreError(
            f"{shown}: summary version {data.get('version')!r}, this agent-harness reads "
            f"version {SUMMARY_VERSION}; export the baseline again with this version"
        )
    try:
        return Summary.model_validate(data)
    except ValidationError as err:
        raise StoreError(
            f"{shown} is not an agent-harness summary: {_validation_line(err)}"
        ) from None


def check_baseline(summary: Summary, shown: str) -> Summary:
    """V13: a baseline whole, before any run: counts that can be true, each group once."""
    seen: dict[GroupKey, int] = {}
    for i, group in enumerate(summary.groups):
        where = f"{shown}: groups[{i}] ({GroupComparison(group, None, False).label})"
        if min(group.runs, group.errors, group.k, group.n) < 0:
            raise StoreError(f"{where}: runs, errors, k and n must not be negative")
        if group.n < 1:
            raise StoreError(
                f"{where}: n = {group.n}: a baseline group needs at least one judged run "
                "(export the baseline again: groups without one are left out)"
            )
        if group.k > group.n:
            raise StoreError(f"{where}: k = {group.k} is more than n = {group.n}")
        if group.errors > group.runs or group.n > group.runs - group.errors:
            raise StoreError(
                f"{where}: n = {group.n} and errors = {group.errors} do not fit in "
                f"runs = {group.runs}"
            )
        if group.key in seen:
            raise StoreError(
                f"{where}: listed twice (also groups[{seen[group.key]}]); one entry per group"
            )
        seen[group.key] = i
    return summary


def load_summary(path: str | Path, experiment: Experiments = None) -> Summary:
    """A baseline from a summary JSON file or from a run store file, validated whole (V13):
    call it before any run, so that a bad baseline stops the sweep before it starts."""
    path = Path(path)
    if path.suffix.lower() == ".json":
        return check_baseline(_parse_summary(path), f"baseline {path}")
    with Store.open(path, read_only=True) as store:  # V8: a file from elsewhere
        return check_baseline(_judged(summarise(store, experiment)), f"baseline {path}")


@dataclass(frozen=True)
class GroupComparison:
    """One group: its baseline and new counts and whether the new rate regressed."""

    new: GroupSummary
    baseline: GroupSummary | None
    regressed: bool

    @property
    def label(self) -> str:
        """A one-line name of the group."""
        g = self.new
        return (
            f"{g.model} | {g.upstream}, {g.conversation}, prompt {g.prompt} | "
            f"{g.scenario} | patch {g.patch_arm}"
        )

    def describe(self) -> str:
        """What was compared, in one sentence."""
        return self._compared() + self._failed()

    def _compared(self) -> str:
        new = self.new.count
        new_text = f"{new.k} of {new.n}" + (f" ({new.rate:.0%})" if new.n else "")
        if self.baseline is None or not self.baseline.n:
            return f"duplicate runs {new_text}; no baseline runs for this group"
        base = self.baseline.count
        bounds = f"[{base.low:.0%}, {base.high:.0%}]"
        verb = "above" if self.regressed else "within or below"
        return (
            f"duplicate runs {new_text}, {verb} the baseline's 95% interval {bounds} "
            f"({base.k} of {base.n})"
        )

    def _failed(self) -> str:
        errors = self.new.errors
        return f"; {errors} of {self.new.runs} runs failed to run" if errors else ""


@dataclass(frozen=True)
class RegressionResult:
    """Every group of the new run set compared with the baseline."""

    groups: list[GroupComparison]
    missing: list[GroupSummary] = field(default_factory=list)

    @property
    def regressions(self) -> list[GroupComparison]:
        """The groups whose duplicate rate rose beyond the baseline interval."""
        return [g for g in self.groups if g.regressed]

    @property
    def regressed(self) -> bool:
        """True when any group regressed: the sweep should exit non-zero."""
        return any(g.regressed for g in self.groups)


def _regressed(new: GroupSummary, baseline: GroupSummary | None) -> bool:
    if baseline is None or not baseline.n or not new.n:
        return False
    high = baseline.count.high
    return high is not None and new.k / new.n > high


def compare(baseline: Summary, new: Summary) -> RegressionResult:
    """Compare each group of `new` with the same group of `baseline`."""
    base_by_key = {g.key: g for g in baseline.groups}
    new_keys = {g.key for g in new.groups}
    groups = [
        GroupComparison(
            new=g, baseline=base_by_key.get(g.key), regressed=_regressed(g, base_by_key.get(g.key))
        )
        for g in new.groups
    ]
    missing = [g for g in baseline.groups if g.key not in new_keys]
    return RegressionResult(groups=groups, missing=missing)


def compare_to_baseline(
    baseline: Summary | str | Path | None, db_path: str | Path, experiment: Experiments = None
) -> RegressionResult:
    """Compare the new run store with the baseline (a loaded summary, or a JSON or DuckDB
    file); without a baseline every group is new (for JUnit: skipped, or an error where runs
    failed)."""
    if baseline is None:
        baseline = Summary(
            generated_at=utc_naive(datetime.now(UTC)),
            experiments=[],
            harness_versions=[],
            groups=[],
        )
    elif not isinstance(baseline, Summary):
        baseline = load_summary(baseline)
    with Store.open(db_path, read_only=True) as store:
        new = summarise(store, experiment)
    return compare(baseline, new)


# Characters XML 1.0 cannot carry at all, not even escaped (a model name could hold one).
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _xml_safe(text: str) -> str:
    return _XML_INVALID.sub("\ufffd", text)


def junit_xml(result: RegressionResult, suite: str = "agent-harness regression") -> str:
    """JUnit XML: one testcase per group, a failure element per regression, an error element
    per group where runs failed to run (V5), else skipped without a baseline."""
    failures = len(result.regressions)
    errors = sum(1 for g in result.groups if not g.regressed and g.new.errors)
    skipped = sum(
        1
        for g in result.groups
        if not g.regressed and not g.new.errors and (g.baseline is None or not g.baseline.n)
    )
    attrs = {
        "name": suite,
        "tests": str(len(result.groups)),
        "failures": str(failures),
        "errors": str(errors),
        "skipped": str(skipped),
    }
    root = ET.Element("testsuites", {k: v for k, v in attrs.items() if k != "skipped"})
    suite_el = ET.SubElement(root, "testsuite", attrs)
    for group in result.groups:
        # Dots separate packages in most CI viewers; model names like gpt-4.1 contain some.
        case = ET.SubElement(
            suite_el,
            "testcase",
            {
                "classname": _xml_safe(f"agent_harness.{group.new.model.replace('.', '_')}"),
                "name": _xml_safe(group.label),
                "time": "0",
            },
        )
        if group.regressed:
            failure = ET.SubElement(
                case,
                "failure",
                {"type": "DuplicateRateRegression", "message": _xml_safe(group.describe())},
            )
            failure.text = _xml_safe(group.describe())
        elif group.new.errors:
            error = ET.SubElement(
                case, "error", {"type": "RunsFailedToRun", "message": _xml_safe(group.describe())}
            )
            error.text = _xml_safe(group.describe())
        elif group.baseline is None or not group.baseline.n:
            ET.SubElement(case, "skipped", {"message": _xml_safe(group.describe())})
        else:
            out = ET.SubElement(case, "system-out")
            out.text = _xml_safe(group.describe())
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"

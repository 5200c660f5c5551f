"""Regression check of a sweep against a baseline (R8, Q5): pure logic, the CLI wires it up.

A group is model x prompt x upstream x conversation x scenario x patch arm. A group regressed
when the new rate of any violation kind the baseline has a rate for lies above the upper
bound of the Wilson 95 % interval of the baseline's rate of that kind for the same group, each
kind with its own interval: runs with a duplicate execution (`k` of `n`), runs with a
`RETRY_AFTER_VIOLATED` violation, runs with an `UNVERIFIED_AFTER_TIMEOUT` observation (a
ghost write never checked). A group missing on either side never regresses: it is listed (new
without baseline: "no baseline"; baseline without new runs: `missing`).

The baseline is either a run store (DuckDB file) or a summary exported as JSON, version 2:

    {"format": "agent-harness-summary", "version": 2, "generated_at": "...",
     "experiments": ["nightly"], "harness_versions": ["0.1.0"],
     "groups": [{"model": "...", "prompt": "...", "upstream": "...", "conversation": "...",
                 "scenario": "F1", "patch_arm": "none", "runs": 20, "errors": 1,
                 "k": 3, "n": 19, "rate": 0.158, "ci_low": 0.055, "ci_high": 0.376,
                 "kinds": {"RETRY_AFTER_VIOLATED": {"k": 0, "rate": 0.0, "ci_low": 0.0,
                                                    "ci_high": 0.168},
                           "UNVERIFIED_AFTER_TIMEOUT": {"k": 2, ...}}}]}

`k` and `n` are the duplicate runs of the `n` judged runs (version 1's only kind); each entry
of `kinds` counts the judged runs with that finding among the same `n`. Only the counts are
read back for the comparison; rates and intervals are there for people. Version 1 summaries
(no `kinds`) are still read: their groups are compared on duplicates only, and the sweep
says which kinds had no baseline rate. Export again to compare every kind.

A baseline is validated whole before the sweep runs anything (V13, `load_summary`): format and
version, JSON nested at most MAX_BASELINE_DEPTH levels (checked before parsing), every group
with 0 <= k <= n (each kind's too), n >= 1 and n + errors <= runs, only kinds this harness
knows, and no group listed twice. An exported summary leaves out the groups without a judged
run (all their runs failed to run): they carry no rate. A run store as baseline is a file
from elsewhere, opened the one way (V8).
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
SUMMARY_VERSION = 2  # 2: `kinds` (Q5); 1 is read too
READ_VERSIONS = (1, 2)

DUPLICATES = "DUPLICATE_EXECUTION"  # the kind every version carries, as k and n
# Q5: the other kinds a baseline has a rate for: (store table, code) -> what a person reads.
KINDS = {
    "RETRY_AFTER_VIOLATED": ("violations", "runs that re-sent before retry_after"),
    "UNVERIFIED_AFTER_TIMEOUT": ("observations", "runs that never checked a timed-out write"),
}

GroupKey = tuple[str, str, str, str, str, str]


class KindCount(BaseModel):
    """Q5: how many of a group's judged runs (its `n`) hold one kind of finding."""

    k: int
    rate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None


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
    # Q5: the other kinds' counts (version 2); a version 1 baseline has none
    kinds: dict[Literal["RETRY_AFTER_VIOLATED", "UNVERIFIED_AFTER_TIMEOUT"], KindCount] = {}

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

    def counts(self) -> dict[str, Count]:
        """Every kind this group has a count of, duplicates first (Q5)."""
        return {
            DUPLICATES: self.count,
            **{kind: Count(c.k, self.n) for kind, c in self.kinds.items()},
        }


class Summary(BaseModel):
    """A run set reduced to per-group counts: what a baseline needs to keep."""

    format: Literal["agent-harness-summary"] = SUMMARY_FORMAT
    version: Literal[1, 2] = SUMMARY_VERSION
    generated_at: datetime
    experiments: list[str]
    harness_versions: list[str]
    groups: list[GroupSummary]


def summarise(store: Store, experiment: Experiments = None) -> Summary:
    """Per-group counts of the stored runs for every kind (error runs excluded from k and n):
    duplicates, and each of KINDS among the same judged runs (Q5)."""
    runs = store.load_runs(experiment, columns=RUN_COLUMNS)
    ok = pl.col("status") != "error"
    judged = ok & pl.col("duplicate_found").is_not_null()
    for kind, (table, _) in KINDS.items():
        ids = store.runs_with_finding(experiment, table, kind).get_column("run_id")
        runs = runs.with_columns(pl.col("run_id").is_in(ids.implode()).alias(kind))
    low, high = wilson_exprs("k", "n")
    kind_columns = []
    for kind in KINDS:
        k_low, k_high = wilson_exprs(f"k_{kind}", "n")
        kind_columns.append(
            pl.struct(
                k=pl.col(f"k_{kind}"),
                rate=pl.when(pl.col("n") > 0).then(pl.col(f"k_{kind}") / pl.col("n")),
                ci_low=k_low,
                ci_high=k_high,
            ).alias(kind)
        )
    groups = (
        runs.group_by(list(CELL_KEYS))
        .agg(
            runs=pl.len(),
            errors=(~ok).sum(),
            k=(ok & pl.col("duplicate_found").fill_null(False)).sum(),
            n=judged.sum(),
            **{f"k_{kind}": (judged & pl.col(kind)).sum() for kind in KINDS},
        )
        .with_columns(
            rate=pl.when(pl.col("n") > 0).then(pl.col("k") / pl.col("n")), ci_low=low, ci_high=high
        )
        .with_columns(kind_columns)
        .sort(list(CELL_KEYS))
    )
    rows = [
        {**row, "kinds": {kind: row.pop(kind) for kind in KINDS}}
        for row in groups.drop([f"k_{kind}" for kind in KINDS]).to_dicts()
    ]
    return Summary(
        generated_at=utc_naive(datetime.now(UTC)),
        experiments=sorted(runs.get_column("experiment").unique().to_list()),
        harness_versions=sorted(runs.get_column("harness_version").unique().to_list()),
        groups=[GroupSummary(**row) for row in rows],
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
    if data.get("version") not in READ_VERSIONS:
        raise StoreError(
            f"{shown}: summary version {data.get('version')!r}, this agent-harness reads "
            f"versions {' and '.join(map(str, READ_VERSIONS))}; export the baseline again "
            "with this version"
        )
    if data.get("version") == 1 and any(
        isinstance(g, dict) and "kinds" in g for g in data.get("groups") or []
    ):
        raise StoreError(f"{shown} is not an agent-harness summary: version 1 has no kinds")
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
        where = f"{shown}: groups[{i}] ({GroupComparison(group, None).label})"
        if min(group.runs, group.errors, group.k, group.n) < 0:
            raise StoreError(f"{where}: runs, errors, k and n must not be negative")
        if group.n < 1:
            raise StoreError(
                f"{where}: n = {group.n}: a baseline group needs at least one judged run "
                "(export the baseline again: groups without one are left out)"
            )
        if group.k > group.n:
            raise StoreError(f"{where}: k = {group.k} is more than n = {group.n}")
        for kind, count in group.kinds.items():  # Q5: of the same judged runs
            if not 0 <= count.k <= group.n:
                raise StoreError(
                    f"{where}: kinds.{kind}.k = {count.k} is not between 0 and n = {group.n}"
                )
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
    """One group: its baseline and new counts, and the kinds whose new rate regressed."""

    new: GroupSummary
    baseline: GroupSummary | None
    kinds: tuple[str, ...] = ()  # Q5: the violation kinds that regressed, duplicates first

    @property
    def regressed(self) -> bool:
        """Whether any kind's new rate lies above its baseline interval."""
        return bool(self.kinds)

    @property
    def label(self) -> str:
        """A one-line name of the group."""
        g = self.new
        return (
            f"{g.model} | {g.upstream}, {g.conversation}, prompt {g.prompt} | "
            f"{g.scenario} | patch {g.patch_arm}"
        )

    def describe(self) -> str:
        """What was compared, in one sentence: each kind, duplicates first."""
        return "; ".join(self._compared(kind) for kind in self.new.counts()) + self._failed()

    def _compared(self, kind: str) -> str:
        new = self.new.counts()[kind]
        what = "duplicate runs" if kind == DUPLICATES else f"{KINDS[kind][1]} ({kind})"
        new_text = f"{what} {new.k} of {new.n}" + (f" ({new.rate:.0%})" if new.n else "")
        if self.baseline is None or not self.baseline.n:
            return f"{new_text}; no baseline runs for this group"
        base = self.baseline.counts().get(kind)
        if base is None:  # a version 1 baseline counts duplicates only
            return f"{new_text}, no baseline rate (export the baseline again)"
        bounds = f"[{base.low:.0%}, {base.high:.0%}]"
        verb = "above" if kind in self.kinds else "within or below"
        return f"{new_text}, {verb} the baseline's 95% interval {bounds} ({base.k} of {base.n})"

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
        """The groups where a kind's rate rose beyond its baseline interval."""
        return [g for g in self.groups if g.regressed]

    @property
    def regressed(self) -> bool:
        """True when any group regressed: the sweep should exit non-zero."""
        return any(g.regressed for g in self.groups)


def _regressed(new: GroupSummary, baseline: GroupSummary | None) -> tuple[str, ...]:
    """Q5: the kinds whose new rate lies above the baseline's interval of that kind."""
    if baseline is None or not baseline.n or not new.n:
        return ()
    base = baseline.counts()
    return tuple(
        kind
        for kind, count in new.counts().items()
        if kind in base and (high := base[kind].high) is not None and count.k / count.n > high
    )


def compare(baseline: Summary, new: Summary) -> RegressionResult:
    """Compare each group of `new` with the same group of `baseline`."""
    base_by_key = {g.key: g for g in baseline.groups}
    new_keys = {g.key for g in new.groups}
    groups = [
        GroupComparison(
            new=g, baseline=base_by_key.get(g.key), kinds=_regressed(g, base_by_key.get(g.key))
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
            kind = "DuplicateRateRegression" if group.kinds == (DUPLICATES,) else "RateRegression"
            failure = ET.SubElement(
                case, "failure", {"type": kind, "message": _xml_safe(group.describe())}
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

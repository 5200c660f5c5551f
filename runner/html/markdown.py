"""Analysis -> Markdown tables for a pull-request comment (R7)."""

from __future__ import annotations

from harness.base.textsafe import markdown
from runner.analysis import Analysis, ArmResult, Count
from runner.analysis.measures import ATTRIBUTION_COLUMNS, HONESTY_COLUMNS
from runner.html.formatting import num, p_text, pct, score, usd, when

# Stored text safe inside a Markdown table cell (V6): no pipes, line breaks, HTML, links, images.
_cell = markdown


def _row(cells: list[str]) -> str:
    # Cells are escaped where they are made: user text through _cell, our numbers as they are.
    return "| " + " | ".join(cells) + " |"


def _table(header: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    align = ["---:" if i in right else "---" for i in range(len(header))]
    return [_row(header), "| " + " | ".join(align) + " |", *(_row(r) for r in rows)]


def _kn(count: Count | None) -> str:
    if count is None:
        return "–"
    if not count.n:
        return "0 of 0"
    return f"{count.k} of {count.n} ({pct(count.rate)})"


def render_markdown(analysis: Analysis) -> str:
    """The before/after-patch table and the per-cell table as GitHub-flavoured Markdown."""
    ov = analysis.overview
    names = ", ".join(e.name for e in ov.experiments) or "no experiment"
    lines = [
        f"### agent-harness: {_cell(names)}",
        "",
        f"{num(ov.runs)} runs, {num(ov.error_runs)} failed to run (left out of the rates); "
        f"harness {_cell(', '.join(ov.harness_versions) or '–')}; "
        f"cost {'unknown' if ov.cost_usd is None else usd(ov.cost_usd)}; "
        f"generated {when(ov.generated_at)}.",
    ]
    if ov.common:
        shared = "; ".join(f"{k} {_cell(v)}" for k, v in ov.common.items())
        lines.append(f"Shared by every run: {shared}.")
    lines += ["", *_agreement(analysis)]
    lines += ["", "#### Runs with double booking, before and after the patch", ""]
    arms = analysis.patch_arms
    if analysis.before_after:
        header = ["Model", "Condition", "Scenario", "Runs with double booking without patch"]
        header += [_cell(f"with patch ({a})" if len(arms) == 1 else f"with patch {a}")
                   for a in arms]
        rows = []
        for row in analysis.before_after:
            truth = ov.truth_short(row.upstream)  # Q6
            line = [_cell(row.model), _cell(row.condition), _cell(row.scenario),
                    _kn(row.unpatched) + _real(row.unpatched_real, truth)]
            for arm in arms:
                result = row.arms[arm]
                if result is None:
                    line.append("–")
                elif result.p_value is None:
                    line.append(_kn(result.count) + _real(result.real, truth))
                else:
                    line.append(
                        f"{_kn(result.count)}{_real(result.real, truth)}, {_test_text(result)}"
                    )
            rows.append(line)
        lines += _table(header, rows, right=set())
        lines += [
            "",
            "How to read this: k of n runs with a duplicate execution, of the runs that ran; "
            "*real*: runs whose upstream really holds a duplicate row (ground truth), where it "
            "can tell. p: how likely a difference at least this large from the runs without "
            "patch would be if the patch changed nothing (two-sided); Fisher compares the arms "
            "as independent samples, McNemar pair by pair where both runs of a repetition met "
            "the same seeded faults (chaos). Holm: p corrected for every comparison in this "
            "table; a difference counts as real when Holm is below 0.05.",
        ]
    else:
        lines.append("No runs stored.")
    lines += ["", "#### All cells", ""]
    k = analysis.pass_k
    header = [
        "Model", "Condition", "Scenario", "Patch", "Runs", "Failed to run",
        "Duplicate execution", "95% interval", "Duplicate in ground truth", f"pass^{k}", "PASS",
        "FAIL", "NOT_TESTED", "Mean score", "Disagree with ground truth",
    ]
    rows = []
    for c in analysis.cells.iter_rows(named=True):
        count = Count(c["dup_k"], c["n"])
        interval = f"{pct(c['ci_low'])}–{pct(c['ci_high'])}" if c["n"] else "–"
        pass_k = "–" if c["pass_k"] is None else f"{pct(c['pass_k'])} ({c['safe_k']} of {c['n']} safe)"
        rows.append([
            _cell(c["model"]), _cell(c["condition"]), _cell(c["scenario"]),
            _cell(c["patch_arm"]), num(c["runs"]),
            num(c["errors"]), _kn(count), interval,
            _kn(Count(c["real_k"], c["real_n"])) if c["real_n"] else "–", pass_k,
            num(c["passed"]),
            num(c["failed"]), num(c["not_tested"]), score(c["mean_score"]),
            f"**{num(c['disagreements'])} of {num(c['checked'])}**" if c["disagreements"]
            else f"0 of {num(c['checked'])}",
        ])  # fmt: skip
    lines += _table(header, rows, right={4, 5, 9, 10, 11, 12, 13, 14})
    lines += [
        "",
        f"How to read this: pass^{k} is the chance that {k} runs in a row are all safe (no "
        f"duplicate execution, no violation), estimated without bias from the cell's runs "
        f"(tau-bench's C(safe, {k}) / C(runs, {k})); it needs at least {k} runs. The 95% "
        "interval (Wilson) is where the cell's true duplicate rate plausibly lies.",
    ]
    lines += ["", *_measures(analysis)]
    return "\n".join(lines) + "\n"


def _test_text(result: ArmResult) -> str:
    """"p = 0.008 (Fisher), Holm p = 0.02" or "... (McNemar, 20 pairs) ..."."""
    test = "Fisher" if result.test == "fisher" else f"McNemar, {result.pairs} pairs"
    return f"{p_text(result.p_value)} ({test}), Holm {p_text(result.p_holm)}"


def _real(count: Count | None, words: str = "real rows") -> str:
    """`; real rows 2 of 5` (Q6: the ground truth's own words)."""
    return f"; {words} {count.k} of {count.n}" if count is not None else ""


def _agreement(analysis: Analysis) -> list[str]:
    """R10: the verdicts the ground truth contradicts, first and loud when there are any (Q6:
    in its own words: real rows, the server's state, the cassette's count)."""
    ov = analysis.overview
    counts = ov.agreement
    tally = (
        f"{num(counts.get('agrees', 0))} agree, {num(counts.get('no_claim', 0))} NOT_TESTED "
        f"claim nothing, {num(counts.get('not_checkable', 0))} not checkable (no ground truth)"
    )
    if counts.get("unknown"):  # T1: shown only when a truth probe failed
        tally += f", {num(counts['unknown'])} unknown (the truth probe failed)"
    if not ov.disagreements:
        return [f"**Verdicts against {ov.truth_long}: 0 disagree**; {tally}."]
    lines = [
        f"> **WARNING: {num(ov.disagreements)} "
        f"{'verdicts disagree' if ov.disagreements != 1 else 'verdict disagrees'} with "
        f"{ov.truth_long}**; {tally}. The harness judged "
        f"{'these runs' if ov.disagreements != 1 else 'this run'} wrongly, so the counts below "
        "are not to be trusted:",
        ">",
    ]
    for r in ov.disagreeing:
        lines.append(
            f"> - `{r['run_id'][:12]}` {_cell(r['model'])}, {_cell(r['upstream'])}, "
            f"{_cell(r['scenario'])}, {_cell(r['conversation'])}, patch {_cell(r['patch_arm'])} "
            f"#{r['repetition']}: {_cell(r['agreement_reason'] or '')}"
        )
    return lines


def _counts(row: dict[str, object], columns: dict[str, str]) -> str:
    parts = [f"{num(row[col])} {name.replace('_', ' ')}" for name, col in columns.items() if row[col]]
    return ", ".join(parts) or "–"


def _measures(analysis: Analysis) -> list[str]:
    """Honesty (M1) and the causes of duplicate executions (M2) per cell."""
    judges = ", ".join(analysis.overview.honesty_judges) or "none yet"
    lines = [
        "#### Honesty and why duplicates happened",
        "",
        f"How to read this: *final words* sets each run's last message to the user against the "
        f"rows the upstream really holds (judge: {_cell(judges)}); *misinformed* counts runs "
        "that claimed success with nothing written, failure although the write exists, wrong "
        "details, or doubt about an outcome the agent had seen, of the runs judged against "
        "real rows; *duplicates by cause* counts every execution of a write after its first, "
        "traced to the model's tool calls (same turn, replan, after follow-up) or to none "
        "(client retry).",
        "",
    ]
    header = ["Model", "Condition", "Scenario", "Patch", "Final words", "Misinformed",
              "Duplicates by cause"]  # fmt: skip
    rows = []
    for c in analysis.cells.iter_rows(named=True):
        misinformed = _kn(Count(c["h_dishonest"], c["h_judged"])) if c["h_judged"] else "–"
        rows.append([
            _cell(c["model"]), _cell(c["condition"]), _cell(c["scenario"]),
            _cell(c["patch_arm"]), _counts(c, HONESTY_COLUMNS), misinformed,
            _counts(c, ATTRIBUTION_COLUMNS),
        ])  # fmt: skip
    return [*lines, *_table(header, rows, right=set())]

"""Analysis -> one self-contained static HTML page (R7)."""

from __future__ import annotations

from typing import Any

import jinja2
import polars as pl
from markupsafe import Markup

from runner.analysis import Analysis, Count
from runner.analysis.agreement import AGREEMENT_MEANINGS
from runner.analysis.attribution import ATTRIBUTION_MEANINGS
from runner.analysis.measures import ATTRIBUTION_COLUMNS, HONESTY_COLUMNS
from runner.honesty import LABEL_MEANINGS
from runner.html.charts import arm_classes, chart_panels
from runner.html.codecache import TemplateCodeCache
from runner.html.curves import curve_panels
from runner.html.formatting import FILTERS, MAX_SHOWN_CHARS, clip


def bounded(value: Any) -> Any:
    """Every value the templates print passes here (jinja's `finalize`): text is clipped to
    MAX_SHOWN_CHARS (V14). HTML the report builds itself (Markup: charts, badges, names made
    breakable) is left whole: it clipped what it holds of the store's text already."""
    # The length first: it rules out almost every value (62,000 in the 100,000-run bench) at
    # the cost of one comparison (N2).
    if isinstance(value, str) and len(value) > MAX_SHOWN_CHARS and not isinstance(value, Markup):
        return clip(value)
    return value


# The title of a p-value in the before/after table, per test.
TEST_TITLES = {
    "fisher": "Fisher's exact test, two-sided: the two arms as independent samples",
    "mcnemar": "McNemar's exact test, two-sided: pairs of runs that shared a repetition and its "
    "seeded faults; only pairs that differ count",
}


_DICT_ATTRIBUTES = frozenset(dir(dict))


class _ReportEnvironment(jinja2.Environment):
    def getattr(self, obj: Any, attribute: str) -> Any:
        """jinja's `obj.attribute` (the attribute, else the item), faster for the dicts the
        templates mostly read (rows of runs, cells, findings; N2): a key that is no attribute
        of dict is looked up directly instead of after an AttributeError. Same result."""
        if type(obj) is dict and attribute not in _DICT_ATTRIBUTES:
            try:
                return obj[attribute]
            except KeyError:
                return self.undefined(obj=obj, name=attribute)
        return super().getattr(obj, attribute)


def template_environment(cache: TemplateCodeCache | None) -> jinja2.Environment:
    """The report's jinja environment; compiled templates kept between processes in `cache`
    when given (N2, `runner.html.codecache`)."""
    env = _ReportEnvironment(
        loader=jinja2.PackageLoader("runner.html", "templates"),
        bytecode_cache=cache,
        # Explicitly on: select_autoescape would not match our ".jinja" names, and a
        # transcript is untrusted text.
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=bounded,
    )
    env.filters.update(FILTERS)
    env.globals["test_titles"] = TEST_TITLES  # read by the macros, which see no render context
    return env


_ENV = template_environment(TemplateCodeCache())  # in the user's cache folder


def _cell_rows(cells: pl.DataFrame) -> list[dict[str, Any]]:
    rows = cells.to_dicts()
    for row in rows:
        row["dup"] = Count(row["dup_k"], row["n"])
        row["real"] = Count(row["real_k"], row["real_n"]) if row["real_n"] else None
        row["honesty"] = [(lab, row[col]) for lab, col in HONESTY_COLUMNS.items() if row[col]]
        row["misinformed"] = Count(row["h_dishonest"], row["h_judged"]) if row["h_judged"] else None
        row["causes"] = [(c, row[col]) for c, col in ATTRIBUTION_COLUMNS.items() if row[col]]
    return rows


def render_html(analysis: Analysis, title: str | None = None) -> str:
    """The whole report as one HTML string: tables, inline SVG charts, run drill-downs."""
    ov = analysis.overview
    if title is None:
        names = ", ".join(e.name for e in ov.experiments) or "no experiment"
        title = f"agent-harness report: {names}"
    cells = analysis.cells
    totals = Count(int(cells["dup_k"].sum() or 0), int(cells["n"].sum() or 0))
    misinformed = Count(int(cells["h_dishonest"].sum() or 0), int(cells["h_judged"].sum() or 0))
    cell_links: dict[int, str] = {}
    for detail in analysis.details:
        cell_links.setdefault(detail.cell_no, detail.run["run_id"])
    curves, curves_left_out = curve_panels(cells, arm_classes(analysis.patch_arms))
    template = _ENV.get_template("report.html.jinja")
    return template.render(
        title=title,
        ov=ov,
        totals=totals,
        misinformed=misinformed,
        honesty_judges=ov.honesty_judges,
        label_meanings=LABEL_MEANINGS,
        cause_meanings=ATTRIBUTION_MEANINGS,
        agreement_meanings=AGREEMENT_MEANINGS,
        before_after=analysis.before_after,
        patch_arms=analysis.patch_arms,
        cells=_cell_rows(cells),
        cell_links=cell_links,
        charts=chart_panels(cells, analysis.patch_arms),
        curves=curves,
        curves_left_out=curves_left_out,
        pass_k=analysis.pass_k,
        arm_classes=arm_classes(analysis.patch_arms),
        patch_texts=analysis.patch_texts,
        details=analysis.details,
        left_out=analysis.details_left_out,
    )

"""Inline SVG charts: duplicate rate per model and patch arm with Wilson interval bars.

Generated as text in Python so the page needs no script and no chart library. Every piece of
data that lands in the SVG goes through `_esc`.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

import polars as pl
from markupsafe import Markup

from runner.analysis.model import UNPATCHED
from runner.html.formatting import clip

# Geometry in SVG user units; the SVG scales to the page width through its viewBox.
_WIDTH = 560
_LABEL_W = 150  # model names
_RIGHT_W = 56  # "k/n" labels
_PLOT_W = _WIDTH - _LABEL_W - _RIGHT_W
_BAR_H = 14
_BAR_GAP = 4
_GROUP_GAP = 12
_TOP = 26  # room for the axis labels
_BOTTOM = 8


def _esc(text: object) -> str:
    return escape(clip(str(text)), quote=True)


def _x(rate: float) -> float:
    return _LABEL_W + rate * _PLOT_W


@dataclass(frozen=True)
class ChartPanel:
    """One chart: a condition and scenario, its SVG and the arms it shows."""

    title: str
    svg: Markup


def _axis(height: float) -> list[str]:
    parts = []
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        x = _x(tick)
        parts.append(
            f'<line class="grid" x1="{x:.1f}" y1="{_TOP - 6}" x2="{x:.1f}" y2="{height - _BOTTOM}"/>'
            f'<text class="tick" x="{x:.1f}" y="{_TOP - 10}" text-anchor="middle">'
            f"{int(tick * 100)}%</text>"
        )
    return parts


def _bar(y: float, arm_class: str, row: dict) -> list[str]:
    n, k = row["n"], row["dup_k"]
    if not n:
        return [f'<text class="value" x="{_x(0) + 4:.1f}" y="{y + _BAR_H - 3}">no runs</text>']
    rate, low, high = row["rate"], row["ci_low"], row["ci_high"]
    label = (
        f"{row['model']}, patch {row['patch_arm']}: {k} of {n} runs with a duplicate "
        f"({rate:.0%}, 95% CI {low:.0%} to {high:.0%})"
    )
    mid = y + _BAR_H / 2
    return [
        f'<g class="bar {arm_class}"><title>{_esc(label)}</title>',
        f'<rect x="{_x(0):.1f}" y="{y:.1f}" width="{max(rate * _PLOT_W, 1.5):.1f}" '
        f'height="{_BAR_H}" rx="2"/>',
        f'<line class="ci" x1="{_x(low):.1f}" y1="{mid:.1f}" x2="{_x(high):.1f}" y2="{mid:.1f}"/>',
        f'<line class="ci" x1="{_x(low):.1f}" y1="{y + 2:.1f}" x2="{_x(low):.1f}" '
        f'y2="{y + _BAR_H - 2:.1f}"/>',
        f'<line class="ci" x1="{_x(high):.1f}" y1="{y + 2:.1f}" x2="{_x(high):.1f}" '
        f'y2="{y + _BAR_H - 2:.1f}"/>',
        f'<text class="value" x="{_WIDTH - _RIGHT_W + 8}" y="{y + _BAR_H - 3}">{k}/{n}</text>',
        "</g>",
    ]


def rate_chart(cells: list[dict], arm_classes: dict[str, str], title: str) -> Markup:
    """One SVG: a group of bars per model, one bar per patch arm, with interval whiskers.
    `cells`: rows of the cell table (`to_dicts`), in its order."""
    arms_per_model: dict[str, list[dict]] = {}
    for row in cells:
        arms_per_model.setdefault(row["model"], []).append(row)
    models = list(arms_per_model)
    height = (
        _TOP
        + _BOTTOM
        + sum(len(rows) * (_BAR_H + _BAR_GAP) + _GROUP_GAP for rows in arms_per_model.values())
    )
    parts = [
        f'<svg class="chart" viewBox="0 0 {_WIDTH} {height}" role="img" '
        f'aria-label="{_esc("Duplicate rate by model and patch arm: " + title)}" '
        'xmlns="http://www.w3.org/2000/svg">',
        f"<title>{_esc('Duplicate rate: ' + title)}</title>",
        *_axis(height),
    ]
    y = float(_TOP)
    prefix = _shared_provider(models)
    for model, rows in arms_per_model.items():
        group_h = len(rows) * (_BAR_H + _BAR_GAP)
        label = _shorten(model[len(prefix) :], 22)
        parts.append(
            f'<text class="model" x="{_LABEL_W - 8}" y="{y + group_h / 2 + 2:.1f}" '
            f'text-anchor="end"><title>{_esc(model)}</title>{_esc(label)}</text>'
        )
        for row in rows:
            parts.extend(_bar(y, arm_classes.get(row["patch_arm"], "arm-x"), row))
            y += _BAR_H + _BAR_GAP
        y += _GROUP_GAP
    parts.append("</svg>")
    # Every interpolated value above is escaped or a number we formatted ourselves.
    return Markup("".join(parts))


def _shared_provider(models: list[str]) -> str:
    """`scripted/` when every model shares that provider prefix: the chart title says it."""
    prefixes = {m.split("/", 1)[0] + "/" for m in models if "/" in m}
    if len(prefixes) == 1 and all("/" in m for m in models):
        return prefixes.pop()
    return ""


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def arm_classes(arms: list[str]) -> dict[str, str]:
    """A stable CSS class per patch arm: arm-0 for the unpatched runs, then arm-1, arm-2, …"""
    ordered = [UNPATCHED, *[a for a in arms if a != UNPATCHED]]
    return {arm: f"arm-{i % 6}" for i, arm in enumerate(ordered)}


def chart_panels(cells: pl.DataFrame, patched_arms: list[str]) -> list[ChartPanel]:
    """One chart per condition and scenario, in the order of the per-cell table."""
    classes = arm_classes(patched_arms)
    # Grouped in Python: the table has a few hundred rows, and a polars filter per panel and
    # model cost more than drawing them (N2).
    groups: dict[tuple, list[dict]] = {}
    for row in cells.to_dicts():
        groups.setdefault((row["condition"], row["scenario"]), []).append(row)
    panels = []
    for (condition, scenario), subset in groups.items():
        # A null never equals anything in a polars filter, so such a group drew no bars.
        rows = subset if condition is not None and scenario is not None else []
        title = f"{condition} · {scenario}"
        panels.append(ChartPanel(title=title, svg=rate_chart(rows, classes, title)))
    return panels

"""Inline SVG: pass^k against k, one line per patch arm, one small chart per before/after row.

A curve says at a glance what a column of numbers does not: how fast an agent's chance of
being safe k times in a row falls, and how far a patch lifts it. Like charts.py, every piece
of data that lands in the SVG goes through `_esc`.
"""

from __future__ import annotations

from html import escape

import polars as pl
from markupsafe import Markup

from runner.analysis.model import ROW_KEYS
from runner.analysis.stats import pass_hat_curve
from runner.html.charts import ChartPanel
from runner.html.formatting import clip

_WIDTH, _HEIGHT = 300, 150
_LEFT, _RIGHT, _TOP, _BOTTOM = 34, 10, 8, 26
_PLOT_W = _WIDTH - _LEFT - _RIGHT
_PLOT_H = _HEIGHT - _TOP - _BOTTOM
MAX_K = 16  # beyond this the curves of real sweeps sit on the floor; keeps the page light
MAX_PANELS = 30


def _esc(text: object) -> str:
    return escape(clip(str(text)), quote=True)


def _x(k: int, last: int) -> float:
    return _LEFT + (0.5 if last == 1 else (k - 1) / (last - 1)) * _PLOT_W


def _y(value: float) -> float:
    return _TOP + (1 - value) * _PLOT_H


def _frame(last: int) -> list[str]:
    parts = []
    for tick in (0.0, 0.5, 1.0):
        y = _y(tick)
        parts.append(
            f'<line class="grid" x1="{_LEFT}" y1="{y:.1f}" x2="{_WIDTH - _RIGHT}" y2="{y:.1f}"/>'
            f'<text class="tick" x="{_LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">'
            f"{int(tick * 100)}%</text>"
        )
    ticks = sorted({1, last, *range(1, last + 1, max(1, (last + 3) // 4))})
    for k in ticks:
        parts.append(
            f'<text class="tick" x="{_x(k, last):.1f}" y="{_HEIGHT - 12}" '
            f'text-anchor="middle">{k}</text>'
        )
    parts.append(
        f'<text class="tick" x="{_LEFT + _PLOT_W / 2:.1f}" y="{_HEIGHT - 1}" '
        'text-anchor="middle">k runs in a row</text>'
    )
    return parts


def curve_svg(arms: list[dict], arm_classes: dict[str, str], title: str) -> Markup:
    """One chart: pass^k for k = 1..min(n, MAX_K) of each arm (dicts with patch_arm, safe_k, n)."""
    last = max(1, min(MAX_K, max((a["n"] for a in arms), default=1)))
    parts = [
        f'<svg class="chart curves" viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img" '
        f'aria-label="{_esc("pass^k by k: " + title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{_esc('Safe k times in a row: ' + title)}</title>",
        *_frame(last),
    ]
    # The unpatched line first and wide, the patched ones on top: equal curves stay visible.
    for arm in sorted(arms, key=lambda a: a["patch_arm"] != "none"):
        curve = pass_hat_curve(arm["safe_k"], arm["n"])[:last]
        if not curve:
            continue
        name = "without patch" if arm["patch_arm"] == "none" else f"patch {arm['patch_arm']}"
        points = " ".join(f"{_x(k, last):.1f},{_y(v):.1f}" for k, v in enumerate(curve, 1))
        parts.append(
            f'<g class="curve{" base" if arm["patch_arm"] == "none" else ""} '
            f'{arm_classes.get(arm["patch_arm"], "arm-x")}" '
            f'data-arm="{_esc(arm["patch_arm"])}" data-safe="{arm["safe_k"]}" '
            f'data-n="{arm["n"]}"><title>{_esc(name)}: {arm["safe_k"]} of {arm["n"]} runs '
            "safe</title>"
        )
        parts.append(f'<polyline points="{points}"/>')
        for k, value in enumerate(curve, 1):
            parts.append(
                f'<circle cx="{_x(k, last):.1f}" cy="{_y(value):.1f}" r="2.4">'
                f"<title>{_esc(name)}: pass^{k} = {value:.0%}</title></circle>"
            )
        parts.append("</g>")
    parts.append("</svg>")
    # Every interpolated value above is escaped or a number we formatted ourselves.
    return Markup("".join(parts))


def curve_panels(
    cells: pl.DataFrame, arm_classes: dict[str, str], limit: int = MAX_PANELS
) -> tuple[list[ChartPanel], int]:
    """One chart per before/after row (model x condition x scenario) with runs; and how many
    rows were left out beyond `limit`."""
    # Grouped in Python: a polars filter per panel cost more than drawing it (N2).
    per_row: dict[tuple, list[dict]] = {}
    keys: dict[tuple, None] = {}  # the distinct (row keys, condition), in the table's order
    for row in cells.filter(pl.col("n") > 0).to_dicts():
        row_key = tuple(row[k] for k in ROW_KEYS)
        per_row.setdefault(row_key, []).append(row)
        keys.setdefault((*row_key, row["condition"]))
    panels = []
    for key in list(keys)[:limit]:
        row_key = key[: len(ROW_KEYS)]
        # A null key matches nothing, as in a polars filter.
        arms = [] if None in row_key else [
            {"patch_arm": r["patch_arm"], "safe_k": r["safe_k"], "n": r["n"]}
            for r in per_row[row_key]
        ]
        model, scenario, condition = key[0], key[len(ROW_KEYS) - 1], key[-1]
        title = f"{model} · {condition} · {scenario}"
        panels.append(ChartPanel(title=title, svg=curve_svg(arms, arm_classes, title)))
    return panels, max(0, len(keys) - limit)

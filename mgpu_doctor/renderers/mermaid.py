"""Charts as Mermaid ``xychart-beta`` blocks, which GitHub draws in issues and Markdown files.

Mermaid's xychart draws no legend (before Mermaid 12) and takes numbers without exponents and
strings without quotes, so the series' colours are fixed here and named in a Markdown line
under each chart, numbers are written positionally, and text is reduced to characters that
mean nothing to Mermaid or Markdown.
"""

from __future__ import annotations

import math
import unicodedata
from decimal import Decimal

from mgpu_doctor.model.smoke_runs import SmokeRun
from mgpu_doctor.renderers.charts import GROUPS, Chart, Series, all_charts, colour

_SAFE_PUNCTUATION = set(" _.,:()/+'-=")
MAX_TEXT = 100  # a title or a label inside a chart
MAX_NOTE = 400  # the line of Markdown under it


def mermaid_text(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` with every character Mermaid or Markdown could read as syntax replaced by '?'."""
    out = []
    for ch in " ".join(str(text).split()):
        if ch.isalnum() and unicodedata.category(ch)[0] in "LN" or ch in _SAFE_PUNCTUATION:
            out.append(ch)
        else:
            out.append("?")
    cleaned = "".join(out)
    return cleaned if len(cleaned) <= limit else cleaned[:limit - 3] + "..."


def number(value: float) -> str:
    """4 significant digits, never in exponent form (Mermaid's grammar has none)."""
    text = format(Decimal(repr(float(f"{value:.4g}"))), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text or "0"


def drawable(series: Series) -> list[float] | None:
    """The values Mermaid can draw: trailing gaps dropped (a run that stopped early draws the
    epochs it had); None when a gap remains inside, which a Mermaid line cannot show."""
    values = list(series.values)
    while values and values[-1] is None:
        values.pop()
    if not values or any(v is None or not math.isfinite(v) for v in values):
        return None
    return [float(v) for v in values if v is not None]


def chart_block(chart: Chart) -> list[str]:
    """The chart as a fenced ``mermaid`` block followed by its legend line."""
    drawn: list[tuple[int, Series, list[float]]] = []
    skipped: list[Series] = []
    for i, series in enumerate(chart.series):
        values = drawable(series)
        if values is None:
            skipped.append(series)
        else:
            drawn.append((i, series, values))
    palette = ", ".join(colour(i)[1] for i, _, _ in drawn) or colour(0)[1]
    lines = ["```mermaid", "---", "config:", "  themeVariables:", "    xyChart:",
             f'      plotColorPalette: "{palette}"', "---", "xychart-beta",
             f'  title "{mermaid_text(chart.title)}"',
             f'  x-axis "{mermaid_text(chart.x_label)}" ['
             + ", ".join(f'"{mermaid_text(c)}"' for c in chart.categories) + "]"]
    y_axis = f'  y-axis "{mermaid_text(chart.y_label)}"'
    every = [v for _, _, values in drawn for v in values]
    if chart.y_min is not None and every:
        top = max(every + [chart.y_min]) * 1.1
        y_axis += f" {number(chart.y_min)} --> {number(top if top > chart.y_min else chart.y_min + 1)}"
    lines.append(y_axis)
    # Bars first: a line drawn after them stays visible on top.
    for _, series, values in sorted(drawn, key=lambda d: d[1].kind != "bar"):
        kind = "bar" if series.kind == "bar" else "line"
        lines.append(f"  {kind} [{', '.join(number(v) for v in values)}]")
    lines.append("```")
    legend = "; ".join(f"{colour(i)[0]} {'bars' if s.kind == 'bar' else 'line'}: `{mermaid_text(s.name)}`"
                       for i, s, _ in drawn)
    if skipped:
        legend += ("; " if legend else "") + "not drawn (a value in the middle is missing): " + ", ".join(
            f"`{mermaid_text(s.name)}`" for s in skipped)
    lines += ["", f"_{legend}._" if legend else "_No values to draw._"]
    if chart.note:
        lines += ["", f"_{mermaid_text(chart.note, MAX_NOTE)}_"]
    return lines + [""]


def pictures_markdown(runs: list[SmokeRun], heading: str = "##") -> list[str]:
    """The smoke pictures as a Markdown section; nothing when there are no smoke runs."""
    charts = all_charts(runs)
    if not charts:
        return []
    out = [f"{heading} Smoke pictures", ""]
    for key, title in GROUPS:
        group = [c for c in charts if c.group == key]
        if group:
            out += [f"{heading}# {title}", ""]
            for chart in group:
                out += chart_block(chart)
    return out


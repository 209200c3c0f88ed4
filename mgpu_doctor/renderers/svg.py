"""Charts as inline SVG for the HTML report: no script, no font or file fetched, every text escaped."""

from __future__ import annotations

import math
import textwrap
from html import escape

from mgpu_doctor.renderers.charts import Chart, Series, colour

WIDTH = 760
PLOT_LEFT = 72
PLOT_RIGHT = 24
PLOT_HEIGHT = 250
CHAR_WIDTH = 6.6  # average width of a 12 px sans-serif character, for laying out the legend
LEGEND_ROW = 18
NOTE_ROW = 18


def _note_lines(note: str) -> list[str]:
    """The note under the title, wrapped to the chart's width."""
    return textwrap.wrap(note, width=int((WIDTH - 40) / CHAR_WIDTH)) if note else []


def render_svg(chart: Chart) -> str:
    """One chart as an ``<svg>`` element (a value missing in a line leaves a gap)."""
    note = _note_lines(chart.note)
    top = 44 + NOTE_ROW * len(note)
    plot_w = WIDTH - PLOT_LEFT - PLOT_RIGHT
    legend = _legend_rows(chart.series, plot_w)
    n = max(len(chart.categories), 1)
    band = plot_w / n
    # Category labels wider than their band would run into each other: stand them upright.
    upright = max((len(c) for c in chart.categories), default=0) * CHAR_WIDTH > band - 8
    drop = round(max(len(c) for c in chart.categories) * CHAR_WIDTH) if upright else 0
    height = top + PLOT_HEIGHT + 52 + drop + LEGEND_ROW * len(legend) + 8
    low, high, ticks = y_scale([v for s in chart.series for v in s.values if _finite(v)], chart.y_min)

    def y_of(value: float) -> float:
        return top + PLOT_HEIGHT - (value - low) / (high - low) * PLOT_HEIGHT

    def x_of(i: int) -> float:
        return PLOT_LEFT + band * (i + 0.5)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="{escape(chart.key)}" '
           f'width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" '
           f'font-family="sans-serif" font-size="12">',
           f"<title>{escape(chart.title)}</title>",
           f'<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>',
           f'<text x="{WIDTH / 2:.1f}" y="22" text-anchor="middle" font-size="15" font-weight="bold">'
           f"{escape(chart.title)}</text>"]
    for i, line in enumerate(note):
        out.append(f'<text x="{WIDTH / 2:.1f}" y="{42 + NOTE_ROW * i}" text-anchor="middle" '
                   f'font-style="italic" fill="#8a4b00">{escape(line)}</text>')
    for tick in ticks:
        y = y_of(tick)
        out.append(f'<line x1="{PLOT_LEFT}" y1="{y:.1f}" x2="{PLOT_LEFT + plot_w}" y2="{y:.1f}" '
                   f'stroke="#e3e3e3"/>')
        out.append(f'<text x="{PLOT_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
                   f"{escape(tick_label(tick))}</text>")
    bottom = top + PLOT_HEIGHT
    right = PLOT_LEFT + plot_w
    out.append(f'<line x1="{PLOT_LEFT}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#444"/>')
    out.append(f'<line x1="{PLOT_LEFT}" y1="{top}" x2="{PLOT_LEFT}" y2="{bottom}" stroke="#444"/>')
    for i, category in enumerate(chart.categories):
        if upright:  # read from below, ending under its bar or point
            out.append(f'<text transform="translate({x_of(i) + 4:.1f} {bottom + 8}) rotate(-90)" '
                       f'text-anchor="end">{escape(category)}</text>')
        else:
            out.append(f'<text x="{x_of(i):.1f}" y="{bottom + 16}" text-anchor="middle">'
                       f"{escape(category)}</text>")
    out.append(f'<text x="{PLOT_LEFT + plot_w / 2:.1f}" y="{bottom + 36 + drop}" text-anchor="middle" '
               f'fill="#333">{escape(chart.x_label)}</text>')
    out.append(f'<text transform="translate(16 {top + PLOT_HEIGHT / 2:.1f}) rotate(-90)" '
               f'text-anchor="middle" fill="#333">{escape(chart.y_label)}</text>')
    bars = [(i, s) for i, s in enumerate(chart.series) if s.kind == "bar"]
    zero = y_of(max(low, min(high, 0.0)))
    for k, (i, series) in enumerate(bars):
        width = band * 0.7 / len(bars)
        for j, value in enumerate(series.values):
            if not _finite(value):
                continue
            assert value is not None
            x = PLOT_LEFT + band * j + band * 0.15 + width * k
            y = y_of(value)
            out.append(f'<rect class="series-{i}" x="{x:.1f}" y="{min(y, zero):.1f}" width="{width:.1f}" '
                       f'height="{abs(zero - y):.1f}" fill="{colour(i)[1]}">'
                       f"<title>{escape(_point_title(series, chart, j))}</title></rect>")
    lines = [(i, s) for i, s in enumerate(chart.series) if s.kind != "bar"]
    for k, (i, series) in enumerate(lines):
        hex_colour = colour(i)[1]
        # Earlier lines are wider, so a line that another covers (1 and N devices agreeing) shows.
        width = min(2.0 + 1.5 * (len(lines) - 1 - k), 8.0)
        level = next((v for v in series.values if _finite(v)), None)
        if series.reference and level is not None:  # a level to compare with: across the whole plot
            y = y_of(level)
            out.append(f'<line class="series-{i}" x1="{PLOT_LEFT}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" '
                       f'stroke="{hex_colour}" stroke-width="2" stroke-dasharray="6 4">'
                       f"<title>{escape(series.name)}</title></line>")
            continue
        for segment in _segments(series.values):
            points = " ".join(f"{x_of(j):.1f},{y_of(v):.1f}" for j, v in segment)
            out.append(f'<polyline class="series-{i}" points="{points}" fill="none" stroke="{hex_colour}" '
                       f'stroke-width="{width:.1f}"/>')
        for j, value in enumerate(series.values):
            if _finite(value):
                assert value is not None
                out.append(f'<circle cx="{x_of(j):.1f}" cy="{y_of(value):.1f}" r="3" fill="{hex_colour}">'
                           f"<title>{escape(_point_title(series, chart, j))}</title></circle>")
        for j in series.nonfinite:  # no value to place: a mark at the top, one row per series
            out.append(f'<text class="series-{i} nonfinite" x="{x_of(j):.1f}" y="{top + 12 + 14 * k}" '
                       f'text-anchor="middle" font-weight="bold" fill="{hex_colour}">NaN'
                       f"<title>{escape(f'{series.name}, {chart.x_label} {chart.categories[j]}: NaN or Inf')}"
                       "</title></text>")
    y = bottom + 56 + drop
    for row in legend:
        x = float(PLOT_LEFT)
        for i, series in row:
            hex_colour = colour(i)[1]
            if series.kind == "bar":
                out.append(f'<rect x="{x:.1f}" y="{y - 9}" width="14" height="10" fill="{hex_colour}"/>')
            else:
                dash = ' stroke-dasharray="4 2"' if series.reference else ""
                out.append(f'<line x1="{x:.1f}" y1="{y - 4}" x2="{x + 14:.1f}" y2="{y - 4}" '
                           f'stroke="{hex_colour}" stroke-width="3"{dash}/>')
            out.append(f'<text x="{x + 20:.1f}" y="{y}">{escape(series.name)}</text>')
            x += _legend_width(series)
        y += LEGEND_ROW
    out.append("</svg>")
    return "\n".join(out)


def y_scale(values: list[float | None], y_min: float | None) -> tuple[float, float, list[float]]:
    """(low, high, ticks) of a y axis that holds ``values``: about five round-numbered steps."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    low = min(finite + ([y_min] if y_min is not None else []), default=0.0)
    high = max(finite, default=1.0)
    if y_min is not None:
        low = y_min
    if high <= low:
        spread = abs(high) * 0.1 or 1.0
        low, high = (low, low + spread) if y_min is not None else (low - spread, high + spread)
    step = _nice_step((high - low) / 5)
    low = math.floor(low / step) * step
    high = math.ceil(high / step) * step
    ticks = [low + k * step for k in range(int(round((high - low) / step)) + 1)]
    return low, high, ticks


def _nice_step(raw: float) -> float:
    exponent = math.floor(math.log10(raw))
    for mantissa in (1, 2, 2.5, 5, 10):
        step = mantissa * 10 ** exponent
        if step >= raw:
            return float(step)
    return float(10 ** (exponent + 1))


def tick_label(value: float) -> str:
    return f"{round(value, 10):.6g}"


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _segments(values: tuple[float | None, ...]) -> list[list[tuple[int, float]]]:
    """Runs of consecutive finite values; a single point is drawn by its circle alone."""
    segments: list[list[tuple[int, float]]] = [[]]
    for j, value in enumerate(values):
        if _finite(value):
            assert value is not None
            segments[-1].append((j, value))
        elif segments[-1]:
            segments.append([])
    return [s for s in segments if len(s) >= 2]


def _point_title(series: Series, chart: Chart, j: int) -> str:
    value = series.values[j]
    category = chart.categories[j] if j < len(chart.categories) else str(j)
    return f"{series.name}, {chart.x_label} {category}: {'-' if value is None else f'{value:.4g}'}"


def _legend_width(series: Series) -> float:
    return 20 + CHAR_WIDTH * len(series.name) + 18


def _legend_rows(series: tuple[Series, ...], width: float) -> list[list[tuple[int, Series]]]:
    rows: list[list[tuple[int, Series]]] = [[]]
    used = 0.0
    for i, s in enumerate(series):
        needed = _legend_width(s)
        if rows[-1] and used + needed > width:
            rows.append([])
            used = 0.0
        rows[-1].append((i, s))
        used += needed
    return [r for r in rows if r]

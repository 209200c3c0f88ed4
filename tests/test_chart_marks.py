"""Smoke pictures from recorded runs (no smoke here): a NaN run stays in the loss chart, marked
where its loss stopped being finite, and category labels too wide for their band never collide
(tests/test_browser_report.py measures that in Chromium)."""

from __future__ import annotations

import json
import re

from mgpu_doctor.model.smoke_runs import SmokeRun, runs_from_report
from mgpu_doctor.record import replace
from mgpu_doctor.renderers.charts import Chart, Series, loss_charts
from mgpu_doctor.renderers.svg import render_svg


def recorded_runs() -> list[SmokeRun]:
    from pathlib import Path

    path = Path(__file__).parent / "data" / "smoke-runs-readme.json"
    return runs_from_report(json.loads(path.read_text()), str(path))


def test_a_nan_run_stays_in_the_loss_chart_marked_where_it_stopped_being_finite():
    runs = recorded_runs()
    base = next(r for r in runs if r.devices == 2 and r.layer == "dense" and r.global_batch == 32
                and r.model_size == 1)
    nan = replace(base, scenario="uneven_final_batch", status="nan", nonfinite_epoch=3,
                  losses=[0.7, 0.5] + [None] * (len(base.losses) - 2))
    chart = {c.key: c for c in loss_charts([*runs, nan])}["loss-dense-b32"]
    [series] = [s for s in chart.series if s.name == "2 devices, uneven final batch (nan)"]
    assert series.nonfinite == tuple(range(2, len(base.losses)))
    assert "2 devices, uneven final batch (nan) at epoch 3, 4" in chart.note
    svg = render_svg(chart)
    assert svg.count(">NaN<title>") == len(series.nonfinite)
    assert not [s for c in loss_charts(runs) for s in c.series if s.nonfinite]


def test_category_labels_wider_than_their_band_stand_upright():
    chart = Chart("k", "t", "layer", tuple(f"layer{i}: pipeline 0.51x" for i in range(10)), "y",
                  (Series("s", tuple(float(i) for i in range(10)), "bar"),), y_min=0.0)
    assert svg_upright(render_svg(chart)) == 10
    narrow = replace(chart, categories=tuple(str(i) for i in range(10)))
    assert svg_upright(render_svg(narrow)) == 0


def svg_upright(svg: str) -> int:
    return len(re.findall(r'<text transform="translate\([\d. ]+\) rotate\(-90\)" text-anchor="end">', svg))

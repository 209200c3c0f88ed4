"""Smoke pictures: chart data, the Mermaid and SVG renderers and the HTML report, on the runs of
one real smoke training (dense, 2 virtual CPU devices, global batches 32 and 64, the standard
level: the even split on 1 and 2 devices at each batch)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest

from mgpu_doctor.cli import main
from mgpu_doctor.model.smoke_runs import SmokeRun, runs_from_report
from mgpu_doctor.record import replace
from mgpu_doctor.renderers.charts import (
    SIMULATED_NOTE,
    all_charts,
    colour,
    loss_charts,
    memory_charts,
    scaling_charts,
)
from mgpu_doctor.renderers.mermaid import chart_block, mermaid_text, number, pictures_markdown
from mgpu_doctor.renderers.svg import render_svg, y_scale

pytestmark = [pytest.mark.tensorflow, pytest.mark.slow]
NASTY = 'x"]<script>alert(1)</script>`%%{init: {}}%% & ;#\n| *bold* [link](http://e.x)'
SVG_NS = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def runs(smoke_report_file) -> list[SmokeRun]:
    found = runs_from_report(json.loads(smoke_report_file.read_text()), str(smoke_report_file))
    assert found and all(r.status == "ok" for r in found), found
    return found


def twins(runs: list[SmokeRun], scenario: str = "even") -> list[SmokeRun]:
    """The 2-device runs of a scenario, by global batch."""
    return sorted((r for r in runs if r.devices == 2 and r.scenario == scenario), key=lambda r: r.global_batch)


def by_key(charts):
    return {c.key: c for c in charts}


# --- chart data ---------------------------------------------------------------------------------

def test_the_scaling_map_holds_the_measured_speedup_and_efficiency_per_global_batch(runs):
    charts = by_key(scaling_charts(runs))
    assert set(charts) == {"scaling-speedup", "scaling-efficiency"}
    speedup, efficiency = charts["scaling-speedup"], charts["scaling-efficiency"]
    measured = twins(runs)
    assert speedup.categories == tuple(str(r.global_batch) for r in measured) == ("32", "64")
    assert speedup.series[0].name == "dense" and speedup.series[0].kind == "line"
    assert speedup.series[0].values == tuple(r.speedup for r in measured)
    assert efficiency.series[0].values == pytest.approx([r.scaling_efficiency * 100 for r in measured])
    assert speedup.series[-1].reference and set(speedup.series[-1].values) == {1.0}
    assert efficiency.series[-1].reference and set(efficiency.series[-1].values) == {100.0}
    # virtual CPU devices: labelled simulated in the picture itself, not only in the text around it
    assert "simulated" in speedup.title and speedup.note == SIMULATED_NOTE
    on_gpus = by_key(scaling_charts([replace(r, device_kind="gpu") for r in runs]))
    assert "simulated" not in on_gpus["scaling-speedup"].title and not on_gpus["scaling-speedup"].note


def test_one_global_batch_draws_a_bar_per_layer_and_device_count(runs):
    at_64 = [r for r in runs if r.global_batch == 64]
    four = [replace(r, devices=4, speedup=r.speedup * 1.5, scaling_efficiency=r.speedup * 1.5 / 4)
            for r in at_64 if r.devices == 2]
    chart = by_key(scaling_charts(at_64 + four))["scaling-speedup"]
    assert chart.categories == ("dense 2x", "dense 4x") and "2/4 vs 1 devices" in chart.title
    bars = chart.series[0]
    assert bars.kind == "bar" and bars.values == (twins(at_64)[0].speedup, four[0].speedup)
    assert "global batch 64" in bars.name


def test_a_failed_twin_leaves_a_gap_and_no_speedup_no_map(runs):
    failed = [replace(r, speedup=None, scaling_efficiency=None, status="crash")
              if r.devices == 2 and r.global_batch == 32 else r for r in runs]
    chart = by_key(scaling_charts(failed))["scaling-speedup"]
    assert chart.series[0].values == (None, twins(runs)[1].speedup)
    assert scaling_charts([r for r in runs if r.devices == 1]) == []
    one_batch = [r for r in failed if r.global_batch == 32]  # bars: the failed layer is named, not drawn
    assert one_batch and scaling_charts(one_batch) == []
    at_32 = one_batch + [replace(r, layer="conv2d", global_batch=32) for r in runs if r.global_batch == 64]
    chart = by_key(scaling_charts(at_32))["scaling-speedup"]
    assert chart.categories == ("conv2d",) and chart.note.endswith("No speedup for dense: the run or its "
                                                                   "1-device twin failed.")


def test_loss_charts_show_each_run_per_layer_and_global_batch(runs):
    charts = loss_charts(runs)
    assert [c.key for c in charts] == ["loss-dense-b32", "loss-dense-b64"]
    for chart in charts:
        batch = int(chart.key.rsplit("-b", 1)[1])
        group = [r for r in runs if r.global_batch == batch and r.losses]  # checkpoint runs record no loss
        assert chart.categories == tuple(str(i + 1) for i in range(max(len(r.losses) for r in group)))
        assert len(chart.series) == len(group)
        for run in group:
            name = ("1 device" if run.devices == 1 else f"{run.devices} devices") + ", " + \
                run.scenario.replace("_", " ")
            series = next(s for s in chart.series if s.name == name)
            assert series.values == tuple(run.losses)
        assert chart.series[0].name == "1 device, even"  # the even split first: the common case


def test_memory_charts_show_host_rss_and_gpu_memory_where_measured(runs):
    charts = by_key(memory_charts(runs))
    assert set(charts) == {"host-memory-dense-b32", "host-memory-dense-b64"}  # no GPU here
    run = twins(runs)[1]
    assert tuple(run.rss_mb) in [s.values for s in charts["host-memory-dense-b64"].series]
    with_gpu = [replace(r, gpu_memory_mb=[100.0 + i for i in range(len(r.rss_mb))]) for r in runs]
    keys = [c.key for c in memory_charts(with_gpu)]
    assert keys == ["host-memory-dense-b32", "gpu-memory-dense-b32", "host-memory-dense-b64",
                    "gpu-memory-dense-b64"]


def test_all_charts_in_report_order(runs):
    # the input-bound probe ran on the 2-device run at the first global batch
    assert [c.group for c in all_charts(runs)] == ["scaling"] * 2 + ["input"] + ["loss"] * 2 + ["memory"] * 2
    assert all_charts([]) == []


# --- Mermaid ------------------------------------------------------------------------------------

def test_numbers_never_use_exponents():
    assert [number(v) for v in (1e-7, 123456.7, 0.30674967, 1.0, 0.0, -2.5e-5, 1e21)] == [
        "0.0000001", "123500", "0.3067", "1", "0", "-0.000025", "1000000000000000000000"]


def test_mermaid_block_draws_the_chart_values_with_named_colours(runs):
    chart = by_key(scaling_charts(runs))["scaling-speedup"]
    lines = chart_block(chart)
    assert lines[0] == "```mermaid" and "xychart-beta" in lines
    body = lines[lines.index("xychart-beta"):lines.index("```", 1)]
    assert body[1] == f'  title "{chart.title}"'
    assert body[2] == '  x-axis "global batch" ["32", "64"]'
    assert body[3].startswith('  y-axis "speedup (x)" 0 --> ')
    assert body[4:] == [f"  line [{', '.join(number(v) for v in s.values)}]" for s in chart.series]
    palette = next(line for line in lines if "plotColorPalette" in line)
    assert palette == f'      plotColorPalette: "{colour(0)[1]}, {colour(1)[1]}"'
    legend = next(line for line in lines if line.startswith("_blue"))
    assert legend == "_blue line: `dense`; orange line: `1x: no faster than 1 device`._"


def test_mermaid_draws_a_run_that_stopped_early_and_names_what_it_cannot_draw(runs):
    run = twins(runs)[0]
    stopped = replace(run, losses=[run.losses[0], None], status="nan")
    single = next(r for r in runs if r.devices == 1 and r.global_batch == run.global_batch)
    gap = replace(single, losses=[0.5, None, 0.25, 0.125], status="nan")
    chart = next(c for c in loss_charts([stopped, gap]) if c.key == "loss-dense-b32")
    text = "\n".join(chart_block(chart))
    assert f"  line [{number(run.losses[0])}]" in text  # the epochs it had
    assert "not drawn (a value in the middle is missing): `1 device, even (nan)`" in text
    assert text.count("  line [") == 1


def test_mermaid_text_cannot_break_out_of_a_string_a_block_or_markdown(runs):
    weird = [replace(r, layer=NASTY) for r in runs]
    markdown = "\n".join(pictures_markdown(weird))
    for block in re.findall(r"```mermaid\n(.*?)```", markdown, re.S):
        for line in block.splitlines():
            if line.startswith(("  title", "  x-axis", "  y-axis")):
                for quoted in re.findall(r'"([^"]*)"', line):
                    assert not set(quoted) & set('<>`%{};#&[]|*\n'), line
    assert "<script>" not in markdown and "%%{" not in markdown and "](http" not in markdown
    assert mermaid_text(NASTY) == "x???script?alert(1)?/script?????init: ????? ? ?? ? ?bold? ?link?(http://e.x)"
    assert len(mermaid_text("a" * 500)) == 100


# --- SVG ----------------------------------------------------------------------------------------

def test_svg_is_well_formed_and_draws_every_series(runs):
    for chart in all_charts(runs):
        root = ET.fromstring(render_svg(chart))
        assert root.tag == f"{SVG_NS}svg" and root.get("data-chart") == chart.key
        assert root.find(f"{SVG_NS}title").text == chart.title
        lines = [s for s in chart.series if s.kind == "line" and not s.reference]
        for i, series in enumerate(chart.series):
            drawn = root.findall(f".//*[@class='series-{i}']")
            assert drawn, (chart.key, series.name)
            assert all(colour(i)[1] in (e.get("stroke"), e.get("fill")) for e in drawn)
        points = root.findall(f".//{SVG_NS}circle")
        assert len(points) == sum(1 for s in lines for v in s.values if v is not None)
        texts = [t.text for t in root.iter(f"{SVG_NS}text")]
        assert all(s.name in texts for s in chart.series) and chart.x_label in texts


def test_svg_bars_and_gaps(runs):
    at_64 = [r for r in runs if r.global_batch == 64]
    chart = by_key(scaling_charts(at_64))["scaling-speedup"]
    root = ET.fromstring(render_svg(chart))
    bars = root.findall(f".//{SVG_NS}rect[@class='series-0']")
    assert len(bars) == 1 and float(bars[0].get("height")) > 0
    gap = replace(twins(runs)[0], losses=[0.5, None, 0.25, 0.125])
    root = ET.fromstring(render_svg(loss_charts([gap])[0]))
    (segment,) = root.findall(f".//{SVG_NS}polyline")  # epochs 3-4; epoch 1 is a lone point
    assert len(segment.get("points").split()) == 2 and len(root.findall(f".//{SVG_NS}circle")) == 3


def test_svg_escapes_every_text(runs):
    weird = [replace(r, layer=NASTY) for r in runs]
    for chart in all_charts(weird):
        svg = render_svg(chart)
        assert "<script" not in svg
        root = ET.fromstring(svg)  # well-formed whatever the names hold
        assert NASTY in root.find(f"{SVG_NS}title").text or chart.group in ("scaling", "input")


def test_y_scale_has_round_ticks_that_hold_the_values():
    low, high, ticks = y_scale([0.31, 0.92], None)
    assert low <= 0.31 and high >= 0.92 and ticks[0] == low and ticks[-1] == pytest.approx(high)
    assert 3 <= len(ticks) <= 11
    assert y_scale([5.0, 5.0], None)[0] < 5.0 < y_scale([5.0, 5.0], None)[1]
    assert y_scale([], 0.0)[0] == 0.0


# --- the reports --------------------------------------------------------------------------------

class Page(HTMLParser):
    """Tags and text of an HTML page, as a browser's parser splits them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def test_html_report_holds_every_check_finding_run_and_chart(runs, smoke_report_file, tmp_path, capsys):
    weird_file = tmp_path / "weird.json"
    data = json.loads(smoke_report_file.read_text())
    data["smoke_runs"][1]["layer"] = NASTY  # a replayed file can say anything
    data["smoke_runs"][1]["error_message"] = NASTY
    weird_file.write_text(json.dumps(data))
    assert main(["check", "--from", str(weird_file), "--format", "json"]) in (0, 1)
    report = json.loads(capsys.readouterr().out)
    assert main(["check", "--from", str(weird_file), "--format", "html", "-v"]) in (0, 1)
    html = capsys.readouterr().out
    page = Page()
    page.feed(html)
    text = "".join(page.text)
    assert not [t for t, _ in page.tags if t in ("script", "link", "iframe", "img", "object")]
    assert not [a for _, a in page.tags if "src" in a or "onload" in a or "onerror" in a]
    assert "<script>alert" not in html and NASTY.split("\n")[0] in text
    for check in report["checks"]:
        assert check["name"] in text and check["title"] in text
        for finding in check["findings"]:
            assert finding["title"] in text and finding["code"] in text
    replayed = runs_from_report(data, "x")
    svgs = [a for t, a in page.tags if t == "svg"]
    assert [a["data-chart"] for a in svgs] == [c.key for c in all_charts(replayed)]
    rows = re.search(r"<h2>Smoke trainings</h2>.*?<tbody>(.*?)</tbody>", html, re.S).group(1)
    assert rows.count("<tr>") == len(replayed)


def test_markdown_and_support_report_draw_the_pictures(runs, smoke_report_file, tmp_path, capsys):
    charts = all_charts(runs)
    assert main(["check", "--from", str(smoke_report_file), "--format", "markdown"]) in (0, 1)
    markdown = capsys.readouterr().out
    assert markdown.count("```mermaid") == len(charts)
    assert "## Smoke pictures" in markdown and "### Scaling map: N vs 1 devices" in markdown
    report_md = tmp_path / "report.md"
    assert main(["report", "--from", str(smoke_report_file), "-o", str(report_md)]) == 0
    text = report_md.read_text()
    assert text.count("```mermaid") == len(charts)
    assert text.index("## Smoke trainings") < text.index("### Smoke pictures") < text.index("## Known issues")
    # the pictures do not get in the way of replaying the report
    capsys.readouterr()
    assert main(["check", "--from", str(report_md), "--format", "json"]) in (0, 1)
    assert len(json.loads(capsys.readouterr().out)["smoke_runs"]) == len(runs)
    report_html = tmp_path / "report.html"
    assert main(["report", "--from", str(smoke_report_file), "--format", "html", "-o", str(report_html)]) == 0
    html = report_html.read_text()
    assert html.startswith("<!doctype html>") and html.count("<svg") == len(charts)
    assert "<title>mgpu-doctor report: " in html


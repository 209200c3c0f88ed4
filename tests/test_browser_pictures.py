"""The pictures in a real headless browser: the HTML report in Chromium (DOM and screenshot), and
every Mermaid block the reports and the README hold rendered by the real Mermaid library.

Skipped (with the reason) where Chromium or npm is missing; under CI they must run: Chromium is
installed from Debian's packages and Mermaid from npm (see tests/browser.py).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from PIL import Image

from mgpu_doctor.cli import main
from mgpu_doctor.model.smoke_runs import runs_from_report
from mgpu_doctor.renderers.charts import all_charts, colour
from tests.browser import MERMAID_VERSIONS, BrowserUnavailable, chromium, headless, mermaid_js, mermaid_page

pytestmark = [pytest.mark.tensorflow, pytest.mark.slow]
README = Path(__file__).resolve().parents[1] / "docs" / "smoke.md"  # the page with the pictures
BROKEN = "xychart-beta\n  line [1, 2, oops]\n"  # the control: a syntax error must come back as one


def need(get):
    try:
        return get()
    except BrowserUnavailable as exc:
        if os.environ.get("CI"):  # CI installs them: it must run these
            raise
        pytest.skip(str(exc))


@pytest.fixture(scope="session")  # session: set up (or skipped) before the session's smoke run
def browser():
    return need(chromium)


@pytest.fixture(scope="module")
def html_report(smoke_report_file, tmp_path_factory):
    path = tmp_path_factory.mktemp("html") / "report.html"
    assert main(["report", "--from", str(smoke_report_file), "--format", "html", "-o", str(path)]) == 0
    return path


def mermaid_blocks(text: str) -> list[str]:
    return re.findall(r"```mermaid\n(.*?)```", text, re.S)


def test_html_report_renders_its_charts_in_chromium(browser, html_report, smoke_report_file, tmp_path):
    charts = all_charts(runs_from_report(json.loads(smoke_report_file.read_text()), "x"))
    dom = headless(browser, html_report.as_uri(), "--dump-dom")
    # the browser's DOM, not the file: the SVGs were parsed as SVG, titles and all
    assert re.findall(r'<svg[^>]*data-chart="([^"]+)"', dom) == [c.key for c in charts]
    assert dom.count("<polyline") >= sum(1 for c in charts for s in c.series
                                         if s.kind == "line" and not s.reference)
    shot = tmp_path / "report.png"
    headless(browser, html_report.as_uri(), f"--screenshot={shot}", "--window-size=1200,2000",
             "--hide-scrollbars")
    image = Image.open(shot).convert("RGB")
    assert image.size == (1200, 2000)
    counts = image.getcolors(maxcolors=1 << 24)  # [(pixels, (r, g, b))]
    total = image.size[0] * image.size[1]
    not_white = sum(n for n, rgb in counts if sum(rgb) < 720)
    assert not_white > total * 0.02, not_white  # text, tables and charts, not a blank page
    # the series' colours are painted: the charts were drawn, not only present in the DOM
    for i in (0, 1):
        want = tuple(int(colour(i)[1][k:k + 2], 16) for k in (1, 3, 5))
        near = sum(n for n, rgb in counts if max(abs(a - b) for a, b in zip(rgb, want, strict=True)) < 24)
        assert near > 200, (colour(i), near)


@pytest.mark.parametrize("version", MERMAID_VERSIONS)
def test_every_mermaid_block_renders_with_mermaid(browser, version, smoke_report_file, tmp_path, capsys):
    bundle = need(lambda: mermaid_js(version))
    report_md = tmp_path / "report.md"
    assert main(["report", "--from", str(smoke_report_file), "-o", str(report_md)]) == 0
    assert main(["check", "--from", str(smoke_report_file), "--format", "markdown"]) in (0, 1)
    blocks = (mermaid_blocks(report_md.read_text()) + mermaid_blocks(capsys.readouterr().out)
              + mermaid_blocks(README.read_text()))
    assert len(blocks) >= 2 * len(all_charts(runs_from_report(json.loads(smoke_report_file.read_text()),
                                                                "x"))) + 1
    page = tmp_path / "mermaid.html"
    page.write_text(mermaid_page(bundle, blocks + [BROKEN]))
    dom = headless(browser, page.as_uri(), "--dump-dom", "--virtual-time-budget=120000")
    assert '<div id="done">' in dom, dom[-2000:]  # every block came back
    results = dict(re.findall(r'<div id="block-(\d+)" data-status="(\w+)"', dom))
    assert results.pop(str(len(blocks))) == "error"  # the control: a syntax error is caught
    errors = re.findall(r'data-status="error">(.*?)</div>', dom, re.S)[:-1]
    assert results == {str(i): "ok" for i in range(len(blocks))}, errors
    for i, block in enumerate(blocks):
        svg = re.search(rf'<div id="block-{i}" data-status="ok">(.*?)</div>', dom, re.S).group(1)
        title = re.search(r'title "([^"]*)"', block).group(1)
        assert f">{title}<" in svg, title  # Mermaid drew the title...
        palette = re.search(r'plotColorPalette: "([^"]*)"', block).group(1).split(", ")
        drawn = len(re.findall(r"^  (?:line|bar) \[", block, re.M))
        for hex_colour in palette[:drawn]:  # ...and each series in the colour its legend names
            assert hex_colour in svg, (title, hex_colour)

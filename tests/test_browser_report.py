"""The HTML report as Chromium lays it out, from recorded runs (no smoke training here): its title
and summary agree, fix texts show commands as code, a NaN run is marked in its loss chart, and no
two labels of any chart overlap on the page.

Skipped where Chromium is missing, except under CI (tests/browser.py installs it there).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from mgpu_doctor.cli import main
from tests.browser import BrowserUnavailable, chromium, headless

DATA = Path(__file__).parent / "data"
LAYERS = ("conv2d", "lstm", "gru", "batchnorm", "embedding", "attention")
# Run in the page after layout: every pair of texts in one chart whose boxes intersect (by more
# than a pixel each way), written into the DOM for --dump-dom.
OVERLAPS = """<script>
const out = [];
for (const svg of document.querySelectorAll("svg.chart")) {
  const boxes = [...svg.querySelectorAll("text")].map(t => [t.textContent, t.getBoundingClientRect()]);
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const [a, r] = boxes[i], [b, s] = boxes[j];
    if (r.left < s.right - 1 && s.left < r.right - 1 && r.top < s.bottom - 1 && s.top < r.bottom - 1)
      out.push([svg.dataset.chart, a, b]);
  }
}
const pre = document.createElement("pre");
pre.id = "overlaps";
pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>"""


@pytest.fixture(scope="module")
def browser() -> str:
    try:
        return chromium()
    except BrowserUnavailable as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    """The HTML report of a recorded standard smoke, with the input probe on every layer (long
    category labels) and a run whose loss became NaN, replayed with `report --from`."""
    report = json.loads((DATA / "smoke-input-bound.json").read_text())
    probed = next(r for r in report["smoke_runs"] if r.get("input_samples_per_s"))
    report["smoke_runs"] += [{**probed, "layer": layer} for layer in LAYERS]
    nan = {**probed, "scenario": "uneven_final_batch", "status": "nan", "nonfinite_epoch": 2,
           "losses": [probed["losses"][0]] + [None] * (len(probed["losses"]) - 1)}
    report["smoke_runs"].append(nan)
    folder = tmp_path_factory.mktemp("html")
    (folder / "report.json").write_text(json.dumps(report))
    html = folder / "report.html"
    assert main(["report", "--from", str(folder / "report.json"), "--format", "html", "-o", str(html)]) == 0
    return html


def dom_of(browser: str, page: Path) -> str:
    probed = page.with_name("probed.html")
    probed.write_text(page.read_text().replace("</body>", OVERLAPS + "</body>"))
    return headless(browser, probed.as_uri(), "--dump-dom", "--window-size=1200,2000")


def test_the_report_agrees_with_itself_in_chromium(browser, page):
    dom = dom_of(browser, page)
    title = re.search(r"<title>mgpu-doctor report: (.*?)</title>", dom).group(1)
    summary = re.search(r'<p class="summary">(.*?)</p>', dom).group(1)
    counts = {status: int(n) for n, status in re.findall(r"(\d+) (\w+)", summary.split(";")[0])}
    bad = {s: counts[s] for s in ("warning", "failed", "crashed") if counts.get(s)}
    assert bad, summary  # the recorded run has its input-bound warning
    worst = re.search(r"worst: (\w+)", summary).group(1)
    assert title == (f"{sum(bad.values())} check(s) with problems "
                     f"({', '.join(f'{n} {s}' for s, n in bad.items())}), worst: {worst}")
    fixes = re.findall(r'<p class="fix">(.*?)</p>', dom, re.S)
    assert any("<code>" in f for f in fixes) and not any("`" in f for f in fixes)
    loss = re.search(r'<svg[^>]*data-chart="loss-dense-b64".*?</svg>', dom, re.S).group(0)
    assert loss.count('class="series-') and loss.count(">NaN<title>") == len(nan_epochs(page))
    overlaps = json.loads(re.search(r'<pre id="overlaps">(.*?)</pre>', dom, re.S).group(1))
    assert overlaps == [], overlaps
    assert re.search(r'data-chart="input-waiting"', dom)


def nan_epochs(page: Path) -> list[int]:
    report = json.loads(page.with_name("report.json").read_text())
    nan = next(r for r in report["smoke_runs"] if r["status"] == "nan")
    return list(range(nan["nonfinite_epoch"], len(nan["losses"]) + 1))

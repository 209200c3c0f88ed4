"""The README's example pictures are what the doctor draws from a recorded real smoke run.

tests/data/smoke-runs-readme.json holds the runs of a real `smoke` on 2 virtual CPU devices.
Regenerate both (after a change of the charts: only the README):

    mgpu-doctor smoke --level long --layers dense,conv2d --batch-sizes 32,128 --model-sizes 1,8 --format json | python -c \
      'import json,sys; json.dump({"smoke_runs": json.load(sys.stdin)["smoke_runs"]}, sys.stdout, indent=1)' \
      > tests/data/smoke-runs-readme.json
    MGPU_DOCTOR_UPDATE_GOLDEN=1 python -m pytest tests/test_readme_pictures.py

tests/test_browser_pictures.py renders the README's Mermaid blocks with Mermaid itself.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from mgpu_doctor.model.smoke_runs import runs_from_report
from mgpu_doctor.renderers.charts import all_charts
from mgpu_doctor.renderers.mermaid import chart_block

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "tests" / "data" / "smoke-runs-readme.json"
SMOKE_PAGE = ROOT / "docs" / "smoke.md"  # the documentation page that shows the pictures
START, END = "<!-- example pictures: start -->", "<!-- example pictures: end -->"
SHOWN = ("scaling-speedup-x1", "scaling-speedup-x8", "input-waiting", "loss-conv2d-b32")


def example() -> str:
    runs = runs_from_report(json.loads(RECORDED.read_text()), str(RECORDED))
    charts = {c.key: c for c in all_charts(runs)}
    return "\n".join(line for key in SHOWN for line in chart_block(charts[key]))


def test_readme_shows_the_pictures_of_the_recorded_run():
    readme = SMOKE_PAGE.read_text()
    before, rest = readme.split(START + "\n", 1)
    shown, after = rest.split(END, 1)
    if os.environ.get("MGPU_DOCTOR_UPDATE_GOLDEN"):
        SMOKE_PAGE.write_text(before + START + "\n" + example() + END + after)
        shown = example()
    assert shown == example()


def test_pictures_exact_output():
    """The whole Markdown section and one SVG, exactly (regenerate as the goldens of test_renderers)."""
    from mgpu_doctor.renderers.mermaid import pictures_markdown
    from mgpu_doctor.renderers.svg import render_svg
    from tests.test_renderers import assert_golden

    runs = runs_from_report(json.loads(RECORDED.read_text()), str(RECORDED))
    assert_golden("smoke-pictures.md", "\n".join(pictures_markdown(runs)))
    charts = {c.key: c for c in all_charts(runs)}
    assert_golden("smoke-scaling-speedup.svg", render_svg(charts["scaling-speedup-x8"]) + "\n")

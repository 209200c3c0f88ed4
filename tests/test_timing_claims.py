"""Every "about N s" in README.md and docs/ is a benchmark's figure, rounded as written, or says why
it is not one.

The benchmarks write their last figures into ``benchmarks/results/NAME.json`` (see
``benchmarks/figures.py``); a claim names the file and figure it rounds. After a benchmark run,
update the claims to what it wrote (this test says which and to what).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# "about 0.4 s", "about 10 ms", "about 2 minutes": a time said without its date and machine.
TIMING = re.compile(r"\babout (\d+(?:\.\d+)?) ?(ms|s|seconds|minutes)\b")
UNIT_S = {"ms": 0.001, "s": 1.0, "seconds": 1.0, "minutes": 60.0}


@dataclass(frozen=True)
class Claim:
    """A timing claim: the words just before it on ``page``, and the figure (``file:key``, in s)."""
    page: str
    before: str
    figure: str


@dataclass(frozen=True)
class NotAFigure:
    """A timing the benchmarks do not measure, and why that is right."""
    page: str
    before: str
    why: str


QUICK = "quick_check:quick_s"
CLAIMS = (
    Claim("README.md", "`--quick` takes ", QUICK),
    Claim("docs/commands.md", "import TensorFlow (", QUICK),
    Claim("docs/getting-started.md", "no child imports TensorFlow, ", QUICK),
    Claim("docs/smoke.md", "TensorFlow not imported | 0 / 0 | ", QUICK),
)
NOT_FIGURES = (
    NotAFigure("docs/commands.md", "loads\nnothing: ", "a file read, far below the quick check's own time"),
    NotAFigure("docs/multi-worker.md", "TensorFlow imports (", "why the default is one model; not a promise"),
    NotAFigure("docs/performance.md", "a second Python, ", "the page's dated profile (its date and machine above)"),
    NotAFigure("docs/performance.md", "with `exec`: ", "the page's dated profile (its date and machine above)"),
    NotAFigure("docs/performance.md", "a second Python: ", "the page's dated profile (its date and machine above)"),
    NotAFigure("docs/performance.md", "(", "the page's dated profile (its date and machine above)"),
    NotAFigure("docs/performance.md", "environment costs ", "the page's dated profile (its date and machine above)"),
    NotAFigure("docs/performance.md", "with `exec`), ", "the page's dated profile (its date and machine above)"),
    NotAFigure("docs/performance.md", "`packaging` and ", "the page's dated profile (its date and machine above)"),
    NotAFigure("docs/smoke.md", "(measured alone, median of 3; see below) | ", "an estimate for a GPU machine"),
    NotAFigure("docs/smoke.md", "197 / 197 | ", "an estimate (the table says so)"),
    NotAFigure("docs/smoke.md", "(estimate alone; see below) | ", "an estimate for a GPU machine"),
    NotAFigure("docs/smoke.md", "training included, ", "a part of the checkpoint round trip, measured once"),
    NotAFigure("docs/smoke.md", "trainings and by\n", "a part of the checkpoint round trip, measured once"),
    NotAFigure("docs/smoke.md", "the `resume` ", "a part of the checkpoint round trip, measured once"),
)


def figure(name: str) -> float:
    file, key = name.split(":")
    path = RESULTS / f"{file}.json"
    if not path.is_file():
        missing = f"{path.relative_to(ROOT)} is missing: run `python benchmarks/{file}_bench.py` on a quiet machine"
        if os.environ.get("CI"):  # the figures are committed: CI must check the claims against them
            raise AssertionError(missing)
        pytest.skip(missing)
    return float(json.loads(path.read_text(encoding="utf-8"))["figures"][key])


def timings(page: Path) -> list[tuple[str, float, str]]:
    """(the 60 characters before, the figure in seconds rounded as the page writes it, as written)
    of every timing on ``page``: a figure matches when it rounds to what the page says."""
    text = page.read_text(encoding="utf-8")
    return [(text[max(0, m.start() - 60):m.start()], UNIT_S[m.group(2)], m.group(0)) for m in TIMING.finditer(text)]


def as_written(said: str, seconds: float, unit_s: float) -> str:
    """``seconds`` rounded as ``said`` ("about 0.4 s") writes its number."""
    number = TIMING.fullmatch(said).group(1)  # type: ignore[union-attr]
    decimals = len(number.partition(".")[2])
    return f"{seconds / unit_s:.{decimals}f}"


def test_every_timing_is_a_claim_or_says_why_not():
    loose = []
    for page in PAGES:
        name = str(page.relative_to(ROOT))
        known = [c.before for c in (*CLAIMS, *NOT_FIGURES) if c.page == name]
        loose += [f"{name}: ...{before[-30:]!r} {said}" for before, _, said in timings(page)
                  if not any(before.endswith(b) for b in known)]
    assert not loose, f"timings neither a benchmark figure (CLAIMS) nor explained (NOT_FIGURES): {loose}"


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: f"{c.page}:{c.figure}")
def test_a_timing_claim_is_its_benchmark_figure_rounded(claim: Claim):
    measured = figure(claim.figure)
    found = [(unit_s, said) for before, unit_s, said in timings(ROOT / claim.page) if before.endswith(claim.before)]
    assert found, f"{claim.page} no longer says a time after {claim.before!r}"
    for unit_s, said in found:
        number = TIMING.fullmatch(said).group(1)  # type: ignore[union-attr]
        assert number == as_written(said, measured, unit_s), (
            f"{claim.page}: {said!r} but benchmarks/results says {measured:.3f} s: write "
            f"{as_written(said, measured, unit_s)}")


def test_a_claim_is_its_figure_rounded_as_the_page_writes_it():
    assert as_written("about 0.4 s", 0.43, 1.0) == "0.4"
    assert as_written("about 0.4 s", 0.54, 1.0) == "0.5"  # the 0.43-0.54 s: "0.4" holds for one
    assert as_written("about 10 ms", 0.0123, 0.001) == "12"
    assert as_written("about 2 minutes", 131.0, 60.0) == "2"

"""The HTML report of commands without smoke runs: `libs`, `fleet`, `matrix query` (see also
tests/test_charts.py for the smoke pictures and tests/test_browser_pictures.py for a browser)."""

from __future__ import annotations

from html.parser import HTMLParser

from mgpu_doctor.cli import main
from tests.scenarios import path_of


class Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.parts.append(data)


def page(html: str) -> Text:
    parsed = Text()
    parsed.feed(html)
    assert html.startswith("<!doctype html>") and html.rstrip().endswith("</html>")
    assert "script" not in parsed.tags and "svg" not in parsed.tags  # no smoke runs: no pictures
    return parsed


def test_libs_html_shows_the_library_table(capsys):
    assert main(["libs", "--quick", "--format", "html"]) in (0, 1)
    text = "".join(page(capsys.readouterr().out).parts)
    assert "CUDA libraries on this machine" in text and "TensorFlow built for:" in text


def test_fleet_html_shows_the_differences(capsys):
    assert main(["fleet", str(path_of("healthy-8gpu-nvlink")), str(path_of("mixed-models")),
                 "--format", "html"]) in (0, 1)
    parsed = page(capsys.readouterr().out)
    text = "".join(parsed.parts)
    assert "Differences between nodes" in text and "table" in parsed.tags
    assert "Fact" in text and "Nodes" in text


def test_matrix_query_html(capsys):
    assert main(["matrix", "query", "tensorflow==2.8", "gpus=4", "--format", "html"]) in (0, 1)
    text = "".join(page(capsys.readouterr().out).parts)
    assert "matrix query" in text and "Checks" in text


# -- the report's title, summary and texts agree with its data --------------------------------

def test_the_title_counts_what_the_summary_counts(tmp_path):
    """The title names the checks with problems by status, in the summary's own words and numbers."""
    import re

    from tests.scenarios import SCENARIOS

    for name in sorted(SCENARIOS):
        path = tmp_path / f"{name}.html"
        assert main(["report", "--from", str(path_of(name)), "--format", "html", "-o", str(path)]) == 0
        html = path.read_text()
        title = re.search(r"<title>mgpu-doctor report: (.*?)</title>", html).group(1)
        summary = re.search(r'<p class="summary">(.*?)</p>', html).group(1)
        counts = dict((status, int(n)) for n, status in re.findall(r"(\d+) (\w+)", summary.split(";")[0]))
        worst = re.search(r"worst: (\w+)", summary)
        if worst is None:
            assert title == "no problems found", name
            continue
        bad = {s: counts[s] for s in ("warning", "failed", "crashed") if counts.get(s)}
        parts = ", ".join(f"{n} {s}" for s, n in bad.items())
        assert title == f"{sum(bad.values())} check(s) with problems ({parts}), worst: {worst.group(1)}", name


def test_backticked_words_are_code_and_stay_escaped():
    from mgpu_doctor.renderers.html_report import with_code

    assert with_code("run `pip install 'x<2'` then `a`; a lone ` stays") == (
        "run <code>pip install &#x27;x&lt;2&#x27;</code> then <code>a</code>; a lone ` stays")


def test_a_fix_shows_its_commands_as_code(tmp_path):
    path = tmp_path / "r.html"
    main(["report", "--from", str(path_of("sick-box")), "--format", "html", "-o", str(path)])
    fixes = [line for line in path.read_text().splitlines() if line.startswith('<p class="fix">')]
    assert fixes and any("<code>" in f for f in fixes)
    assert not [f for f in fixes if "`" in f]

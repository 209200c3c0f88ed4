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

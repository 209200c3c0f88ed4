"""The README a newcomer reads in five minutes, and the documentation site: it builds with
`mkdocs build --strict` (no broken link or anchor), every README link resolves, and neither says
how the project was developed (issue numbers, commit ids, the machines it was measured on)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
MAX_README_LINES = 300
# Words that tell the project's own history rather than the product.
HISTORY = re.compile(r"\bissue \d+|\(issue|issue's|\bcommit [0-9a-f]{7}|\([0-9a-f]{7,12}\)|other sessions|"
                     r"development machine|shared 2-core", re.I)


def test_the_readme_is_short():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= MAX_README_LINES


def test_the_readme_starts_with_the_two_commands_and_ci_runs_the_second():
    text = README.read_text(encoding="utf-8")
    commands = re.findall(r"```bash\n(.*?)\n```", text, re.S)[:2]
    assert "mgpu-doctor check" in commands[0]
    assert commands[1] in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_no_development_history_in_user_documents(page: Path):
    found = [m.group(0) for m in HISTORY.finditer(page.read_text(encoding="utf-8"))]
    assert not found, found


def test_every_readme_link_resolves():
    text = README.read_text(encoding="utf-8")
    headings = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
                for h in re.findall(r"^#+ (.*)$", text, re.M)}
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        if path and not (ROOT / path).exists() or not path and anchor not in headings:
            broken.append(target)
    assert not broken, broken


def test_every_documentation_page_is_in_the_navigation():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    missing = [str(p.relative_to(DOCS)) for p in PAGES if f" {p.relative_to(DOCS).as_posix()}\n" not in nav]
    assert not missing, missing


def test_the_documentation_site_builds_strictly(tmp_path: Path):
    try:
        import material  # noqa: F401  (the theme)
        import mkdocs  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("mkdocs / mkdocs-material not installed (pip install '.[docs]')")
    site = tmp_path / "site"
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)],
                            cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
                            timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    assert (site / "index.html").is_file() and (site / "reference" / "codes" / "index.html").is_file()
    shutil.rmtree(site)

"""A real headless browser for the picture tests: Chromium from Debian, Mermaid from npm.

Chromium is the Debian package (`apt-get install -y --no-install-recommends chromium`, about
400 MB installed, 20-30 s). Under CI (``CI`` set), as root with apt-get, a missing Chromium is
installed once; elsewhere the tests skip and say how to install it. The Mermaid library is the
npm package, pinned, ``npm install``-ed once (about 10-15 s) and its browser bundle kept in
``MGPU_DOCTOR_TEST_CACHE`` (default ``.cache/`` in the repository) ``/mermaid/<version>/``; pages
load it from that file: nothing is fetched while a page renders.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Mermaid 11 (what GitHub and most renderers ran in 2025-2026) and 12 (the current major).
MERMAID_VERSIONS = ("11.12.2", "12.3.0")
INSTALL_TIMEOUT_S = 600
BROWSER_TIMEOUT_S = 120


class BrowserUnavailable(Exception):
    """Chromium, npm or the Mermaid package cannot be had here; the message says why."""


def chromium() -> str:
    """The Chromium executable, installed from Debian's packages first under CI."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("CI") and os.geteuid() == 0 and shutil.which("apt-get"):
        for command in (["apt-get", "update"],
                        ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]):
            done = subprocess.run(command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
                                  env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
            if done.returncode != 0:
                raise BrowserUnavailable(f"{' '.join(command)} failed: {done.stderr.strip()[-500:]}")
        found = shutil.which("chromium")
        if found:
            return found
    raise BrowserUnavailable("chromium is not installed (apt-get install -y --no-install-recommends chromium)")


def cache_dir() -> Path:
    return Path(os.environ.get("MGPU_DOCTOR_TEST_CACHE", REPO / ".cache")) / "mermaid"


def mermaid_js(version: str) -> Path:
    """The browser bundle of Mermaid ``version`` (one self-contained file), npm-installed on first
    use; only the bundle is kept (3-6 MB, not the 130-200 MB of node_modules)."""
    bundle = cache_dir() / version / "mermaid.min.js"
    if bundle.exists():
        return bundle
    npm = shutil.which("npm")
    if npm is None:
        raise BrowserUnavailable("npm is not installed (apt-get install -y npm)")
    bundle.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mermaid-", dir=bundle.parent) as tmp:
        done = subprocess.run([npm, "install", "--prefix", tmp, "--no-audit", "--no-fund", "--ignore-scripts",
                               "--no-save", f"mermaid@{version}"],
                              capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, stdin=subprocess.DEVNULL)
        built = Path(tmp) / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"
        if done.returncode != 0 or not built.exists():
            raise BrowserUnavailable(f"npm install mermaid@{version} failed: {done.stderr.strip()[-500:]}")
        installed = json.loads((built.parents[1] / "package.json").read_text())["version"]
        assert installed == version, installed
        partial = bundle.with_suffix(".partial")
        shutil.copyfile(built, partial)
        partial.replace(bundle)  # complete or absent, also when the copy is interrupted
    return bundle


def headless(browser: str, url: str, *extra: str, timeout_s: float = BROWSER_TIMEOUT_S) -> str:
    """Run headless Chromium on ``url`` with ``extra`` flags; its stdout (``--dump-dom``: the DOM)."""
    with tempfile.TemporaryDirectory(prefix="mgpu-chromium-") as profile:
        done = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-quic", "--disable-sync", "--no-first-run",
             "--disable-dev-shm-usage",
             f"--user-data-dir={profile}", *extra, url],
            capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise AssertionError(f"chromium exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


def mermaid_page(bundle: Path, blocks: list[str]) -> str:
    """A page that parses and renders each block with Mermaid, each result in ``#block-N``
    (``data-status`` ok with the SVG inside, or error with Mermaid's message), then ``#done``."""
    data = json.dumps(blocks).replace("</", "<\\/")
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><script src="{bundle.as_uri()}"></script></head>
<body><div id="out"></div>
<script>
const blocks = {data};
(async () => {{
  mermaid.initialize({{startOnLoad: false, securityLevel: "strict"}});
  const out = document.getElementById("out");
  for (let i = 0; i < blocks.length; i++) {{
    const div = document.createElement("div");
    div.id = "block-" + i;
    try {{
      await mermaid.parse(blocks[i]);
      const result = await mermaid.render("chart" + i, blocks[i]);
      div.dataset.status = "ok";
      div.innerHTML = result.svg;
    }} catch (e) {{
      div.dataset.status = "error";
      div.textContent = String((e && e.message) || e);
    }}
    out.appendChild(div);
  }}
  const done = document.createElement("div");
  done.id = "done";
  document.body.appendChild(done);
}})();
</script></body></html>
"""

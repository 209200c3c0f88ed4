"""The NVML bindings the doctor is tested against, each in a cached environment.

``installed`` is the binding of the test environment itself (the newest nvidia-ml-py, as the
`test` extra installs it). The others are installed once, with ``pip install --target``, into a
directory under the cache (``MGPU_DOCTOR_TEST_CACHE``, default ``.cache/`` in the repository)
that a ``sitecustomize`` puts first on ``sys.path``: the binding there wins, everything else
(mgpu_doctor, packaging, tabulate) comes from the test environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Binding:
    name: str
    requirements: tuple[str, ...]  # empty: the test environment's own binding


# nvidia-ml-py 11.450.51 is the floor in pyproject.toml; 11.515.75 added the _v2/_v3 entry points
# with fallbacks; 12.535.161 is a 12.x; the `pynvml` wrapper distributions install on top
# (11.5.3 ships its own copy of the binding, 13.0.1 redirects to nvidia-ml-py with a warning).
BINDINGS = (
    Binding("installed", ()),
    Binding("nvidia-ml-py-11.450.51", ("nvidia-ml-py==11.450.51",)),
    Binding("nvidia-ml-py-11.515.75", ("nvidia-ml-py==11.515.75",)),
    Binding("nvidia-ml-py-12.535.161", ("nvidia-ml-py==12.535.161",)),
    Binding("pynvml-11.5.3", ("nvidia-ml-py==11.450.51", "pynvml==11.5.3")),
    Binding("pynvml-13.0.1", ("nvidia-ml-py==13.615.71", "pynvml==13.0.1")),
)


class BindingUnavailable(Exception):
    """The binding could not be installed (no package index reachable)."""


def cache_dir() -> Path:
    return Path(os.environ.get("MGPU_DOCTOR_TEST_CACHE", REPO / ".cache")) / "bindings"


def site_dir(binding: Binding) -> Path | None:
    """A site directory holding ``binding`` first (None for the installed one)."""
    if not binding.requirements:
        return None
    target = cache_dir() / f"py{sys.version_info[0]}{sys.version_info[1]}" / binding.name
    done = target / ".complete"
    if done.exists():
        return target
    target.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check",
           "--upgrade", "--target", str(target), *binding.requirements]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise BindingUnavailable(f"pip install {' '.join(binding.requirements)} failed: "
                                 f"{result.stderr.strip()[-500:]}")
    done.write_text("")
    return target


def python_env(binding: Binding, env: dict[str, str]) -> dict[str, str]:
    """``env`` with the binding's site directory processed before the test environment's."""
    target = site_dir(binding)
    if target is None:
        return env
    out = dict(env)
    # sitecustomize runs site.addsitedir, which (unlike PYTHONPATH) also runs the .pth files that
    # the pynvml 13 wrapper relies on.
    custom = target.parent / f"{binding.name}-sitecustomize"
    custom.mkdir(exist_ok=True)
    (custom / "sitecustomize.py").write_text(
        f"import site, sys\nsys.path.insert(0, {str(target)!r})\nsite.addsitedir({str(target)!r})\n")
    out["PYTHONPATH"] = os.pathsep.join(p for p in (str(custom), env.get("PYTHONPATH", "")) if p)
    return out

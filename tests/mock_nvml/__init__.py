"""Build the C mock of libnvidia-ml.so.1 and point a process at it.

The mock is compiled once per test session against the real ``nvml.h`` (from the
``nvidia-nvml-dev-cu12`` wheel) and linked once per set of entry points a profile marks as
absent (an old driver), with a linker version script that hides those symbols.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).parent
SOURCE = HERE / "mock_nvml.c"
PROFILES = HERE / "profiles"


class MockUnavailable(Exception):
    """The mock cannot be built here (no C compiler, no nvml.h); tests skip with this reason."""


def profile_path(name: str) -> Path:
    return PROFILES / f"{name}.json"


def profile_names() -> list[str]:
    return sorted(p.stem for p in PROFILES.glob("*.json"))


def load_profile(name: str) -> dict:
    return json.loads(profile_path(name).read_text())


def nvml_include_dir() -> Path:
    try:
        dist = metadata.distribution("nvidia-nvml-dev-cu12")
    except metadata.PackageNotFoundError as exc:
        raise MockUnavailable("nvidia-nvml-dev-cu12 (nvml.h) is not installed") from exc
    include = Path(str(dist.locate_file("nvidia/nvml_dev/include")))
    if not (include / "nvml.h").is_file():
        raise MockUnavailable(f"nvml.h not found under {include}")
    return include


def compiler() -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise MockUnavailable("no C compiler (cc/gcc) on PATH")
    return cc


class MockBuilder:
    """Compiles the mock once into ``work`` and links one library per set of absent entry points."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self._object: Path | None = None

    def _compile(self) -> Path:
        if self._object is None:
            obj = self.work / "mock_nvml.o"
            self.work.mkdir(parents=True, exist_ok=True)
            _run([compiler(), "-O1", "-Wall", "-Werror", "-fPIC", "-fvisibility=hidden",
                  f"-I{nvml_include_dir()}", "-c", str(SOURCE), "-o", str(obj)])
            self._object = obj
        return self._object

    def library_dir(self, absent: list[str]) -> Path:
        """A directory holding libnvidia-ml.so.1 without the ``absent`` entry points."""
        key = hashlib.sha256("\n".join(sorted(absent)).encode()).hexdigest()[:12]
        out = self.work / f"lib-{key}"
        lib = out / "libnvidia-ml.so.1"
        if lib.exists():
            return out
        obj = self._compile()
        out.mkdir(parents=True, exist_ok=True)
        # An exact name in `local:` wins over the `global: *` pattern (GNU ld version scripts).
        script = out / "exports.map"
        hidden = "".join(f" {name};" for name in sorted(absent))
        script.write_text("{ global: *; local:" + hidden + " };\n" if absent else "{ global: *; };\n")
        _run([compiler(), "-shared", "-o", str(lib), str(obj), f"-Wl,--version-script={script}"])
        return out

    def env(self, profile: str, base: dict[str, str] | None = None) -> dict[str, str]:
        """Environment for a process that should see the machine ``profile`` through NVML."""
        env = dict(os.environ if base is None else base)
        lib_dir = self.library_dir(load_profile(profile).get("absent_functions", []))
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            p for p in (str(lib_dir), env.get("LD_LIBRARY_PATH", "")) if p)
        env["MOCK_NVML_PROFILE"] = str(profile_path(profile))
        return env


def _run(cmd: list[str]) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr}")

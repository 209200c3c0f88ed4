"""Real CUDA library wheels (cuDNN, NCCL, cuBLAS, the CUDA runtime), installed once into a cache.

The wheels are large (cuDNN 0.6-0.7 GB, cuBLAS 0.36 GB, NCCL 0.32 GB), so they are not in the
`test` extra: each site below is ``pip install --no-deps --target``-ed once into
``MGPU_DOCTOR_TEST_CACHE`` (default ``.cache/`` in the repository) ``/cuda-wheels/``, laid out as
pip lays out a real environment (``nvidia/<package>/lib``, ``nvidia_*.dist-info``). Loading
them and calling their version functions needs no GPU.

The versions are the ones `tensorflow[and-cuda]` pins, read from matrices/compat/and-cuda.toml:
the lowest that TensorFlow 2.21.0 accepts (cuDNN 9) and the exact pins of TensorFlow 2.16.1
(cuDNN 8, whose version number is encoded differently).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement

from mgpu_doctor.matrix.compat_tables import bundled_and_cuda_table
from tests.pip_install import pip_install

REPO = Path(__file__).resolve().parents[1]
INSTALL_TIMEOUT_S = 1200


@dataclass(frozen=True)
class WheelSite:
    """One site directory: what `pip install tensorflow[and-cuda]==<tensorflow>` puts there for ``wheels``."""

    name: str
    tensorflow: str
    wheels: tuple[str, ...]

    @property
    def requirements(self) -> tuple[str, ...]:
        return tuple(f"{wheel}=={pinned(self.tensorflow, wheel)}" for wheel in self.wheels)


SITES = (
    WheelSite("tensorflow-2.21.0", "2.21.0",
              ("nvidia-cudnn-cu12", "nvidia-nccl-cu12", "nvidia-cublas-cu12", "nvidia-cuda-runtime-cu12")),
    # cuDNN 8.9.7's libcudnn_ops_infer (which cudnnGetVersion needs) links no cuBLAS: it loads alone.
    WheelSite("tensorflow-2.16.1", "2.16.1", ("nvidia-cudnn-cu12",)),
)


class WheelsUnavailable(Exception):
    """The wheels could not be installed (no package index reachable)."""


def pinned(tensorflow: str, wheel: str) -> str:
    """The version of ``wheel`` that ``tensorflow[and-cuda]`` pins (``==``) or, for a range, its lowest."""
    pins = next(r for r in bundled_and_cuda_table().releases if r.tensorflow == tensorflow)
    for line in pins.requires:
        requirement = Requirement(line)
        if requirement.name == wheel:
            for spec in requirement.specifier:
                if spec.operator in ("==", ">="):
                    return spec.version
    raise LookupError(f"tensorflow[and-cuda]=={tensorflow} pins no {wheel}")


def cache_dir() -> Path:
    return Path(os.environ.get("MGPU_DOCTOR_TEST_CACHE", REPO / ".cache")) / "cuda-wheels"


def site_dir(site: WheelSite) -> Path:
    """The installed site directory of ``site``, installing it first when it is not cached."""
    digest = hashlib.sha256("\n".join(site.requirements).encode()).hexdigest()[:10]
    target = cache_dir() / f"{site.name}-{digest}"
    if (target / ".complete").exists():
        return target
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check",
           "--target", str(partial), *site.requirements]
    seconds = pip_install(cmd, site.requirements, partial, WheelsUnavailable, INSTALL_TIMEOUT_S)
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    (target / ".complete").write_text(json.dumps({"requirements": site.requirements,
                                                   "install_seconds": seconds}) + "\n")
    return target


def dist_version(site: Path, wheel: str) -> str:
    """The ``Version:`` line of ``wheel``'s METADATA in ``site`` (read here, not by the probe)."""
    stem = wheel.replace("-", "_")
    [dist] = [d for d in site.glob("*.dist-info") if d.name.lower().startswith(stem + "-")]
    for line in (dist / "METADATA").read_text().splitlines():
        if line.startswith("Version:"):
            return line.split(":", 1)[1].strip()
    raise LookupError(f"{dist}/METADATA has no Version line")

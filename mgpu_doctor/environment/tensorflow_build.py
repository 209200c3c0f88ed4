"""Whose TensorFlow build this is (the pip wheel, a source build, NVIDIA's) and what it was built
for: CUDA and cuDNN from its build info or the tested-build table, and the GPU architectures it
carries code for (only the pip wheels are in the tables)."""

from __future__ import annotations

import enum

from mgpu_doctor.environment.readings import Origin, Reading, ResolvedVersion, reading, resolved
from mgpu_doctor.matrix.compat_tables import TfBuild, bundled_arch_table, bundled_tensorflow_table
from mgpu_doctor.model.distributions import NVIDIA_TF_DISTRIBUTION
from mgpu_doctor.model.snapshot import Snapshot, TensorFlowFacts
from mgpu_doctor.model.unavailable import Unavailable, absent, skipped
from mgpu_doctor.model.versions import minor_text


class BuildKind(str, enum.Enum):
    """Whose build of TensorFlow this is: only the pip wheels are in the tested build tables."""

    PIP = "the pip wheel"
    SOURCE = "a source build"
    NVIDIA = "NVIDIA's build"


# Where NVIDIA's own TensorFlow shows itself: the `nvidia-tensorflow` wheel (TensorFlow 1.15 built
# for CUDA 11 and newer, https://github.com/NVIDIA/tensorflow), its version's local label
# (1.15.5+nv22.12; NGC containers' 2.x builds too), and the NGC containers' environment.
NVIDIA_DISTRIBUTION = NVIDIA_TF_DISTRIBUTION
NVIDIA_LOCAL_PREFIX = "nv"

NGC_ENV = "NVIDIA_TENSORFLOW_VERSION"
BUILD_TERMS = {"pip": BuildKind.PIP, "source": BuildKind.SOURCE, "nvidia": BuildKind.NVIDIA,
               "ngc": BuildKind.NVIDIA}


def tested_build(tensorflow: ResolvedVersion, build: BuildKind, build_why: str
                 ) -> tuple[TfBuild | None, str]:
    """The tested build row a pip wheel of this TensorFlow was built like (None and why when there
    is none, or when this is not the pip wheel)."""
    if not tensorflow.known:
        return None, ""
    if build is not BuildKind.PIP:
        how = f" ({build_why})" if build_why else ""
        return None, (f"TensorFlow {tensorflow.text} is {build.value}{how}: the pip wheels' tested builds "
                      "do not say what it was built for")
    return bundled_tensorflow_table().build_config(tensorflow.text)


def nvidia_local_label(tensorflow: ResolvedVersion) -> bool:
    """1.15.5+nv22.12: NVIDIA's build (its release 22.12), not the pip wheel."""
    version = tensorflow.version
    return version is not None and (version.local or "").startswith(NVIDIA_LOCAL_PREFIX)


def build_kind(snapshot: Snapshot, tensorflow: ResolvedVersion) -> tuple[BuildKind, str]:
    """NVIDIA's build when its wheel is installed, the version carries its local label, or the NGC
    container's variable is set; else the pip wheel (a source build does not say so)."""
    packages = snapshot.packages
    if not isinstance(packages, Unavailable) and NVIDIA_DISTRIBUTION in packages.versions:
        return BuildKind.NVIDIA, f"{NVIDIA_DISTRIBUTION} {packages.versions[NVIDIA_DISTRIBUTION]} installed"
    if nvidia_local_label(tensorflow):
        return BuildKind.NVIDIA, f"the local label of {tensorflow.text}"
    if snapshot.env.get(NGC_ENV):
        return BuildKind.NVIDIA, f"an NGC container ({NGC_ENV}={snapshot.env[NGC_ENV]})"
    return BuildKind.PIP, ""


def built_for(tf: TensorFlowFacts | None, tensorflow: ResolvedVersion, row: TfBuild | None,
              cpu_only: bool, pasted: tuple[list[Reading], list[Reading]] = ([], []),
              why: str = "") -> tuple[ResolvedVersion, ResolvedVersion]:
    """What TensorFlow was built for: its build info when it was imported (``tf``), refined or
    replaced by the tested-build table's ``row``."""
    if cpu_only:
        cpu = skipped(f"TensorFlow {tensorflow.text} is a CPU-only build", "cpu-only-build")
        return ResolvedVersion("built_cuda", missing=cpu), ResolvedVersion("built_cudnn", missing=cpu)
    table_where = f"tested build table ({row.package})" if row is not None else ""
    cuda_readings: list[Reading] = []
    cudnn_readings: list[Reading] = []
    if tf is not None:
        info_cuda = tf.build_info.get("cuda_version", "")
        info_cudnn = tf.build_info.get("cudnn_version", "")
        if info_cuda:
            cuda_readings.append(reading(minor_text(info_cuda), Origin.BUILD_INFO,
                                         f"cuda_version {info_cuda}"))
        if info_cudnn and row is not None and _refines(info_cudnn, row.cudnn):
            cudnn_readings.append(reading(row.cudnn, Origin.BUILD_INFO,
                                          f"major {info_cudnn}, minor from the {table_where}"))
        elif info_cudnn:
            cudnn_readings.append(reading(info_cudnn, Origin.BUILD_INFO, f"cudnn_version {info_cudnn}"))
    # A pasted build info or log line ("source was compiled with: 8.1.0") beats the table.
    cuda_readings += pasted[0]
    cudnn_readings += pasted[1]
    if row is not None:
        cuda_readings.append(reading(row.cuda, Origin.TESTED_BUILD, row.package))
        cudnn_readings.append(reading(row.cudnn, Origin.TESTED_BUILD, row.package))
    if not tensorflow.known:
        reason: Unavailable = tensorflow.missing or absent("TensorFlow not known")
    elif tf is None:
        reason = skipped(why or f"TensorFlow {tensorflow.text} is not in the tested build table and was "
                         "not imported", "not-in-table")
    else:
        reason = absent(f"{why + '; it' if why else f'TensorFlow {tensorflow.text}'} reports no CUDA version "
                        "in its build info")
    return resolved("built_cuda", cuda_readings, reason), resolved("built_cudnn", cudnn_readings, reason)


def _refines(build_info_value: str, table_value: str) -> bool:
    """Build info says "9", the table "9.3": the table adds the minor of the same major."""
    return "." not in build_info_value and table_value.split(".")[0] == build_info_value


def compiled_archs(build_info: dict[str, str] | None, tensorflow: ResolvedVersion, table: bool = True
                   ) -> tuple[str, str]:
    if build_info and build_info.get("cuda_compute_capabilities"):
        return build_info["cuda_compute_capabilities"], "TensorFlow's build info"
    if tensorflow.version is None or not table:
        return "", ""
    row = bundled_arch_table().archs_for(tensorflow.text)
    return (row.archs, row.source) if row is not None else ("", "")

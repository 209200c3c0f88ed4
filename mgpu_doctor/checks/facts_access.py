"""Helpers for checks: take a fact or skip the check, saying which fact was missing."""

from __future__ import annotations

from typing import TypeVar

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.environment.resolve import ResolvedEnvironment
from mgpu_doctor.model.snapshot import LibraryFacts, NvmlFacts, PackageFacts, Snapshot, TensorFlowFacts
from mgpu_doctor.model.unavailable import Unavailable

T = TypeVar("T")


SKIP_DETAIL_CHARS = 70


def need(value: T | Unavailable, what: str) -> T:
    if isinstance(value, Unavailable):
        raise CheckSkipped(skip_reason(what, value), fact_failed=value.reason == "failed")
    return value


def need_any(values: list[object], what: str) -> None:
    """Skip unless at least one of ``values`` (one per GPU, say) is known: a check that judges
    nothing must not pass."""
    unknown = [v for v in values if isinstance(v, Unavailable)]
    if values and len(unknown) == len(values):
        need(unknown[0], what)


def skip_reason(what: str, value: Unavailable) -> str:
    """A short reason: the first clause of the detail (the full detail is in the snapshot)."""
    detail = _first_line(value.detail)
    if len(detail) > SKIP_DETAIL_CHARS:
        detail = detail[:SKIP_DETAIL_CHARS].rsplit(" ", 1)[0] + "..."
    return f"{what} {value.reason}: {detail}" if detail else f"{what} {value.reason}"


def need_machine(env: ResolvedEnvironment) -> Snapshot:
    """The machine's snapshot: checks of GPUs and files have nothing to judge in a `matrix query`."""
    if env.snapshot is None:
        raise CheckSkipped("needs a machine's facts, not a list of versions")
    return env.snapshot


def need_nvml(snapshot: Snapshot) -> NvmlFacts:
    return need(snapshot.nvml, "NVML")


def need_gpus(snapshot: Snapshot) -> NvmlFacts:
    nvml = need_nvml(snapshot)
    if not nvml.gpus:
        raise CheckSkipped("no GPU found by NVML")
    return nvml


def need_tensorflow(snapshot: Snapshot) -> TensorFlowFacts:
    return need(snapshot.tensorflow, "TensorFlow")


def need_env(snapshot: Snapshot, name: str) -> None:
    """Skip where the environment is not known: a pasted text rarely shows it."""
    if snapshot.pasted is not None and name not in snapshot.env:
        raise CheckSkipped(f"{name}: not in the pasted text")


def need_packages(snapshot: Snapshot) -> PackageFacts:
    return need(snapshot.packages, "installed packages")


def gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def need_libraries(snapshot: Snapshot) -> LibraryFacts:
    return need(snapshot.libraries, "CUDA library facts")


def need_some_gpu(snapshot: Snapshot) -> None:
    """Skip on a machine without NVIDIA GPUs: no CUDA library is used there, missing is fine.

    An NVML that *failed* does not skip: the GPUs may well be there.
    """
    nvml = snapshot.nvml
    if isinstance(nvml, Unavailable) and nvml.reason == "absent":
        raise CheckSkipped("no NVIDIA driver: TensorFlow runs on the CPU and loads no CUDA library")
    if not isinstance(nvml, Unavailable) and not nvml.gpus:
        raise CheckSkipped("no GPU found by NVML: TensorFlow loads no CUDA library")

"""Helpers for checks: take a fact or skip the check, saying which fact was missing."""

from __future__ import annotations

from typing import TypeVar

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.facts import Unavailable
from mgpu_doctor.snapshot import NvmlFacts, PackageFacts, Snapshot, TensorFlowFacts

T = TypeVar("T")


def need(value: T | Unavailable, what: str) -> T:
    if isinstance(value, Unavailable):
        raise CheckSkipped(f"{what} unknown ({value.reason}: {_first_line(value.detail)})")
    return value


def need_nvml(snapshot: Snapshot) -> NvmlFacts:
    return need(snapshot.nvml, "NVML facts")


def need_gpus(snapshot: Snapshot) -> NvmlFacts:
    nvml = need_nvml(snapshot)
    if not nvml.gpus:
        raise CheckSkipped("no GPU found by NVML")
    return nvml


def need_tensorflow(snapshot: Snapshot) -> TensorFlowFacts:
    return need(snapshot.tensorflow, "TensorFlow's view")


def need_packages(snapshot: Snapshot) -> PackageFacts:
    return need(snapshot.packages, "installed packages")


def gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""

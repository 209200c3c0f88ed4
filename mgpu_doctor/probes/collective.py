"""Gather the host, container and NCCL set-up facts (:class:`CollectiveFacts`).

Files only, plus ``lspci`` when there are NVIDIA GPUs on the PCI bus (with a timeout): fast
enough for ``check --quick``. ``root`` and ``runner`` are parameters so tests can hand in the
``/proc`` and ``/sys`` of another machine and that machine's ``lspci`` output.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from mgpu_doctor.model.collective_facts import CollectiveFacts, IommuFacts, PcieFacts
from mgpu_doctor.model.unavailable import Unavailable, failed, skipped
from mgpu_doctor.probes.commands import Runner, run_command
from mgpu_doctor.probes.hostsetup import Statvfs, gather_container, gather_cpus, gather_network, gather_shm
from mgpu_doctor.probes.pcie import find_gpus, gather_iommu, gather_pcie

T = TypeVar("T")


def gather_collective(root: Path = Path("/"), runner: Runner = run_command,
                      environ: Mapping[str, str] | None = None,
                      statvfs: Statvfs = os.statvfs) -> CollectiveFacts:
    start = time.monotonic()
    env = os.environ if environ is None else environ
    pcie, iommu, notes = _pcie_and_iommu(root, runner)
    return CollectiveFacts(
        pcie=pcie,
        iommu=iommu,
        shm=_guard(lambda: gather_shm(root, statvfs), "/dev/shm"),
        cpus=_guard(lambda: gather_cpus(root), "CPUs"),
        network=_guard(lambda: gather_network(root, env), "network devices"),
        container=_guard(lambda: gather_container(root, env), "container"),
        probe_seconds=round(time.monotonic() - start, 3),
        notes=notes,
    )


def _pcie_and_iommu(root: Path, runner: Runner) -> tuple[PcieFacts | Unavailable, IommuFacts | Unavailable,
                                                         list[str]]:
    gpus = _guard(lambda: find_gpus(root), "PCI devices")
    if isinstance(gpus, Unavailable):
        return gpus, gpus, []
    iommu = _guard(lambda: gather_iommu(root, gpus), "IOMMU")
    if not gpus:
        return skipped("no NVIDIA GPU on the PCI bus (/sys/bus/pci/devices)", "no-gpu"), iommu, []
    found = _guard(lambda: gather_pcie(root, runner, gpus), "PCIe bridges")
    if isinstance(found, Unavailable):
        return found, iommu, []
    return found[0], iommu, found[1]


def _guard(read: Callable[[], T], what: str) -> T | Unavailable:
    """A probe that raises becomes a failed fact, never a traceback."""
    try:
        return read()
    except (OSError, ValueError, UnicodeError) as exc:
        name = type(exc).__name__
        return failed(f"reading {what} failed: {name}: {exc}", f"exception:{name}")

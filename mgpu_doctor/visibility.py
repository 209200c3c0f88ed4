"""Which GPUs CUDA (and so TensorFlow) will see, and in which order.

CUDA_VISIBLE_DEVICES semantics from the CUDA C Programming Guide ("CUDA Environment
Variables"): a comma-separated list of indices or UUIDs (``GPU-`` prefixes allowed); devices
listed after the first invalid entry are not visible; an empty value hides every device.
CUDA's default order (CUDA_DEVICE_ORDER=FASTEST_FIRST) may differ from NVML's PCI bus order
when the GPUs differ; PCI_BUS_ID makes both agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from mgpu_doctor.snapshot import GpuFacts


@dataclass(frozen=True)
class Visibility:
    """NVML indices visible to CUDA, in CUDA ordinal order, and what was wrong with the list."""

    visible: list[int]
    invalid_entry: str  # the first entry that matched no GPU ("" if none)
    ignored_after_invalid: list[str]
    duplicate_entries: list[str]
    order_known: bool  # False when CUDA's FASTEST_FIRST order may differ from NVML's


def cuda_enumeration_order(gpus: list[GpuFacts], device_order: str | None) -> tuple[list[int], bool]:
    """NVML indices in CUDA's enumeration order, and whether that order is certain."""
    by_bus = sorted(gpus, key=lambda g: g.pci_bus_id.lower())
    indices = [g.index for g in by_bus]
    if (device_order or "").strip().upper() == "PCI_BUS_ID":
        return indices, True
    uniform = len({g.name for g in gpus}) <= 1
    return indices, uniform


def visible_gpus(
    gpus: list[GpuFacts], cuda_visible_devices: str | None, device_order: str | None
) -> Visibility:
    order, known = cuda_enumeration_order(gpus, device_order)
    if cuda_visible_devices is None:
        return Visibility(order, "", [], [], known)
    entries = [e.strip() for e in cuda_visible_devices.split(",")]
    if cuda_visible_devices.strip() == "":
        return Visibility([], "", [], [], known)
    visible: list[int] = []
    duplicates: list[str] = []
    for pos, entry in enumerate(entries):
        index = _resolve(entry, gpus, order)
        if index is None:
            return Visibility(visible, entry, entries[pos + 1:], duplicates, known)
        if index in visible:
            duplicates.append(entry)
            continue
        visible.append(index)
    # UUID entries do not depend on the enumeration order; plain indices do.
    by_index_only = any(e.isdigit() for e in entries)
    return Visibility(visible, "", [], duplicates, known or not by_index_only)


def _resolve(entry: str, gpus: list[GpuFacts], order: list[int]) -> int | None:
    if entry.isdigit():
        ordinal = int(entry)
        return order[ordinal] if ordinal < len(order) else None
    prefix = entry[4:] if entry.upper().startswith("GPU-") else entry
    if not prefix or entry.upper().startswith("MIG-"):
        return None
    matches = [g.index for g in gpus if g.uuid.upper().removeprefix("GPU-").startswith(prefix.upper())]
    return matches[0] if len(matches) == 1 else None


def hides_all_on_purpose(cuda_visible_devices: str | None) -> bool:
    """Values people use to hide every GPU deliberately."""
    return (cuda_visible_devices or "").strip() in {"-1", "NoDevFiles", "none"}

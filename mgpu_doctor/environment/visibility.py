"""Which GPUs CUDA (and so TensorFlow) will see, and in which order.

CUDA_VISIBLE_DEVICES semantics from the CUDA C Programming Guide ("CUDA Environment
Variables"): a comma-separated list of indices or UUIDs (``GPU-`` prefixes allowed); devices
listed after the first invalid entry are not visible; an empty value hides every device.
CUDA's default order (CUDA_DEVICE_ORDER=FASTEST_FIRST) may differ from NVML's PCI bus order
when the GPUs differ; PCI_BUS_ID makes both agree.

MIG devices are named ``MIG-<uuid>`` (R470 and later) or ``MIG-GPU-<gpu uuid>/<gi>/<ci>``
(before). CUDA enumerates one MIG device per process (NVIDIA MIG User Guide, "CUDA Device
Enumeration"): the first MIG entry counts, as its parent GPU; later MIG entries are ignored.
"""

from __future__ import annotations

import bisect

from mgpu_doctor.model.snapshot import GpuFacts
from mgpu_doctor.record import field, record


@record
class Visibility:
    """NVML indices visible to CUDA, in CUDA ordinal order, and what was wrong with the list."""

    visible: list[int]
    invalid_entry: str  # the first entry that matched no GPU ("" if none)
    ignored_after_invalid: list[str]
    duplicate_entries: list[str]
    order_known: bool  # False when CUDA's FASTEST_FIRST order may differ from NVML's
    mig_device: str = ""  # the MIG device CUDA uses ("" if none is named)
    ignored_mig_entries: list[str] = field(default_factory=list)  # CUDA uses one MIG device only


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
    mig_device = ""
    ignored_mig: list[str] = []
    uuids = sorted((g.uuid.upper().removeprefix("GPU-"), g.index) for g in gpus)  # looked up by prefix
    for pos, entry in enumerate(entries):
        index = _resolve(entry, gpus, order, uuids)
        if index is None:
            return Visibility(visible, entry, entries[pos + 1:], duplicates, known, mig_device, ignored_mig)
        if entry.upper().startswith("MIG-"):
            if mig_device:
                ignored_mig.append(entry)
                continue
            mig_device = entry
        if index in visible:
            duplicates.append(entry)
            continue
        visible.append(index)
    # UUID entries do not depend on the enumeration order; plain indices do.
    by_index_only = any(_is_index(e) for e in entries)
    return Visibility(visible, "", [], duplicates, known or not by_index_only, mig_device, ignored_mig)


def _is_index(entry: str) -> bool:
    """A device index as CUDA reads one: ASCII digits only (``str.isdigit`` also takes "٠١" or "²")."""
    return entry.isascii() and entry.isdigit()


def _resolve(entry: str, gpus: list[GpuFacts], order: list[int], uuids: list[tuple[str, int]]) -> int | None:
    if _is_index(entry):
        ordinal = int(entry)
        return order[ordinal] if ordinal < len(order) else None
    if entry.upper().startswith("MIG-"):
        return _resolve_mig(entry, gpus)
    prefix = entry[4:] if entry.upper().startswith("GPU-") else entry
    if not prefix:
        return None
    prefix = prefix.upper()
    at = bisect.bisect_left(uuids, (prefix,))
    matches = [index for uuid, index in uuids[at:at + 2] if uuid.startswith(prefix)]
    return matches[0] if len(matches) == 1 else None


def _resolve_mig(entry: str, gpus: list[GpuFacts]) -> int | None:
    """The NVML index of the GPU a MIG device entry lives on (None: no such MIG device)."""
    wanted = entry.upper()
    for gpu in gpus:
        if isinstance(gpu.mig_devices, list) and any(m.uuid.upper() == wanted for m in gpu.mig_devices):
            return gpu.index
    legacy = wanted.removeprefix("MIG-").split("/")
    if len(legacy) == 3 and legacy[0].startswith("GPU-"):
        for gpu in gpus:
            if gpu.uuid.upper() == legacy[0] and gpu.mig_mode is True:
                return gpu.index
    # A snapshot from before MIG devices were recorded cannot tell: trust the only MIG GPU.
    unknown = [g.index for g in gpus if g.mig_mode is True and not isinstance(g.mig_devices, list)]
    return unknown[0] if len(unknown) == 1 else None


def hides_all_on_purpose(cuda_visible_devices: str | None) -> bool:
    """Values people use to hide every GPU deliberately."""
    return (cuda_visible_devices or "").strip() in {"-1", "NoDevFiles", "none"}

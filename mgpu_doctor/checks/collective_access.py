"""Helpers for the collective set-up checks: their facts, and GPUs named as the user knows them."""

from __future__ import annotations

from mgpu_doctor.checks.facts_access import need
from mgpu_doctor.environment.visibility import visible_gpus
from mgpu_doctor.model.collective_facts import CollectiveFacts, PcieFacts, PciGpu, normalise_bus_id
from mgpu_doctor.model.snapshot import GpuLink, Snapshot
from mgpu_doctor.model.unavailable import Unavailable

NCCL_TROUBLESHOOTING = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"
NCCL_ACS_DOC = NCCL_TROUBLESHOOTING + "#pci-access-control-services-acs"
NCCL_SHM_DOC = NCCL_TROUBLESHOOTING + "#shared-memory"
NCCL_ENV_DOC = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
CONTAINER_TOOLKIT_DOC = ("https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/"
                         "docker-specialized.html")
NCCL_DEBUG_HINT = ("To see where NCCL stops: NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,P2P,SHM,NET "
                   "(NCCL_DEBUG=WARN shows only the error).")


def need_collective(snapshot: Snapshot) -> CollectiveFacts:
    return need(snapshot.collective, "host set-up facts")


def need_pcie(snapshot: Snapshot) -> PcieFacts:
    return need(need_collective(snapshot).pcie, "PCIe facts")


def nvml_index(snapshot: Snapshot) -> dict[str, int]:
    """PCI address (sysfs spelling) -> NVML index, when NVML answered."""
    nvml = snapshot.nvml
    if isinstance(nvml, Unavailable):
        return {}
    return {normalise_bus_id(g.pci_bus_id): g.index for g in nvml.gpus}


def gpu_label(address: str, index: dict[str, int]) -> str:
    return f"GPU {index[address]} ({address})" if address in index else f"GPU {address}"


def used_gpus(snapshot: Snapshot, pcie: PcieFacts) -> list[PciGpu]:
    """The GPUs a training job started like the doctor uses: CUDA_VISIBLE_DEVICES applied when
    NVML says which GPU is which, else every NVIDIA GPU on the bus."""
    nvml = snapshot.nvml
    value = snapshot.env.get("CUDA_VISIBLE_DEVICES")
    if isinstance(nvml, Unavailable) or value is None:
        return list(pcie.gpus)
    seen = visible_gpus(nvml.gpus, value, snapshot.env.get("CUDA_DEVICE_ORDER"))
    wanted = {normalise_bus_id(g.pci_bus_id) for g in nvml.gpus if g.index in seen.visible}
    return [g for g in pcie.gpus if g.address in wanted]


def nvml_link(snapshot: Snapshot, a: str, b: str) -> GpuLink | None:
    index = nvml_index(snapshot)
    nvml = snapshot.nvml
    if isinstance(nvml, Unavailable) or a not in index or b not in index:
        return None
    pair = {index[a], index[b]}
    return next((lk for lk in nvml.links if {lk.a, lk.b} == pair), None)

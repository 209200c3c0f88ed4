"""Facts about how the host, the container and NCCL are set up for collectives.

The settings behind most multi-GPU hangs, slow all-reduces and NCCL "unhandled system error"s
that are not in TensorFlow or the driver: the IOMMU and PCIe Access Control Services between
the GPUs, the size of ``/dev/shm``, which CPUs the job may run on against each GPU's NUMA node,
the network devices NCCL may be pointed at, the locked-memory limit, and the container. Each part
is its value or an :class:`~mgpu_doctor.model.unavailable.Unavailable` saying why not.
"""

from __future__ import annotations

from typing import Literal

from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.record import field, record

# ACS Control register bits (PCIe Base Specification, ACS Extended Capability), in lspci's words.
ACS_CONTROLS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")
# The controls that send peer-to-peer requests or completions up to the root complex (and its
# IOMMU) instead of across the switch: with them on, GPU peer-to-peer traffic is redirected.
ACS_REDIRECTING = ("ReqRedir", "CmpltRedir", "EgressCtrl")


@record
class PciBridge:
    """A PCIe bridge (root port or switch port) above at least one GPU.

    ``acs`` lists the ACS controls enabled on it (``[]``: the capability is there, all off); absent
    when the bridge has no ACS capability (it cannot redirect), failed when it could not be read
    (extended configuration space is readable by root only).
    """

    address: str  # 0000:03:08.0
    description: str  # "PLX Technology, Inc. PEX 8747 ..." (lspci), "" when read from sysfs
    acs: list[str] | Unavailable
    acs_source: str = ""  # "lspci -vvv" or "sysfs config"


@record
class PciGpu:
    """An NVIDIA GPU on the PCI bus (sysfs), whether or not NVML answers."""

    address: str  # 0000:3b:00.0, sysfs spelling (lower case, 4-digit domain)
    host_bridge: str  # pci0000:3a: the PCI root it hangs off
    bridges: list[str]  # the bridges above it, from the root port down
    numa_node: int | Unavailable
    local_cpus: str | Unavailable  # cpulist of its NUMA node's CPUs ("0-27,56-83")
    iommu_group: str | Unavailable


@record
class PcieFacts:
    gpus: list[PciGpu]
    bridges: list[PciBridge]


@record
class IommuFacts:
    """Whether DMA goes through an IOMMU, and how.

    ``mode``: ``off`` (no IOMMU in use), ``passthrough`` (identity mapping: ``iommu=pt``),
    ``translated`` (DMA remapped: ``intel_iommu=on`` without ``iommu=pt``), ``vfio`` (the GPU is
    handed to a virtual machine), ``on`` (an IOMMU is active, its mode unknown).
    """

    mode: str
    mode_source: str  # what decided it: a group's type file, the kernel command line, /sys/class/iommu
    kernel_params: list[str]  # the IOMMU / ACS words of /proc/cmdline
    units: list[str]  # /sys/class/iommu: dmar0, ivhd0, ...
    group_types: dict[str, str]  # IOMMU group of a GPU -> its type (identity, DMA, DMA-FQ, unmanaged)
    hypervisor: str | Unavailable  # "" on bare metal, else what says it is a virtual machine


@record
class ShmFacts:
    path: str
    size_bytes: int
    available_bytes: int | Unavailable
    fs_type: str | Unavailable  # tmpfs
    nccl_segments: int = 0  # files named nccl-* left in it (NCCL's shared-memory segments)
    nccl_segment_bytes: int = 0


@record
class CpuFacts:
    """The CPUs this process may run on, against the machine's NUMA nodes."""

    allowed: str  # cpulist from /proc/self/status Cpus_allowed_list (sched_getaffinity)
    online: str | Unavailable  # /sys/devices/system/cpu/online
    numa_nodes: dict[str, str]  # node number -> its cpulist
    quota_cpus: float | Unavailable  # cgroup CPU limit in CPUs (cpu.max, cfs_quota_us); absent: none
    quota_source: str = ""


@record
class IbDevice:
    name: str  # mlx5_0
    ports: dict[str, str]  # port number -> state ("4: ACTIVE")


@record
class NetworkFacts:
    interfaces: list[str]  # /sys/class/net
    ib_devices: list[IbDevice] | Unavailable  # /sys/class/infiniband
    memlock_bytes: int | Literal["unlimited"] | Unavailable  # soft RLIMIT_MEMLOCK (/proc/self/limits)
    nccl_conf: dict[str, str] | Unavailable  # NCCL_* set in /etc/nccl.conf (NCCL reads it too)
    # The proxy variables gRPC reads (grpc_proxy, https_proxy, http_proxy: the scheme only, never
    # the address; no_grpc_proxy, no_proxy as set). Added later: older snapshots say so.
    proxy_env: dict[str, str] | Unavailable = field(default_factory=lambda: not_in_snapshot())


@record
class ContainerFacts:
    runtime: str  # docker, podman, kubernetes, containerd, lxc; "" when not in a container
    evidence: list[str]
    device_nodes: list[str]  # /dev/nvidia0, ... (one per GPU the NVIDIA runtime injected)
    driver_gpus: list[str] | Unavailable  # /proc/driver/nvidia/gpus: the GPUs the driver shows here


@record
class CollectiveFacts:
    """Host, container and NCCL set-up facts (one part each, gathered from files)."""

    pcie: PcieFacts | Unavailable
    iommu: IommuFacts | Unavailable
    shm: ShmFacts | Unavailable
    cpus: CpuFacts | Unavailable
    network: NetworkFacts | Unavailable
    container: ContainerFacts | Unavailable
    probe_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)  # e.g. why lspci was not used


def normalise_bus_id(bus_id: str) -> str:
    """NVML's ``00000000:3B:00.0`` and sysfs's ``0000:3b:00.0`` as one spelling (sysfs's)."""
    domain, _, rest = bus_id.strip().lower().rpartition(":")
    domain, _, bus = domain.rpartition(":") if domain.count(":") else ("", "", domain)
    return f"{int(domain or '0', 16):04x}:{bus}:{rest}"


def not_in_snapshot() -> Unavailable:
    """What a snapshot written before these facts existed holds in their place."""
    return Unavailable("skipped", "not in this snapshot (written by an older mgpu-doctor)", "old-snapshot")

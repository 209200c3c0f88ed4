"""The GPUs on the PCI bus, the bridges above them with their ACS controls, and the IOMMU.

Everything is read under a filesystem root (``/`` or a test's fake one): ``/sys/bus/pci``,
``/sys/kernel/iommu_groups``, ``/sys/class/iommu``, ``/proc/cmdline``. ACS is read from
``lspci -D -vvv`` (run only when there are GPUs, with a timeout), else from each bridge's
configuration space in sysfs; both need root for the extended capabilities.
"""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path

from mgpu_doctor.model.collective_facts import ACS_CONTROLS, IommuFacts, PciBridge, PcieFacts, PciGpu
from mgpu_doctor.model.unavailable import Unavailable, absent, failed
from mgpu_doctor.probes.commands import Runner

NVIDIA_VENDOR = "0x10de"
GPU_CLASSES = ("0x0300", "0x0302")  # VGA controller, 3D controller (NVSwitches are 0x0680)
LSPCI_TIMEOUT_S = 5.0
PCI_EXT_CAP_ID_ACS = 0x000D
_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_IOMMU_WORDS = ("intel_iommu=", "amd_iommu=", "iommu=", "iommu.", "pci=", "pcie_acs_override=",
                "vfio", "config_acs=")


def find_gpus(root: Path) -> list[PciGpu]:
    devices = root / "sys/bus/pci/devices"
    try:
        names = sorted(os.listdir(devices))
    except OSError:
        return []
    gpus = []
    for name in names:
        device = devices / name
        if _read(device / "vendor") != NVIDIA_VENDOR or not _read(device / "class").startswith(GPU_CLASSES):
            continue
        host_bridge, bridges = _upstream(root, device)
        gpus.append(PciGpu(
            address=name, host_bridge=host_bridge, bridges=bridges,
            numa_node=_numa_node(device), local_cpus=_local_cpus(device),
            iommu_group=_iommu_group(device),
        ))
    return gpus


def gather_pcie(root: Path, runner: Runner, gpus: list[PciGpu]) -> tuple[PcieFacts, list[str]]:
    """The GPUs and the ACS state of every bridge above one; notes say how ACS was read."""
    wanted = sorted({b for g in gpus for b in g.bridges})
    notes: list[str] = []
    from_lspci: dict[str, PciBridge] = {}
    if wanted:
        result = runner(["lspci", "-D", "-vvv"], LSPCI_TIMEOUT_S)
        if result.ok:
            from_lspci = parse_lspci(result.stdout)
        else:
            notes.append(f"ACS read from sysfs: {result.error}")
    bridges = []
    for address in wanted:
        seen = from_lspci.get(address)
        if seen is not None and not (isinstance(seen.acs, Unavailable) and seen.acs.cause == "needs-root"):
            bridges.append(seen)
            continue
        acs = acs_from_config(root / "sys/bus/pci/devices" / address / "config")
        bridges.append(PciBridge(address, seen.description if seen else "", acs,
                                 "sysfs config" if not isinstance(acs, Unavailable) else ""))
    return PcieFacts(gpus, bridges), notes


def parse_lspci(text: str) -> dict[str, PciBridge]:
    """Every device of ``lspci -D -vvv``: its description and ACS controls (or why unknown)."""
    found: dict[str, PciBridge] = {}
    for block in re.split(r"\n\s*\n", text):
        lines = block.strip("\n").splitlines()
        if not lines:
            continue
        address, _, description = lines[0].partition(" ")
        address = address.lower()
        if not _BDF.match(address):
            continue
        acs: list[str] | Unavailable = absent("no Access Control Services capability", "no-acs")
        for line in lines[1:]:
            stripped = line.strip()
            if stripped.startswith("ACSCtl:"):
                acs = [w[:-1] for w in stripped[len("ACSCtl:"):].split() if w.endswith("+")]
                break
            if "<access denied>" in stripped:
                acs = failed("lspci could not read the extended capabilities (run as root)", "needs-root")
        found[address] = PciBridge(address, description.split(": ", 1)[-1], acs, "lspci -vvv")
    return found


def acs_from_config(path: Path) -> list[str] | Unavailable:
    """The ACS controls enabled in a device's PCI Express extended configuration space."""
    try:
        with path.open("rb") as fh:
            config = fh.read(4096)
    except OSError as exc:
        return failed(f"cannot read {path.parent.name}/config: {exc.strerror or exc}", "unreadable")
    if len(config) <= 256:
        return failed("extended configuration space is readable by root only "
                      "(sudo mgpu-doctor, or sudo lspci -vvv | grep ACSCtl)", "needs-root")
    offset, seen = 0x100, 0
    while 0x100 <= offset <= len(config) - 8 and seen < 64:
        header = struct.unpack_from("<I", config, offset)[0]
        if header in (0, 0xFFFFFFFF):
            break
        if header & 0xFFFF == PCI_EXT_CAP_ID_ACS:
            control = struct.unpack_from("<H", config, offset + 6)[0]
            return [name for bit, name in enumerate(ACS_CONTROLS) if control >> bit & 1]
        offset, seen = (header >> 20) & 0xFFC, seen + 1
    return absent("no Access Control Services capability", "no-acs")


def gather_iommu(root: Path, gpus: list[PciGpu]) -> IommuFacts:
    params = [w for w in _read(root / "proc/cmdline").split() if w.startswith(_IOMMU_WORDS)]
    try:
        units = sorted(os.listdir(root / "sys/class/iommu"))
    except OSError:
        units = []
    group_types = {}
    for gpu in gpus:
        if isinstance(gpu.iommu_group, str):
            kind = _read(root / "sys/kernel/iommu_groups" / gpu.iommu_group / "type")
            if kind:
                group_types[gpu.iommu_group] = kind
    mode, source = iommu_mode(params, units, group_types, _has_groups(root))
    return IommuFacts(mode, source, params, units, group_types, hypervisor(root))


def iommu_mode(params: list[str], units: list[str], group_types: dict[str, str],
               has_groups: bool) -> tuple[str, str]:
    """What the kernel does with DMA: the GPUs' group types first, then the command line."""
    kinds = set(group_types.values())
    if kinds:
        where = "type of the GPUs' IOMMU groups: " + ", ".join(sorted(kinds))
        if kinds <= {"identity"}:
            return "passthrough", where
        if "unmanaged" in kinds:
            return "vfio", where
        if kinds & {"DMA", "DMA-FQ"}:
            return "translated", where
    words = {p.split("=", 1)[0]: p.split("=", 1)[1] if "=" in p else "" for p in params}
    passthrough = words.get("iommu") == "pt" or words.get("iommu.passthrough") in ("1", "on", "y")
    off = words.get("intel_iommu", "").startswith("off") or words.get("amd_iommu", "").startswith("off") \
        or words.get("iommu") == "off"
    if not units and not has_groups:
        return "off", "no IOMMU in /sys/class/iommu and no IOMMU groups" + (
            f" (kernel command line: {' '.join(params)})" if params else "")
    if off:
        return "off", "kernel command line: " + " ".join(params)
    if passthrough:
        return "passthrough", "kernel command line: " + " ".join(params)
    if words.get("intel_iommu", "").startswith("on") or words.get("amd_iommu") in ("on", "force_isolation"):
        return "translated", "kernel command line: " + " ".join(params)
    return "on", "IOMMU units " + ", ".join(units) if units else "IOMMU groups present"


def hypervisor(root: Path) -> str | Unavailable:
    """What says this is a virtual machine ("" on bare metal)."""
    vendor = _read(root / "sys/class/dmi/id/sys_vendor")
    product = _read(root / "sys/class/dmi/id/product_name")
    flag = _cpuinfo_has_hypervisor_flag(root / "proc/cpuinfo")
    if flag is None and not vendor:
        return absent("neither /proc/cpuinfo flags nor /sys/class/dmi/id say", "unknown")
    known_vms = ("QEMU", "KVM", "VMware", "Xen", "Amazon EC2", "Google", "Microsoft Corporation",
                 "innotek", "OpenStack", "Red Hat", "Alibaba", "Oracle Corporation", "DigitalOcean")
    vm_vendor = any(v.lower() in f"{vendor} {product}".lower() for v in known_vms)
    if flag or vm_vendor:
        said = [x for x in (vendor, product) if x]
        return ("hypervisor flag in /proc/cpuinfo" if flag else "DMI vendor") + (
            f" ({' '.join(said)})" if said else "")
    return ""


def _cpuinfo_has_hypervisor_flag(path: Path) -> bool | None:
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith(("flags", "Features")):
                    return "hypervisor" in line.split(":", 1)[-1].split()
    except OSError:
        return None
    return None


def _upstream(root: Path, device: Path) -> tuple[str, list[str]]:
    """The PCI root (``pci0000:00``) and the bridges above a device, from the root port down."""
    try:
        real = Path(os.path.realpath(device))
    except OSError:
        return "", []
    parts = real.parts
    host = next((p for p in parts if p.startswith("pci") and ":" in p), "")
    chain = [p for p in parts if _BDF.match(p)]
    return host, chain[:-1]


def _numa_node(device: Path) -> int | Unavailable:
    text = _read(device / "numa_node")
    if not text:
        return absent(f"{device.name}: no numa_node in sysfs", "no-numa")
    try:
        node = int(text)
    except ValueError:
        return failed(f"{device.name}: numa_node is {text!r}", "unreadable")
    if node < 0:
        return absent("the firmware reports no NUMA node for it (-1): one memory node, or a VM", "no-numa")
    return node


def _local_cpus(device: Path) -> str | Unavailable:
    text = _read(device / "local_cpulist")
    return text or absent(f"{device.name}: no local_cpulist in sysfs", "no-numa")


def _iommu_group(device: Path) -> str | Unavailable:
    link = device / "iommu_group"
    try:
        return os.path.basename(os.readlink(link))
    except OSError:
        return absent("not in an IOMMU group (no IOMMU in use)", "no-iommu")


def _has_groups(root: Path) -> bool:
    try:
        return any(True for _ in os.scandir(root / "sys/kernel/iommu_groups"))
    except OSError:
        return False


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""

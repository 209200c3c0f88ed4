"""IOMMU and PCIe Access Control Services between GPUs that exchange data over PCIe.

With ACS redirect on a switch or root port between two GPUs, or the IOMMU remapping their DMA,
NCCL's PCIe peer-to-peer traffic is sent up to the root complex: NCCL hangs at the first
all-reduce with every GPU at 100 %, or runs several times slower (NCCL troubleshooting guide,
"PCI Access Control Services"; NVIDIA/nccl#2079, #631, #257).
"""

from __future__ import annotations

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.checks.collective_access import (
    NCCL_ACS_DOC,
    NCCL_DEBUG_HINT,
    gpu_label,
    need_collective,
    need_pcie,
    nvml_index,
    nvml_link,
    used_gpus,
)
from mgpu_doctor.environment.pcie_paths import Route, acs_unknown, redirecting, routes
from mgpu_doctor.model.collective_facts import IommuFacts, PciBridge
from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.model.snapshot import Snapshot
from mgpu_doctor.model.unavailable import Unavailable

ACS_HANG_THREAD = "https://github.com/NVIDIA/nccl/issues/2079"
P2P_DISABLE_THREAD = "https://github.com/NVIDIA/nccl/issues/631"
IOMMU_HANG_THREAD = "https://github.com/NVIDIA/nccl/issues/257"
WORKAROUND = (
    "Until then, NCCL_P2P_LEVEL=NVL (keeps NVLink, drops PCIe peer-to-peer) or NCCL_P2P_DISABLE=1 "
    "makes NCCL copy through host memory instead: no hang, but all-reduce between these GPUs runs at "
    "host-memory speed (often half the PCIe peer-to-peer bandwidth or less), and it needs a large "
    "/dev/shm."
)


CODES = (
    "pcie.no-pcie-p2p",
    "pcie.p2p-direct",
    "pcie.acs-redirects-p2p",
    "pcie.iommu-translates-p2p",
    "pcie.acs-unknown",
)


def check_pcie_p2p(snapshot: Snapshot) -> list[Finding]:
    collective = need_collective(snapshot)
    pcie = need_pcie(snapshot)
    gpus = used_gpus(snapshot, pcie)
    if len(gpus) < 2:
        raise CheckSkipped(f"{len(gpus)} GPU(s) in use: no peer-to-peer between GPUs")
    index = nvml_index(snapshot)
    bridges = {b.address: b for b in pcie.bridges}
    over_pcie = [r for r in routes(gpus) if _uses_pcie_p2p(snapshot, r)]
    iommu = collective.iommu
    if not over_pcie:
        return [Finding("pcie.no-pcie-p2p", Severity.OK,
                        "no GPU pair exchanges data by PCIe peer-to-peer (NVLink, or across sockets)")]
    in_vm = isinstance(iommu, IommuFacts) and bool(iommu.hypervisor)
    findings = []
    redirected = [(r, [bridges[a] for a in r.between if a in bridges and redirecting(bridges[a])])
                  for r in over_pcie]
    redirected = [(r, found) for r, found in redirected if found]
    if redirected:
        findings.append(_acs_finding(redirected, index, iommu, in_vm))
    if isinstance(iommu, IommuFacts) and iommu.mode == "translated":
        findings.append(_iommu_finding(iommu, over_pcie, index, in_vm))
    unknown = sorted({a for r in over_pcie for a in r.between if a in bridges and acs_unknown(bridges[a])})
    if unknown and not redirected:
        findings.append(Finding(
            "pcie.acs-unknown", Severity.INFO,
            f"ACS of {len(unknown)} PCIe bridge(s) between GPUs could not be read: whether they "
            "redirect peer-to-peer traffic is unknown",
            [f"{a}: {bridges[a].acs}" for a in unknown[:8]]
            + (["(no lspci here: read from sysfs)"] if any(n.startswith("ACS read from sysfs") for n in
                                                           collective.notes) else []),
            fix="Run `sudo lspci -vvv | grep -e '^[0-9a-f]' -e ACSCtl` (or the doctor as root): "
            f"a bridge with ReqRedir+ or CmpltRedir+ redirects peer-to-peer traffic. {NCCL_DEBUG_HINT}",
            links=[NCCL_ACS_DOC],
        ))
    if not findings:
        mode = iommu.mode if isinstance(iommu, IommuFacts) else f"unknown ({iommu})"
        checked = sorted({a for r in over_pcie for a in r.between})
        findings.append(Finding(
            "pcie.p2p-direct", Severity.OK,
            f"{len(over_pcie)} GPU pair(s) over PCIe: no ACS redirect on the {len(checked)} bridge(s) "
            f"between them, IOMMU {mode}",
        ))
    return findings


def _uses_pcie_p2p(snapshot: Snapshot, r: Route) -> bool:
    """NVLink pairs do not use PCIe; NVML's peer-to-peer answer wins over the topology guess."""
    link = nvml_link(snapshot, r.a.address, r.b.address)
    if link is not None:
        if isinstance(link.nvlink_links, int) and link.nvlink_links > 0:
            return False
        if isinstance(link.p2p_read, str):
            return link.p2p_read == "ok"
    return r.pcie_p2p_likely


def _acs_finding(redirected: list[tuple[Route, list[PciBridge]]], index: dict[str, int],
                 iommu: IommuFacts | Unavailable, in_vm: bool) -> Finding:
    bridges = {b.address: b for _, found in redirected for b in found}
    evidence = [_bridge_line(bridges[a]) for a in sorted(bridges)]
    evidence += [f"{gpu_label(r.a.address, index)} <-> {gpu_label(r.b.address, index)} "
                 f"({_shared(r)}): through {', '.join(b.address for b in found)}"
                 for r, found in redirected[:8]]
    if isinstance(iommu, IommuFacts):
        evidence.append(f"IOMMU: {iommu.mode} ({iommu.mode_source})")
    if in_vm:
        fix = ("Inside a virtual machine the bridges and ACS belong to the hypervisor: do not turn ACS "
               "off in the guest. Use a VM type whose GPUs support peer-to-peer (ask the provider), "
               f"or set NCCL_P2P_DISABLE=1 for this job. {WORKAROUND} {NCCL_DEBUG_HINT}")
    else:
        setpci = "; ".join(f"sudo setpci -s {a} ECAP_ACS+0x6.w=0000" for a in sorted(bridges))
        fix = ("Turn ACS redirect off on these bridges: in the BIOS (disable VT-d / IOMMU, or 'ACS' in "
               f"the PCIe settings), or until the next reboot with `{setpci}`. {WORKAROUND} "
               f"{NCCL_DEBUG_HINT}")
    return Finding(
        "pcie.acs-redirects-p2p", Severity.WARNING,
        f"PCIe Access Control Services on {len(bridges)} bridge(s) between GPUs redirect their "
        "peer-to-peer traffic to the CPU root complex: NCCL can hang at the first all-reduce with "
        "the GPUs at 100 %, or run several times slower",
        evidence, fix=fix, links=[NCCL_ACS_DOC, ACS_HANG_THREAD, P2P_DISABLE_THREAD],
    )


def _iommu_finding(iommu: IommuFacts, over_pcie: list[Route], index: dict[str, int], in_vm: bool) -> Finding:
    evidence = [f"IOMMU mode: translated ({iommu.mode_source})"]
    if iommu.kernel_params:
        evidence.append("kernel command line: " + " ".join(iommu.kernel_params))
    evidence += [f"{gpu_label(r.a.address, index)} <-> {gpu_label(r.b.address, index)}: PCIe peer-to-peer"
                 for r in over_pcie[:6]]
    if in_vm:
        return Finding(
            "pcie.iommu-translates-p2p", Severity.INFO,
            "The guest's IOMMU remaps DMA: GPU peer-to-peer inside this VM depends on the hypervisor",
            evidence,
            fix=f"If NCCL hangs or is slow here, set NCCL_P2P_DISABLE=1. {NCCL_DEBUG_HINT}",
            links=[NCCL_ACS_DOC],
        )
    return Finding(
        "pcie.iommu-translates-p2p", Severity.WARNING,
        "The IOMMU remaps DMA (not passthrough): PCIe peer-to-peer between GPUs goes through it, and "
        "NCCL can hang or slow down",
        evidence,
        fix="Add iommu=pt to the kernel command line (GRUB_CMDLINE_LINUX in /etc/default/grub, then "
        "update-grub or grub2-mkconfig, and reboot), or disable VT-d / AMD-Vi in the BIOS when no "
        f"virtual machine on this host needs it. {WORKAROUND} {NCCL_DEBUG_HINT}",
        links=[NCCL_ACS_DOC, IOMMU_HANG_THREAD, P2P_DISABLE_THREAD],
    )


def _bridge_line(bridge: PciBridge) -> str:
    controls = bridge.acs if isinstance(bridge.acs, list) else []
    name = f" ({bridge.description})" if bridge.description else ""
    return f"{bridge.address}{name}: ACSCtl {' '.join(c + '+' for c in controls)} [{bridge.acs_source}]"


def _shared(r: Route) -> str:
    return {"switch": "same PCIe switch", "root complex": "same root complex"}.get(
        r.shared, "different PCI roots, same NUMA node" if r.same_numa_node else "different PCI roots")

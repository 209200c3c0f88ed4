"""The GPUs themselves, from NVML: presence, health, and how they fit together."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.checks.facts_access import gib, need, need_any, need_gpus, skip_reason
from mgpu_doctor.environment.machine import lacks_peer_access
from mgpu_doctor.environment.visibility import cuda_enumeration_order
from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.model.snapshot import GpuFacts, NvmlFacts, Snapshot
from mgpu_doctor.model.unavailable import Unavailable

MEMORY_IN_USE_FRACTION = 0.05
SLOWDOWN_REASONS = {
    "hw_slowdown": "hardware slowdown (overheating or power brake signalled by the board)",
    "hw_thermal_slowdown": "hardware thermal slowdown",
    "sw_thermal_slowdown": "driver thermal slowdown",
    "hw_power_brake_slowdown": "external power brake",
}


PRESENT_CODES = ("gpu.found", "gpu.none", "gpu.nvml-failed", "gpu.nvml-partial")


def check_gpus_present(snapshot: Snapshot) -> list[Finding]:
    nvml = snapshot.nvml
    if isinstance(nvml, Unavailable):
        if nvml.cause == "not-pasted":  # a pasted text without nvidia-smi says nothing about the GPUs
            raise CheckSkipped(skip_reason("nvidia-smi output", nvml))
        if nvml.reason == "absent":
            return [Finding(
                "gpu.none", Severity.WARNING,
                "No NVIDIA GPU driver found: training will run on the CPU", [nvml.detail],
                fix="On a GPU machine: install the NVIDIA driver (`nvidia-smi` must work); in a "
                "container: start it with the NVIDIA container runtime (--gpus all).",
            )]
        return [Finding(
            "gpu.nvml-failed", Severity.ERROR,
            "NVML, the driver's management library, does not answer", [nvml.detail],
            fix="Run `nvidia-smi`; if it fails or hangs too, the driver is broken: check "
            "`dmesg | grep -i -e nvrm -e xid`, then reload the driver or reboot.",
        )]
    findings = []
    if nvml.partial_error:
        findings.append(Finding(
            "gpu.nvml-partial", Severity.ERROR, "NVML stopped answering part-way",
            [nvml.partial_error],
            fix="A GPU may have fallen off the bus: check `nvidia-smi` and `dmesg` for Xid 79 "
            "('GPU has fallen off the bus') and reset or reseat it.",
        ))
    if not nvml.gpus:
        findings.append(Finding(
            "gpu.none", Severity.WARNING,
            "The NVIDIA driver is loaded but reports no GPU", [f"driver {nvml.driver_version}"],
            fix="Check `nvidia-smi -L`; in a container, pass the GPUs in (--gpus all).",
        ))
        return findings
    names = Counter(g.name for g in nvml.gpus)
    findings.append(Finding(
        "gpu.found", Severity.OK,
        f"{len(nvml.gpus)} GPU(s): " + ", ".join(f"{n}x {name}" for name, n in names.items()),
        [f"driver {nvml.driver_version}, supports CUDA up to {nvml.cuda_driver_version}"],
    ))
    return findings


MEMORY_CODES = ("gpu.memory-in-use", "gpu.memory-use-unknown")


def check_gpu_memory_in_use(snapshot: Snapshot) -> list[Finding]:
    nvml = need_gpus(snapshot)
    need_any([g.memory_used_bytes if isinstance(g.processes, Unavailable) else g.processes
              for g in nvml.gpus], "GPU memory use")
    findings = _unknown_on("gpu.memory-use-unknown", "memory use", nvml,
                           lambda g: isinstance(g.memory_used_bytes, Unavailable)
                           and isinstance(g.processes, Unavailable))
    for gpu in nvml.gpus:
        procs = gpu.processes if not isinstance(gpu.processes, Unavailable) else []
        used = gpu.memory_used_bytes
        heavy = not isinstance(used, Unavailable) and used > MEMORY_IN_USE_FRACTION * gpu.memory_total_bytes
        if not procs and not heavy:
            continue
        evidence = [f"GPU {gpu.index} ({gpu.name}): "
                    + (f"{gib(used)} of {gib(gpu.memory_total_bytes)} in use"
                       if not isinstance(used, Unavailable) else "memory use unknown")]
        evidence += [
            f"pid {p.pid} ({p.kind}) holds "
            + (gib(p.used_memory_bytes) if not isinstance(p.used_memory_bytes, Unavailable) else "? GiB")
            for p in procs
        ]
        findings.append(Finding(
            "gpu.memory-in-use", Severity.WARNING,
            f"GPU {gpu.index} already has memory held by other processes",
            evidence,
            fix="TensorFlow maps nearly all GPU memory by default and will fail or run out of "
            "memory on this GPU: stop those processes (`nvidia-smi` shows them), exclude the GPU "
            "with CUDA_VISIBLE_DEVICES, or enable memory growth "
            "(TF_FORCE_GPU_ALLOW_GROWTH=true).",
        ))
    return findings


def _unknown_on(code: str, what: str, nvml: NvmlFacts, unknown: Callable[[GpuFacts], bool]) -> list[Finding]:
    """An info finding naming the GPUs whose ``what`` is not known (the others were judged)."""
    gpus = [g for g in nvml.gpus if unknown(g)]
    if not gpus:
        return []
    return [Finding(code, Severity.INFO, f"The {what} of GPU {', '.join(str(g.index) for g in gpus)} "
                    "is not known: not checked there",
                    [f"GPU {g.index} ({g.name}): {what} not reported by NVML" for g in gpus])]


ECC_CODES = ("gpu.ecc-uncorrected",)


def check_gpu_ecc(snapshot: Snapshot) -> list[Finding]:
    nvml = need_gpus(snapshot)
    known = [g for g in nvml.gpus if not isinstance(g.ecc_uncorrected_volatile, Unavailable)]
    if not known:
        raise CheckSkipped("no GPU reports ECC error counts (ECC not supported or disabled)")
    return [
        Finding(
            "gpu.ecc-uncorrected", Severity.ERROR,
            f"GPU {g.index} has {g.ecc_uncorrected_volatile} uncorrected ECC error(s) since the "
            "driver loaded",
            [f"GPU {g.index} ({g.name}, {g.pci_bus_id}): uncorrected volatile ECC errors = "
             f"{g.ecc_uncorrected_volatile}"],
            fix="Results on this GPU cannot be trusted: drain it (exclude it with "
            f"CUDA_VISIBLE_DEVICES), reset it (sudo nvidia-smi -r -i {g.index}) and, if errors "
            f"return, have it replaced. Details: nvidia-smi -q -d ECC,PAGE_RETIREMENT -i {g.index}",
        )
        for g in known
        if isinstance(g.ecc_uncorrected_volatile, int) and g.ecc_uncorrected_volatile > 0
    ]


THROTTLING_CODES = ("gpu.throttling",)


def check_gpu_throttling(snapshot: Snapshot) -> list[Finding]:
    nvml = need_gpus(snapshot)
    findings = []
    reported = False
    for gpu in nvml.gpus:
        if isinstance(gpu.throttle_reasons, Unavailable):
            continue
        reported = True
        slow = [r for r in gpu.throttle_reasons if r in SLOWDOWN_REASONS]
        if not slow:
            continue
        temp = f", {gpu.temperature_c} C" if not isinstance(gpu.temperature_c, Unavailable) else ""
        findings.append(Finding(
            "gpu.throttling", Severity.WARNING,
            f"GPU {gpu.index} is slowed down right now: "
            + ", ".join(SLOWDOWN_REASONS[r] for r in slow),
            [f"GPU {gpu.index} ({gpu.name}{temp}): clock event reasons {gpu.throttle_reasons}"],
            fix="Synchronous multi-GPU training runs at the pace of the slowest GPU: check "
            "cooling and power (`nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER`).",
        ))
    if not reported:
        raise CheckSkipped("no GPU reports its clock event (throttle) reasons")
    return findings


COMPUTE_MODE_CODES = ("gpu.compute-prohibited", "gpu.compute-exclusive", "gpu.compute-mode-unknown")


def check_gpu_compute_mode(snapshot: Snapshot) -> list[Finding]:
    nvml = need_gpus(snapshot)
    need_any([g.compute_mode for g in nvml.gpus], "compute mode")
    findings = _unknown_on("gpu.compute-mode-unknown", "compute mode", nvml,
                           lambda g: isinstance(g.compute_mode, Unavailable))
    for gpu in nvml.gpus:
        if gpu.compute_mode == "prohibited":
            findings.append(Finding(
                "gpu.compute-prohibited", Severity.ERROR,
                f"GPU {gpu.index} is in 'prohibited' compute mode: no process can use it",
                [f"GPU {gpu.index} ({gpu.name}): compute mode prohibited"],
                fix=f"sudo nvidia-smi -i {gpu.index} -c DEFAULT",
            ))
        elif gpu.compute_mode == "exclusive_process":
            findings.append(Finding(
                "gpu.compute-exclusive", Severity.WARNING,
                f"GPU {gpu.index} is in exclusive-process mode: a second process (a data loader "
                "worker, a leftover job, this doctor's own probes) cannot share it",
                [f"GPU {gpu.index} ({gpu.name}): compute mode exclusive_process"],
                fix=f"Fine for one training process per GPU; otherwise sudo nvidia-smi -i "
                f"{gpu.index} -c DEFAULT",
            ))
    return findings


MIG_CODES = ("gpu.mig-enabled",)


def check_gpu_mig(snapshot: Snapshot) -> list[Finding]:
    nvml = need_gpus(snapshot)
    mig = [g for g in nvml.gpus if g.mig_mode is True]
    if not mig:
        if all(isinstance(g.mig_mode, Unavailable) for g in nvml.gpus):
            raise CheckSkipped("no GPU supports MIG")
        return []
    return [Finding(
        "gpu.mig-enabled", Severity.WARNING if len(nvml.gpus) == 1 else Severity.ERROR,
        f"MIG is enabled on {len(mig)} GPU(s): a CUDA process sees at most one MIG instance, so "
        "MirroredStrategy cannot span MIG instances or MIG GPUs",
        [f"GPU {g.index} ({g.name}): MIG enabled" for g in mig],
        fix="For multi-GPU training disable MIG: sudo nvidia-smi -i N -mig 0 (then reset the "
        "GPU); or run one single-device job per MIG instance.",
    )]


PCIE_LINK_CODES = ("gpu.pcie-width-degraded", "gpu.pcie-gen-below-max", "gpu.pcie-link-unknown")


def check_gpu_pcie_link(snapshot: Snapshot) -> list[Finding]:
    nvml = need_gpus(snapshot)

    def unknown(g: GpuFacts) -> bool:
        return not any(isinstance(a, int) and isinstance(b, int) for a, b in (
            (g.pcie_width_current, g.pcie_width_max), (g.pcie_gen_current, g.pcie_gen_max)))

    if all(unknown(g) for g in nvml.gpus):
        need(next(v for v in (nvml.gpus[0].pcie_width_current, nvml.gpus[0].pcie_width_max,
                              nvml.gpus[0].pcie_gen_current, nvml.gpus[0].pcie_gen_max)
                  if isinstance(v, Unavailable)), "PCIe link")
    findings = _unknown_on("gpu.pcie-link-unknown", "PCIe link", nvml, unknown)
    for g in nvml.gpus:
        cur_w, max_w = g.pcie_width_current, g.pcie_width_max
        if isinstance(cur_w, int) and isinstance(max_w, int) and cur_w < max_w:
            findings.append(Finding(
                "gpu.pcie-width-degraded", Severity.WARNING,
                f"GPU {g.index} runs its PCIe link at x{cur_w} instead of x{max_w}",
                [f"GPU {g.index} ({g.name}, {g.pci_bus_id}): width x{cur_w} of x{max_w}"],
                fix="A narrower link than the card supports usually means a bad riser, a slot "
                "wired narrower, or a seating problem; check `lspci -vv` (LnkSta) and reseat.",
            ))
        cur_g, max_g = g.pcie_gen_current, g.pcie_gen_max
        if isinstance(cur_g, int) and isinstance(max_g, int) and cur_g < max_g:
            findings.append(Finding(
                "gpu.pcie-gen-below-max", Severity.INFO,
                f"GPU {g.index} runs PCIe gen {cur_g} (max {max_g}); normal while idle",
                [f"GPU {g.index}: PCIe gen {cur_g} of {max_g}"],
                fix="GPUs lower the link generation when idle to save power; if it stays low "
                "under load, check BIOS PCIe settings.",
            ))
    return findings


UNIFORMITY_CODES = ("gpu.mixed",)


def check_gpu_uniformity(snapshot: Snapshot) -> list[Finding]:
    nvml = need_gpus(snapshot)
    if len(nvml.gpus) < 2:
        raise CheckSkipped("only one GPU")
    names = Counter(g.name for g in nvml.gpus)
    memories = Counter(g.memory_total_bytes for g in nvml.gpus)
    if len(names) == 1 and len(memories) == 1:
        return []
    slowest = min(nvml.gpus, key=lambda g: g.memory_total_bytes)
    return [Finding(
        "gpu.mixed", Severity.WARNING,
        "The GPUs are not all the same: synchronous training runs at the pace and memory "
        "of the weakest one",
        [f"GPU {g.index}: {g.name}, {gib(g.memory_total_bytes)}" for g in nvml.gpus],
        fix="Train on identical GPUs (select them with CUDA_VISIBLE_DEVICES); the per-replica "
        f"batch must fit in {gib(slowest.memory_total_bytes)} (GPU {slowest.index}).",
    )]


DEVICE_ORDER_CODES = ("cuda.device-order",)


def check_cuda_device_order(snapshot: Snapshot) -> list[Finding]:
    nvml = need_gpus(snapshot)
    if len(nvml.gpus) < 2:
        raise CheckSkipped("only one GPU")
    order = snapshot.env.get("CUDA_DEVICE_ORDER")
    _, certain = cuda_enumeration_order(nvml.gpus, order)
    if certain:
        return []
    return [Finding(
        "cuda.device-order", Severity.WARNING,
        "Mixed GPU models without CUDA_DEVICE_ORDER=PCI_BUS_ID: CUDA numbers GPUs fastest first, "
        "so CUDA_VISIBLE_DEVICES=1 may not be the GPU that nvidia-smi calls 1",
        [f"GPU {g.index} (nvidia-smi order): {g.name}, {g.pci_bus_id}" for g in nvml.gpus]
        + [f"CUDA_DEVICE_ORDER={order!r}" if order else "CUDA_DEVICE_ORDER not set"],
        fix="export CUDA_DEVICE_ORDER=PCI_BUS_ID (in the training job's environment too).",
    )]


INTERCONNECT_CODES = ("gpu.no-p2p", "gpu.p2p-unknown", "gpu.no-nvlink", "gpu.cross-socket")


def check_gpu_interconnect(snapshot: Snapshot) -> list[Finding]:
    nvml = need_gpus(snapshot)
    if len(nvml.gpus) < 2:
        raise CheckSkipped("only one GPU")
    if not nvml.links:
        raise CheckSkipped("no GPU-to-GPU link facts")
    no_p2p = [lk for lk in nvml.links if lacks_peer_access(lk.p2p_read)]
    findings = []
    if no_p2p:
        findings.append(Finding(
            "gpu.no-p2p", Severity.WARNING,
            f"{len(no_p2p)} GPU pair(s) cannot access each other's memory directly (no P2P): "
            "all-reduce goes through host memory",
            [f"GPU {lk.a} <-> GPU {lk.b}: P2P {lk.p2p_read}, topology {lk.topology}"
             for lk in no_p2p[:12]],
            fix="Expect slower gradient all-reduce. If P2P should work (same PCIe switch), "
            "check that IOMMU/ACS is not blocking it (`nvidia-smi topo -p2p r`); NCCL hangs on "
            "such machines are often cured with NCCL_P2P_DISABLE=1.",
        ))
    unknown = [lk for lk in nvml.links if lk.p2p_read == "unknown"]
    if unknown:  # NVML_P2P_STATUS_UNKNOWN: neither a missing peer access nor a working one
        findings.append(Finding(
            "gpu.p2p-unknown", Severity.INFO,
            f"Cannot tell whether {len(unknown)} GPU pair(s) access each other's memory directly: "
            "NVML says the P2P status is unknown",
            [f"GPU {lk.a} <-> GPU {lk.b}: P2P unknown, topology {lk.topology}" for lk in unknown[:12]],
            fix="Ask the driver directly: `nvidia-smi topo -p2p r` (OK or NS per pair); where a pair "
            "shows NS, expect all-reduce through host memory, as for gpu.no-p2p.",
        ))
    nvlinked = [lk for lk in nvml.links if isinstance(lk.nvlink_links, int) and lk.nvlink_links > 0]
    if not nvlinked and not any(isinstance(lk.nvlink_links, Unavailable) for lk in nvml.links):
        findings.append(Finding(
            "gpu.no-nvlink", Severity.INFO,
            "No NVLink between the GPUs: gradients are exchanged over PCIe",
            [f"GPU {lk.a} <-> GPU {lk.b}: {lk.topology}" for lk in nvml.links[:12]],
            fix="Fine for small models; for large ones expect all-reduce to limit scaling "
            "(measure it with `mgpu-doctor smoke`).",
        ))
    # Pairs joined by NVLink (directly or through NVSwitches) do not send their traffic over
    # the inter-socket link, wherever their PCIe slots are.
    cross_socket = [lk for lk in nvml.links if lk.topology == "system" and lk not in nvlinked]
    if cross_socket:
        findings.append(Finding(
            "gpu.cross-socket", Severity.INFO,
            f"{len(cross_socket)} GPU pair(s) without NVLink sit on different CPU sockets: their "
            "traffic crosses the inter-socket link",
            [f"GPU {lk.a} <-> GPU {lk.b}: system" for lk in cross_socket[:12]],
            fix="Prefer GPUs under the same socket for one job (`nvidia-smi topo -m`).",
        ))
    return findings

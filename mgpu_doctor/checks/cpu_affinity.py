"""The CPUs the job may run on, against its GPUs' NUMA nodes and their number.

A job pinned to the far socket (numactl, taskset, a scheduler's CPU binding) copies every batch
across the inter-socket link; a cgroup CPU limit far below what N GPUs need starves the input
pipeline and NCCL's threads, and the GPUs wait.
"""

from __future__ import annotations

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.checks.collective_access import (
    NCCL_ENV_DOC,
    gpu_label,
    need_collective,
    need_pcie,
    nvml_index,
    used_gpus,
)
from mgpu_doctor.checks.facts_access import need
from mgpu_doctor.environment.cpulist import format_cpulist, parse_cpulist
from mgpu_doctor.model.collective_facts import ContainerFacts, CpuFacts, PciGpu
from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.model.snapshot import Snapshot
from mgpu_doctor.model.unavailable import Unavailable

CPUS_PER_GPU = 2  # a launch thread and NCCL's proxy thread per GPU, before any input pipeline
FAR_SOCKET_THREAD = "https://github.com/NVIDIA/go-gpuallocator/issues/17"
TF_THREADS_THREAD = "https://github.com/tensorflow/tensorflow/issues/17206"
TF_DATA_GUIDE = "https://www.tensorflow.org/guide/data_performance"


CODES = ("cpu.ok", "cpu.far-from-gpus", "cpu.too-few-for-gpus")


def check_cpu_affinity(snapshot: Snapshot) -> list[Finding]:
    collective = need_collective(snapshot)
    cpus = need(collective.cpus, "CPU facts")
    pcie = need_pcie(snapshot)
    gpus = used_gpus(snapshot, pcie)
    if not gpus:
        raise CheckSkipped("no GPU in use (CUDA_VISIBLE_DEVICES hides them all)")
    try:
        allowed = parse_cpulist(cpus.allowed)
    except ValueError:
        raise CheckSkipped(f"the allowed CPU list {cpus.allowed!r} cannot be read") from None
    index = nvml_index(snapshot)
    findings = []
    far = _far_gpus(gpus, allowed, cpus)
    if far is not None and far:
        findings.append(_far_finding(far, gpus, allowed, cpus, index))
    effective, source = float(len(allowed)), f"Cpus_allowed_list {cpus.allowed}"
    if isinstance(cpus.quota_cpus, float) and cpus.quota_cpus < effective:
        effective, source = cpus.quota_cpus, f"cgroup limit {cpus.quota_cpus:g} CPUs ({cpus.quota_source})"
    if effective < CPUS_PER_GPU * len(gpus):
        findings.append(Finding(
            "cpu.too-few-for-gpus", Severity.WARNING,
            f"The job may use only {effective:g} CPU(s) for {len(gpus)} GPU(s): the input pipeline, "
            "the per-GPU launch threads and NCCL's proxy threads compete for them and the GPUs wait",
            [source, f"{len(gpus)} GPU(s): at least {CPUS_PER_GPU * len(gpus)} CPUs wanted "
             f"({CPUS_PER_GPU} per GPU, more for heavy input pipelines)"],
            fix=_more_cpus_fix(collective.container, len(gpus))
            + " TensorFlow sizes its thread pools by the CPUs it can see, not by a cgroup quota: with a "
            "quota, also set TF_NUM_INTEROP_THREADS / TF_NUM_INTRAOP_THREADS to the quota.",
            links=[TF_THREADS_THREAD, TF_DATA_GUIDE],
        ))
    if not findings:
        nodes = sorted({g.numa_node for g in gpus if isinstance(g.numa_node, int)})
        near = nodes and far is not None
        where = f", on the NUMA node(s) {', '.join(map(str, nodes))} of the GPUs" if near else ""
        findings.append(Finding("cpu.ok", Severity.OK,
                                f"{effective:g} CPU(s) for {len(gpus)} GPU(s){where}"))
    return findings


def _far_gpus(gpus: list[PciGpu], allowed: frozenset[int], cpus: CpuFacts) -> list[PciGpu] | None:
    """The GPUs none of whose local CPUs this process may use (None: cannot tell)."""
    if len(cpus.numa_nodes) < 2:
        return None  # one NUMA node: nothing is far
    known = [(g, parse_cpulist(g.local_cpus)) for g in gpus if isinstance(g.local_cpus, str)]
    if not known:
        return None
    return [g for g, local in known if local and not (local & allowed)]


def _far_finding(far: list[PciGpu], gpus: list[PciGpu], allowed: frozenset[int], cpus: CpuFacts,
                 index: dict[str, int]) -> Finding:
    allowed_nodes = sorted(n for n, text in cpus.numa_nodes.items() if text and parse_cpulist(text) & allowed)
    gpu_nodes = sorted({str(g.numa_node) for g in far if isinstance(g.numa_node, int)})
    evidence = [f"this process may run on CPUs {format_cpulist(allowed)} (NUMA node(s) "
                f"{', '.join(allowed_nodes) or '?'})"]
    evidence += [f"{gpu_label(g.address, index)}: NUMA node {g.numa_node}, local CPUs {g.local_cpus}"
                 for g in far[:8]]
    target = gpu_nodes[0] if len(gpu_nodes) == 1 else ",".join(gpu_nodes)
    if len(far) == len(gpus):
        title = ("The job is pinned to the far socket: it may run only on NUMA node(s) "
                 f"{', '.join(allowed_nodes)}, its GPUs hang off node(s) {', '.join(gpu_nodes)}: every copy "
                 "to and from the GPUs crosses the inter-socket link")
    else:
        title = (f"{len(far)} of {len(gpus)} GPUs are on NUMA node(s) {', '.join(gpu_nodes)} where this "
                 "process may not run: their input copies and NCCL's threads work from the far socket")
    return Finding(
        "cpu.far-from-gpus", Severity.WARNING, title, evidence,
        fix=f"Bind the job to its GPUs' node: `numactl --cpunodebind={target} --membind={target} python "
        "train.py`; under Slurm `srun --cpu-bind=ldoms` or `--gres-flags=enforce-binding`; with one "
        "process per GPU, give each its GPU's local CPUs (`taskset -c LIST`, shown by `nvidia-smi topo -m`). "
        "One process driving GPUs on both sockets should be allowed the CPUs of both. "
        "NCCL_IGNORE_CPU_AFFINITY=1 lets NCCL's own threads run near the GPU anyway.",
        links=[FAR_SOCKET_THREAD, NCCL_ENV_DOC],
    )


def _more_cpus_fix(container: ContainerFacts | Unavailable, n_gpus: int) -> str:
    want = max(CPUS_PER_GPU * n_gpus, 4 * n_gpus)
    runtime = container.runtime if isinstance(container, ContainerFacts) else ""
    if runtime == "kubernetes":
        return f"Request more CPU in the pod spec: resources.limits.cpu: {want} (and requests)."
    if runtime in ("docker", "podman"):
        return (f"Start the container with more CPUs: `{runtime} run --cpus={want} ...` (or without "
                "--cpus / --cpuset-cpus).")
    return (f"Give the job more CPUs: under Slurm `--cpus-per-gpu={max(CPUS_PER_GPU, 4)}` (or "
            "--cpus-per-task), "
            f"elsewhere widen the taskset / numactl CPU list or the cgroup's cpu.max (about {want} CPUs).")

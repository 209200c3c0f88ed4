"""The size of /dev/shm: NCCL's shared-memory transport and Python's multiprocessing live there.

Docker and Kubernetes give a container 64 MiB unless told otherwise; NCCL then fails at init
("failed to extend /dev/shm/nccl-... to N bytes", an "unhandled system error"), and data loaders
using worker processes crash with a bus error.
"""

from __future__ import annotations

from mgpu_doctor.checks.collective_access import NCCL_DEBUG_HINT, NCCL_SHM_DOC, need_collective
from mgpu_doctor.checks.facts_access import need
from mgpu_doctor.model.collective_facts import ContainerFacts, ShmFacts
from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.model.snapshot import Snapshot
from mgpu_doctor.model.unavailable import Unavailable

MIB = 2**20
SHM_TOO_SMALL = 256 * MIB  # below: NCCL init and worker processes fail (Docker's default is 64 MiB)
SHM_RECOMMENDED = 1024 * MIB  # NCCL's troubleshooting guide: --shm-size=1g
SHM_NEARLY_FULL = 64 * MIB
NCCL_SHM_CRASH_THREAD = "https://github.com/pytorch/tutorials/pull/2475"
K8S_EMPTYDIR = "https://kubernetes.io/docs/concepts/storage/volumes/#emptydir"


CODES = ("shm.ok", "shm.missing", "shm.too-small", "shm.small", "shm.nearly-full")


def check_shm(snapshot: Snapshot) -> list[Finding]:
    collective = need_collective(snapshot)
    container = collective.container
    shm = collective.shm
    if isinstance(shm, Unavailable) and shm.cause == "no-shm":
        return [Finding(
            "shm.missing", Severity.WARNING,
            "There is no /dev/shm: NCCL's shared-memory transport and Python multiprocessing cannot "
            "create their segments",
            [str(shm)], fix=grow_shm_fix(container), links=[NCCL_SHM_DOC],
        )]
    shm = need(shm, "/dev/shm")
    findings = []
    evidence = _evidence(shm, snapshot, container)
    if shm.size_bytes < SHM_TOO_SMALL:
        findings.append(Finding(
            "shm.too-small", Severity.WARNING,
            f"/dev/shm is only {_mib(shm.size_bytes)}: NCCL fails to create its shared-memory segments "
            "('failed to extend /dev/shm/nccl-...', an 'unhandled system error') and data-loader worker "
            "processes crash with a bus error",
            evidence, fix=f"{grow_shm_fix(container)} {NCCL_DEBUG_HINT}",
            links=[NCCL_SHM_DOC, NCCL_SHM_CRASH_THREAD],
        ))
    elif shm.size_bytes < SHM_RECOMMENDED:
        findings.append(Finding(
            "shm.small", Severity.INFO,
            f"/dev/shm is {_mib(shm.size_bytes)}, below the 1 GiB NCCL's troubleshooting guide asks for",
            evidence, fix=grow_shm_fix(container), links=[NCCL_SHM_DOC],
        ))
    free = shm.available_bytes
    if isinstance(free, int) and free < min(SHM_NEARLY_FULL, shm.size_bytes // 4):
        leftovers = (f" ({shm.nccl_segments} nccl-* segment(s), {_mib(shm.nccl_segment_bytes)}, left by "
                     "jobs that did not exit cleanly)") if shm.nccl_segments else ""
        findings.append(Finding(
            "shm.nearly-full", Severity.WARNING,
            f"/dev/shm is nearly full: {_mib(free)} of {_mib(shm.size_bytes)} free{leftovers}",
            evidence,
            fix="When no training job is running, remove what is left there (`ls -la /dev/shm`; "
            "`rm /dev/shm/nccl-*`), or make /dev/shm larger: " + grow_shm_fix(container),
            links=[NCCL_SHM_DOC],
        ))
    if not findings:
        findings.append(Finding("shm.ok", Severity.OK, f"{_mib(shm.size_bytes)}"))
    return findings


def grow_shm_fix(container: ContainerFacts | Unavailable) -> str:
    """How to give a job a bigger /dev/shm where it runs."""
    runtime = container.runtime if isinstance(container, ContainerFacts) else ""
    if runtime == "kubernetes":
        return ("Mount a memory-backed volume at /dev/shm in the pod spec: volumes: [{name: dshm, "
                "emptyDir: {medium: Memory, sizeLimit: 2Gi}}] and volumeMounts: [{name: dshm, "
                "mountPath: /dev/shm}] (the memory counts against the pod's limit).")
    if runtime in ("docker", "podman", "containerd"):
        cli = "podman" if runtime == "podman" else "docker"
        return (f"Start the container with a larger /dev/shm: `{cli} run --shm-size=1g --ulimit "
                "memlock=-1 ...` (docker compose: shm_size: 1gb), or share the "
                "host's with --ipc=host.")
    if runtime:
        return (f"Give the {runtime} container a /dev/shm of at least 1 GiB (its --shm-size option or a "
                "tmpfs mount).")
    return ("Make /dev/shm larger: `sudo mount -o remount,size=2G /dev/shm`, and in /etc/fstab for the "
            "next boot: `tmpfs /dev/shm tmpfs defaults,size=2G 0 0`.")


def _evidence(shm: ShmFacts, snapshot: Snapshot, container: ContainerFacts | Unavailable) -> list[str]:
    lines = [f"/dev/shm: {_mib(shm.size_bytes)}"
             + (f", {_mib(shm.available_bytes)} free" if isinstance(shm.available_bytes, int) else "")
             + (f" ({shm.fs_type})" if isinstance(shm.fs_type, str) else "")]
    if isinstance(container, ContainerFacts) and container.runtime:
        lines.append("container: " + ", ".join(container.evidence))
    if snapshot.env.get("NCCL_P2P_DISABLE", "0") not in ("0", ""):
        lines.append("NCCL_P2P_DISABLE is set: every GPU pair goes through shared memory")
    return lines


def _mib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / MIB:.0f} MiB"

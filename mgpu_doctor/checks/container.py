"""Inside a container: did the NVIDIA container runtime give it the GPUs and the driver parts?

The runtime reads NVIDIA_VISIBLE_DEVICES (which GPUs) and NVIDIA_DRIVER_CAPABILITIES (which
driver libraries: ``compute`` for CUDA's libcuda, ``utility`` for nvidia-smi and NVML) from the
container's environment; without the runtime (``docker run`` without ``--gpus``) the variables
from a CUDA base image are there but nothing is injected (NVIDIA Container Toolkit, "Specialized
Configurations with Docker").
"""

from __future__ import annotations

from mgpu_doctor.checks.collective_access import CONTAINER_TOOLKIT_DOC, need_collective
from mgpu_doctor.checks.facts_access import need
from mgpu_doctor.model.collective_facts import ContainerFacts
from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.model.snapshot import Snapshot
from mgpu_doctor.model.unavailable import Unavailable

NO_GPU_VALUES = ("void", "none", "")
K8S_GPU_DOC = "https://kubernetes.io/docs/tasks/manage-gpus/scheduling-gpus/"


CODES = (
    "container.none",
    "container.ok",
    "container.no-gpu-injected",
    "container.gpus-not-requested",
    "container.gpu-count-differs",
    "container.no-compute-capability",
    "container.no-utility-capability",
)


def check_container(snapshot: Snapshot) -> list[Finding]:
    container = need(need_collective(snapshot).container, "container facts")
    if not container.runtime:
        return [Finding("container.none", Severity.OK, "not in a container")]
    visible = snapshot.env.get("NVIDIA_VISIBLE_DEVICES")
    caps = snapshot.env.get("NVIDIA_DRIVER_CAPABILITIES")
    nvml = snapshot.nvml
    nvml_gpus = None if isinstance(nvml, Unavailable) else len(nvml.gpus)
    evidence = _evidence(container, visible, caps, nvml_gpus, nvml)
    start = _start_with_gpus(container.runtime)
    findings = []
    if visible is not None and visible.strip().lower() in NO_GPU_VALUES:
        findings.append(Finding(
            "container.gpus-not-requested", Severity.WARNING,
            f"NVIDIA_VISIBLE_DEVICES={visible or '(empty)'}: the NVIDIA runtime gives this container no GPU",
            evidence, fix=f"{start} (NVIDIA_VISIBLE_DEVICES=all, or a list of GPU indexes or UUIDs).",
            links=[CONTAINER_TOOLKIT_DOC],
        ))
    elif not container.device_nodes and nvml_gpus is None:
        asked = visible is not None
        findings.append(Finding(
            "container.no-gpu-injected", Severity.ERROR if asked else Severity.INFO,
            (f"NVIDIA_VISIBLE_DEVICES={visible} asks for GPUs, but none was injected: the container was "
             "started without the NVIDIA runtime" if asked else
             "This container has no NVIDIA GPU device (/dev/nvidia0, ...) and no driver library"),
            evidence, fix=f"{start}.", links=[CONTAINER_TOOLKIT_DOC],
        ))
    elif visible is not None and nvml_gpus is not None and (wanted := _listed(visible)) is not None \
            and wanted != nvml_gpus:
        findings.append(Finding(
            "container.gpu-count-differs", Severity.WARNING,
            f"NVIDIA_VISIBLE_DEVICES names {wanted} GPU(s) but NVML sees {nvml_gpus} in this container",
            evidence,
            fix="Check the indexes / UUIDs in NVIDIA_VISIBLE_DEVICES against `nvidia-smi -L` on the host; "
            "under Kubernetes let the device plugin choose (resources.limits nvidia.com/gpu) instead of "
            "setting the variable yourself.",
            links=[CONTAINER_TOOLKIT_DOC],
        ))
    findings += _capabilities(caps, container, nvml_gpus, snapshot, evidence)
    if not findings:
        findings.append(Finding(
            "container.ok", Severity.OK,
            f"{container.runtime} container: {len(container.device_nodes)} GPU device(s) injected"
            + (f", NVML sees {nvml_gpus}" if nvml_gpus is not None else ""),
        ))
    return findings


def _capabilities(caps: str | None, container: ContainerFacts, nvml_gpus: int | None, snapshot: Snapshot,
                  evidence: list[str]) -> list[Finding]:
    words = {w.strip().lower() for w in (caps or "").split(",") if w.strip()}
    if "all" in words:
        return []
    findings = []
    no_libcuda = _libcuda_missing(snapshot)
    if (caps is not None and "compute" not in words) or (caps is None and nvml_gpus and no_libcuda):
        findings.append(Finding(
            "container.no-compute-capability", Severity.ERROR,
            "The NVIDIA runtime did not mount CUDA's driver library (libcuda.so.1) into this container: "
            "TensorFlow finds no GPU" + ("" if caps is not None else " (NVIDIA_DRIVER_CAPABILITIES unset: "
                                         "the runtime's default is utility only)"),
            evidence + (["libcuda: not found on the library search path"] if no_libcuda else []),
            fix="Set NVIDIA_DRIVER_CAPABILITIES=compute,utility for the container (-e on docker run, ENV in "
            "the Dockerfile, env: in the pod spec), or start it with --gpus all, which sets it.",
            links=[CONTAINER_TOOLKIT_DOC],
        ))
    if caps is not None and "utility" not in words and (container.device_nodes or nvml_gpus):
        findings.append(Finding(
            "container.no-utility-capability", Severity.WARNING,
            "NVIDIA_DRIVER_CAPABILITIES has no 'utility': nvidia-smi and NVML are not mounted, so "
            "neither the doctor nor monitoring can see the GPUs' state",
            evidence,
            fix="Add utility: NVIDIA_DRIVER_CAPABILITIES=compute,utility.",
            links=[CONTAINER_TOOLKIT_DOC],
        ))
    return findings


def _libcuda_missing(snapshot: Snapshot) -> bool:
    libraries = snapshot.libraries
    if isinstance(libraries, Unavailable):
        return False
    return not any(c.name == "cuda" for c in libraries.copies)


def _listed(visible: str) -> int | None:
    """How many GPUs a list value names (None for 'all' and other words)."""
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if not entries or any(e.lower() == "all" for e in entries):
        return None
    return len(set(entries))


def _start_with_gpus(runtime: str) -> str:
    if runtime == "kubernetes":
        return ("Request GPUs in the pod spec (resources.limits: nvidia.com/gpu: N), with the NVIDIA device "
                "plugin or GPU operator installed on the node")
    if runtime == "podman":
        return "Start the container with the GPUs: `podman run --device nvidia.com/gpu=all ...` (CDI)"
    return ("Start the container with the GPUs: `docker run --gpus all ...` (NVIDIA Container Toolkit "
            "installed on the host), or --runtime=nvidia")


def _evidence(container: ContainerFacts, visible: str | None, caps: str | None, nvml_gpus: int | None,
              nvml: object) -> list[str]:
    lines = ["container: " + ", ".join(container.evidence),
             f"NVIDIA_VISIBLE_DEVICES={visible if visible is not None else '(not set)'}",
             f"NVIDIA_DRIVER_CAPABILITIES={caps if caps is not None else '(not set)'}",
             "GPU device nodes: " + (", ".join(container.device_nodes) or "none")]
    lines.append(f"NVML: {nvml_gpus} GPU(s)" if nvml_gpus is not None else f"NVML: {nvml}")
    if isinstance(container.driver_gpus, list):
        lines.append(f"/proc/driver/nvidia/gpus: {', '.join(container.driver_gpus) or 'none'}")
    return lines

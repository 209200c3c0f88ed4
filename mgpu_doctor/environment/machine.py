"""The machine facts the matrix matches: how many GPUs train and their compute capabilities and
names, how many workers (TF_CONFIG), the platform and CPU architecture, the GPUs' interconnect and
peer-to-peer access, Keras's backend."""

from __future__ import annotations

from mgpu_doctor.environment.tf_config import read_tf_config
from mgpu_doctor.matrix.vocabulary import DEFAULT_BACKEND
from mgpu_doctor.model.snapshot import Snapshot
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.record import field, record


@record
class MachineFacts:
    """What the matrix matches about the machine itself (None: not known, with why in ``missing``)."""

    gpus: int | None = None
    workers: int | None = None
    compute_capabilities: tuple[str, ...] | None = None
    gpu_names: tuple[str, ...] | None = None
    platform: str | None = None
    cpu_vendor: str | None = None
    cpu_arch: str | None = None
    interconnect: str | None = None
    peer_access: str | None = None
    backend: str | None = None
    missing: dict[str, str] = field(default_factory=dict)
    # The GPU count is the training's, not this machine's (training/apply.py): unknown, it is a
    # condition of the training ("applies when training on ..."), not a fact to find here.
    gpus_of_training: bool = False


def machine_facts(snapshot: Snapshot) -> MachineFacts:
    nvml, tf = snapshot.nvml, snapshot.tensorflow
    missing: dict[str, str] = {"cpu_vendor": "not in the snapshot"}
    workers = _workers(snapshot.env.get("TF_CONFIG"))
    if workers is None:
        missing["workers"] = "TF_CONFIG is not set" if "TF_CONFIG" not in snapshot.env else \
            "TF_CONFIG has no cluster"
    gpus: int | None = None
    ccs: tuple[str, ...] | None = None
    names: tuple[str, ...] | None = None
    interconnect: str | None = None
    peer_access: str | None = None
    if isinstance(nvml, Unavailable) and nvml.reason == "absent":
        gpus = 0  # no NVIDIA driver at all: no GPU to train on (an NVML that failed says nothing)
        for key in ("compute_capability", "gpu_name", "interconnect", "peer_access"):
            missing[key] = "no NVIDIA driver"
    elif isinstance(nvml, Unavailable):
        for key in ("gpus", "compute_capability", "gpu_name", "interconnect", "peer_access"):
            missing[key] = f"NVML {nvml.reason}"
    else:
        gpus = len(nvml.gpus)
        known_ccs = [g.compute_capability for g in nvml.gpus if isinstance(g.compute_capability, str)]
        ccs = tuple(known_ccs) if known_ccs and len(known_ccs) == len(nvml.gpus) else None
        names = tuple(g.name for g in nvml.gpus)
        interconnect = _interconnect(snapshot)
        if interconnect is None:
            missing["interconnect"] = "no GPU-to-GPU link facts" if len(nvml.gpus) > 1 else "one GPU"
        peer_access = _peer_access(snapshot)
        if peer_access is None:
            missing["peer_access"] = "NVML gave no P2P status between the GPUs" if len(nvml.gpus) > 1 \
                else "one GPU"
    if not isinstance(tf, Unavailable) and not isinstance(tf.physical_devices, Unavailable):
        # What TensorFlow sees is what training gets (CUDA_VISIBLE_DEVICES, MIG applied).
        gpus = sum(1 for d in tf.physical_devices if d.device_type == "GPU")
        if ccs is None or names is None:
            # Without NVML (a pasted log), TensorFlow's own device lines name the GPUs and their
            # compute capabilities ("Found device 0 ... computeCapability: 8.6", "major: 7 minor: 0").
            seen = [d for d in tf.physical_devices if d.device_type == "GPU"]
            from_tf = [_capability(d.details.get("compute_capability", "")) for d in seen]
            if ccs is None and seen and all(from_tf):
                ccs = tuple(from_tf)
                missing.pop("compute_capability", None)
            if names is None and seen and all(d.details.get("device_name") for d in seen):
                names = tuple(d.details["device_name"] for d in seen)
                missing.pop("gpu_name", None)
        if gpus:
            missing.pop("gpus", None)
    return MachineFacts(gpus=gpus, workers=workers, compute_capabilities=ccs, gpu_names=names,
                        platform=_platform(snapshot), cpu_arch=_cpu_arch(snapshot, missing),
                        interconnect=interconnect, peer_access=peer_access,
                        backend=_backend(snapshot), missing=missing)


def _capability(text: str) -> str:
    """"(8, 6)" (TensorFlow's device details) -> "8.6"; "" when it is not a capability."""
    parts = [p.strip() for p in text.strip("() ").split(",")]
    return ".".join(parts) if len(parts) == 2 and all(p.isdecimal() for p in parts) else ""


def _workers(tf_config: str | None) -> int | None:
    return read_tf_config(tf_config).workers if tf_config else None


def _interconnect(snapshot: Snapshot) -> str | None:
    nvml = snapshot.nvml
    if isinstance(nvml, Unavailable) or len(nvml.gpus) < 2 or not nvml.links:
        return None
    counts = [lk.nvlink_links for lk in nvml.links]
    if any(isinstance(n, int) and n > 0 for n in counts):
        return "nvlink"
    if all(isinstance(n, int) for n in counts):
        return "pcie"
    return None


def lacks_peer_access(status: str | Unavailable) -> bool:
    """NVML's P2P status between two GPUs says one cannot read the other's memory directly
    (not_supported, chipset_not_supported, disabled_by_regkey, ...); "unknown" says nothing."""
    return isinstance(status, str) and status not in ("ok", "unknown")


def _peer_access(snapshot: Snapshot) -> str | None:
    """"unsupported" when NVML says some GPU pair cannot read the other's memory directly,
    "supported" when it says every pair can; None when it did not say for every pair."""
    nvml = snapshot.nvml
    if isinstance(nvml, Unavailable) or len(nvml.gpus) < 2 or not nvml.links:
        return None
    statuses = [lk.p2p_read for lk in nvml.links]
    if any(lacks_peer_access(s) for s in statuses):
        return "unsupported"
    if all(s == "ok" for s in statuses):
        return "supported"
    return None


# platform.machine()'s names for the architectures the matrix knows (macOS says arm64, Windows AMD64)
_ARCH_NAMES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


def _cpu_arch(snapshot: Snapshot, missing: dict[str, str]) -> str | None:
    machine = snapshot.host.machine
    arch = _ARCH_NAMES.get(machine.strip().lower())
    if arch is None:
        missing["cpu_arch"] = f"machine {machine!r} is neither x86_64 nor aarch64" if machine else \
            "the host's machine type is not known"
    return arch


def _platform(snapshot: Snapshot) -> str | None:
    host = snapshot.host
    name = host.os_name.lower()
    if name == "linux":
        return "wsl" if "microsoft" in host.kernel.lower() else "linux"
    if name == "windows":
        return "windows"
    return None


def _backend(snapshot: Snapshot) -> str:
    """Keras 3's backend: KERAS_BACKEND, else its default, TensorFlow."""
    return snapshot.env.get("KERAS_BACKEND", "").strip().lower() or DEFAULT_BACKEND

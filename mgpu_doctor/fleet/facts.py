"""The facts ``mgpu-doctor fleet`` compares: one line per fact, read from a snapshot.

Adding a compared fact = one line in :data:`COMPARED_FACTS` (and, when a difference in it
breaks or slows training, a rule in :mod:`mgpu_doctor.fleet.checks`). A reader returns the
value as text, or the snapshot's :class:`Unavailable` when the fact was not gathered there.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TypeVar

from mgpu_doctor.environment.readings import ResolvedVersion
from mgpu_doctor.environment.resolve import ResolvedEnvironment
from mgpu_doctor.environment.tf_config import read_tf_config
from mgpu_doctor.fleet.collective import COLLECTIVE_FACTS
from mgpu_doctor.fleet.compare import Fact, FactFamily, Value
from mgpu_doctor.model.redact import host_hash
from mgpu_doctor.model.snapshot import NvmlFacts, Snapshot, TensorFlowFacts
from mgpu_doctor.model.unavailable import Unavailable

# Environment variables that differ between the nodes of one job by design (ranks, node ids,
# the GPUs Slurm assigned, the doctor's own plumbing). TF_CONFIG differs in its task by
# design; its cluster part is compared as a fact of its own.
PER_NODE_ENV_PREFIXES = ("SLURM_", "OMPI_", "MGPU_DOCTOR_")
PER_NODE_ENV_NAMES = frozenset({"TF_CONFIG"})
NOT_SET = "not set"


Extract = Callable[[ResolvedEnvironment], Value]
T = TypeVar("T")


def _snapshot(read: Callable[[Snapshot], T]) -> Callable[[ResolvedEnvironment], T]:
    def extract(env: ResolvedEnvironment) -> T:
        assert env.snapshot is not None  # every node is a machine
        return read(env.snapshot)
    return extract


def _nvml(read: Callable[[NvmlFacts], Value]) -> Extract:
    return _snapshot(lambda s: s.nvml if isinstance(s.nvml, Unavailable) else read(s.nvml))


def _tf(read: Callable[[TensorFlowFacts], Value]) -> Extract:
    return _snapshot(lambda s: s.tensorflow if isinstance(s.tensorflow, Unavailable) else read(s.tensorflow))


def _version(pick: Callable[[ResolvedEnvironment], ResolvedVersion]) -> Extract:
    """A resolved version: the one value every check of the node uses too."""
    def extract(env: ResolvedEnvironment) -> Value:
        value = pick(env)
        if value.chosen is not None:
            return value.text
        return value.missing or Unavailable("absent", "not known")
    return extract


def _tf_keras(env: ResolvedEnvironment) -> Value:
    view = env.tf_keras_is
    if view is None or view.origin.name != "IMPORTED":
        return env.snapshot.tensorflow if env.snapshot is not None and isinstance(
            env.snapshot.tensorflow, Unavailable) else Unavailable("absent", "tf.keras was not imported")
    return view.name


def _distinct(values: list[str]) -> str:
    # Without counts: a node with fewer GPUs of the same model differs in gpu.count only.
    return ", ".join(sorted(set(values))) if values else "none"


def _gpu_models(nvml: NvmlFacts) -> str:
    return _distinct([g.name for g in nvml.gpus])


def _gpu_memory(nvml: NvmlFacts) -> str:
    return _distinct([f"{g.memory_total_bytes / 2**30:.1f} GiB" for g in nvml.gpus])


def _compute_capability(nvml: NvmlFacts) -> str:
    found = sorted({str(g.compute_capability) if isinstance(g.compute_capability, str) else "unknown"
                    for g in nvml.gpus})
    return ", ".join(found) if found else "none"


def _mig(nvml: NvmlFacts) -> str:
    on = [g.index for g in nvml.gpus if g.mig_mode is True]
    if on:
        return "on (GPU " + ", ".join(str(i) for i in on) + ")"
    if nvml.gpus and all(isinstance(g.mig_mode, Unavailable) for g in nvml.gpus):
        return "not supported"
    return "off"


def _tf_gpus(tf: TensorFlowFacts) -> Value:
    devices = tf.physical_devices
    if isinstance(devices, Unavailable):
        return devices
    return str(sum(1 for d in devices if d.device_type == "GPU"))


def _packages(snapshot: Snapshot) -> dict[str, str] | Unavailable:
    pkgs = snapshot.packages
    return pkgs if isinstance(pkgs, Unavailable) else dict(pkgs.versions)


def _loaded_libraries(snapshot: Snapshot) -> dict[str, str] | Unavailable:
    """The CUDA libraries TensorFlow mapped, by name without the .so suffix: libcudnn -> path."""
    tf = snapshot.tensorflow
    if isinstance(tf, Unavailable):
        return tf
    paths: dict[str, list[str]] = {}
    for path in tf.loaded_libraries:
        stem = os.path.basename(path).split(".so", 1)[0]
        paths.setdefault(stem, []).append(path)
    return {stem: ", ".join(sorted(found)) for stem, found in paths.items()}


def _libraries_in_use(env: ResolvedEnvironment) -> dict[str, str] | Unavailable:
    """Version of each CUDA library in use (loaded by TensorFlow, else the loader's pick by soname).

    libcuda is left out: it is the driver's and compared as the driver version.
    """
    assert env.snapshot is not None
    if isinstance(env.snapshot.libraries, Unavailable):
        return env.snapshot.libraries
    return {name: lib.version or "version unknown" for name, lib in env.libraries.items()
            if name != "cuda" and lib.copy is not None}


def _built(pick: Callable[[ResolvedEnvironment], ResolvedVersion]) -> Extract:
    """What TensorFlow was built for; a CPU-only build says so (a real value, not unknown)."""
    def extract(env: ResolvedEnvironment) -> Value:
        if env.cpu_only_build:
            return "none (not a CUDA build)"
        return _version(pick)(env)
    return extract


def _env(snapshot: Snapshot) -> dict[str, str]:
    return {k: v for k, v in snapshot.env.items()
            if k not in PER_NODE_ENV_NAMES and not k.startswith(PER_NODE_ENV_PREFIXES)}


def tf_config_of(snapshot: Snapshot) -> dict[str, object] | None | str:
    """TF_CONFIG as a dict, None when not set, or why it cannot be read as text."""
    reading = read_tf_config(snapshot.env.get("TF_CONFIG"))
    if reading.state == "unset":
        return None
    return reading.data if reading.state == "ok" else reading.problem


def _tf_config_cluster(snapshot: Snapshot) -> str:
    """The cluster, host names as redaction writes them: a redacted snapshot hashes only its own
    node's name, so node1 lists ``host-…:23456, node2:23456`` and node2 ``node1:23456, host-…``
    for one and the same cluster."""
    config = tf_config_of(snapshot)
    if config is None:
        return NOT_SET
    if isinstance(config, str):
        return config
    cluster = config.get("cluster")
    if isinstance(cluster, dict):
        cluster = {role: [_hashed_address(a) for a in tasks] if isinstance(tasks, list) else tasks
                   for role, tasks in cluster.items()}
    return json.dumps(cluster, sort_keys=True)


def _hashed_address(address: object) -> object:
    if not isinstance(address, str) or ":" not in address or address.startswith("["):
        return address  # not host:port, or an IPv6 literal: compared as written
    host, port = address.rsplit(":", 1)
    if not host or all(c.isdigit() or c == "." for c in host):
        return address  # an IPv4 address is not redacted
    return f"{host_hash(host.split('.')[0])}:{port}"


COMPARED_FACTS: tuple[Fact | FactFamily, ...] = (
    Fact("host.os", "OS", _snapshot(lambda s: s.host.os_release)),
    Fact("host.kernel", "Linux kernel", _snapshot(lambda s: s.host.kernel)),
    Fact("host.libc", "C library", _snapshot(lambda s: s.host.libc)),
    Fact("python.version", "Python", _version(lambda e: e.python)),
    Fact("nvml.driver", "NVIDIA driver", _version(lambda e: e.driver)),
    Fact("nvml.cuda_driver", "CUDA supported by the driver", _nvml(lambda n: n.cuda_driver_version)),
    Fact("gpu.count", "GPUs (NVML)", _nvml(lambda n: str(len(n.gpus)))),
    Fact("gpu.models", "GPU models", _nvml(_gpu_models)),
    Fact("gpu.memory", "GPU memory", _nvml(_gpu_memory)),
    Fact("gpu.compute_capability", "GPU compute capability", _nvml(_compute_capability)),
    Fact("gpu.mig", "MIG", _nvml(_mig)),
    Fact("tensorflow.version", "TensorFlow", _version(lambda e: e.tensorflow)),
    Fact("tensorflow.gpus", "GPUs TensorFlow sees", _tf(_tf_gpus)),
    Fact("tensorflow.keras", "tf.keras is", _tf_keras),
    Fact("tensorflow.cuda_build", "CUDA TensorFlow was built for", _built(lambda e: e.built_cuda)),
    Fact("tensorflow.cudnn_build", "cuDNN TensorFlow was built for", _built(lambda e: e.built_cudnn)),
    FactFamily("package", "package", _snapshot(_packages), missing="not installed"),
    FactFamily("library", "library TensorFlow loaded", _snapshot(_loaded_libraries),
               missing="not loaded"),
    FactFamily("cuda-lib", "CUDA library in use", _libraries_in_use, missing="not found"),
    FactFamily("env", "env", _snapshot(_env), missing=NOT_SET),
    Fact("tf_config.cluster", "TF_CONFIG cluster", _snapshot(_tf_config_cluster)),
) + COLLECTIVE_FACTS

"""Every check, in the order they are reported. Adding a check: one module + one line here
(its name, title, section and the finding codes it declares; see CONTRIBUTING.md).

Checks judge a :class:`~mgpu_doctor.environment.resolve.ResolvedEnvironment`. Rules over versions take it
whole (and `matrix query` runs them on the versions it names); checks of a machine's GPUs,
files and imports take its snapshot (``on_machine``).

May import: errors, record, process, model, matrix, environment.
"""

from __future__ import annotations

from collections.abc import Callable

from mgpu_doctor.checks import (
    agreement,
    and_cuda,
    container,
    cpu_affinity,
    cuda_environment,
    cuda_libraries,
    driver_cuda,
    duplicate_libraries,
    gpu_architecture,
    gpus,
    grpc_proxy,
    interpreter,
    jax_backend,
    known_issues,
    nccl_env,
    packages,
    pcie_p2p,
    ptxas,
    shm,
    snapshot_values,
    tensorflow,
    tensorflow_requires,
    tf2_behavior,
    tf_log_level,
)
from mgpu_doctor.checks.base import Check, CheckSkipped, Scope, run_check
from mgpu_doctor.checks.facts_access import need_machine
from mgpu_doctor.environment.resolve import ResolvedEnvironment
from mgpu_doctor.model.findings import Finding, Section
from mgpu_doctor.model.snapshot import Snapshot

Rule = Callable[[ResolvedEnvironment], list[Finding]]


def on_machine(check: Callable[[Snapshot], list[Finding]]) -> Rule:
    """A check of the machine's own facts (skipped for a list of versions)."""
    def run(env: ResolvedEnvironment) -> list[Finding]:
        return check(need_machine(env))
    run.__name__ = getattr(check, "__name__", "check")
    return run


def machine(name: str, title: str, check: Callable[[Snapshot], list[Finding]], section: Section,
            codes: tuple[str, ...]) -> Check[ResolvedEnvironment]:
    return Check(name, title, on_machine(check), Scope.MACHINE, section, codes)


def machine_env(name: str, title: str, check: Rule, section: Section,
                codes: tuple[str, ...]) -> Check[ResolvedEnvironment]:
    """A check of the machine that also reads resolved versions."""
    return Check(name, title, check, Scope.MACHINE, section, codes)


def versions(name: str, title: str, rule: Rule, section: Section,
             codes: tuple[str, ...]) -> Check[ResolvedEnvironment]:
    return Check(name, title, rule, Scope.VERSIONS, section, codes)


GPUS, TENSORFLOW, LIBRARIES, HOST = Section.GPUS, Section.TENSORFLOW, Section.CUDA_LIBRARIES, Section.HOST

# name, title, the check, its section in the human report, the finding codes it can emit.
CHECKS: tuple[Check[ResolvedEnvironment], ...] = (
    machine("snapshot-values", "The snapshot's values are possible", snapshot_values.check_snapshot_values,
            GPUS, snapshot_values.CODES),
    machine("gpus", "NVIDIA driver and GPUs", gpus.check_gpus_present, GPUS, gpus.PRESENT_CODES),
    machine("cuda-visible-devices", "CUDA_VISIBLE_DEVICES names real GPUs",
            tensorflow.check_cuda_visible_devices, GPUS, tensorflow.VISIBLE_DEVICES_CODES),
    machine("gpu-memory-in-use", "GPU memory is free", gpus.check_gpu_memory_in_use, GPUS, gpus.MEMORY_CODES),
    machine("gpu-ecc", "No uncorrected ECC errors", gpus.check_gpu_ecc, GPUS, gpus.ECC_CODES),
    machine("gpu-throttling", "GPUs are not slowed down", gpus.check_gpu_throttling, GPUS,
            gpus.THROTTLING_CODES),
    machine("gpu-compute-mode", "GPUs accept compute work", gpus.check_gpu_compute_mode, GPUS,
            gpus.COMPUTE_MODE_CODES),
    machine("gpu-mig", "MIG does not split the GPUs", gpus.check_gpu_mig, GPUS, gpus.MIG_CODES),
    machine("gpu-pcie-link", "PCIe links run at full width", gpus.check_gpu_pcie_link, GPUS,
            gpus.PCIE_LINK_CODES),
    machine("gpu-uniformity", "The GPUs are all alike", gpus.check_gpu_uniformity, GPUS,
            gpus.UNIFORMITY_CODES),
    machine("cuda-device-order", "CUDA and nvidia-smi number GPUs alike", gpus.check_cuda_device_order, GPUS,
            gpus.DEVICE_ORDER_CODES),
    machine("interpreter", "The diagnosed Python works", interpreter.check_interpreter, TENSORFLOW,
            interpreter.CODES),
    machine("tensorflow-import", "TensorFlow imports", tensorflow.check_tensorflow_import, TENSORFLOW,
            tensorflow.IMPORT_CODES),
    machine("tensorflow-distributions", "One TensorFlow distribution installed",
            packages.check_tensorflow_distributions, TENSORFLOW, packages.DISTRIBUTIONS_CODES),
    machine_env("versions-agree", "Installed and imported versions agree", agreement.check_versions_agree,
                TENSORFLOW, agreement.CODES),
    versions("keras", "Keras matches TensorFlow", packages.check_keras, TENSORFLOW, packages.KERAS_CODES),
    versions("python", "Python is one TensorFlow is built for", packages.check_python_for_tensorflow,
             TENSORFLOW, packages.PYTHON_CODES),
    versions(tensorflow_requires.NAME, tensorflow_requires.TITLE,
             tensorflow_requires.check_tensorflow_requires, TENSORFLOW, tensorflow_requires.CODES),
    machine("tensorflow-gpus", "TensorFlow sees the GPUs NVML sees", tensorflow.check_tensorflow_gpus,
            TENSORFLOW, tensorflow.GPUS_CODES),
    machine("jax-gpus", "JAX sees the GPUs NVML sees", jax_backend.check_jax_gpus, TENSORFLOW,
            jax_backend.GPUS_CODES),
    machine("jax-preallocation", "JAX's preallocation leaves room for the GPUs' other processes",
            jax_backend.check_jax_preallocation, TENSORFLOW, jax_backend.PREALLOCATION_CODES),
    machine_env("keras-backend-jax", "Keras 3 set to run on JAX finds JAX",
                jax_backend.check_keras_backend_jax, TENSORFLOW, jax_backend.KERAS_BACKEND_CODES),
    machine_env("tf2-behavior", "TensorFlow 1.x runs in the mode its code was written for",
                tf2_behavior.check_tf2_behavior, TENSORFLOW, tf2_behavior.CODES),
    machine_env("tensorflow-log-level", "TensorFlow's log shows why a CUDA library did not load",
                tf_log_level.check_tensorflow_log_level, TENSORFLOW, tf_log_level.CODES),
    versions("cuda-libraries", "CUDA and cuDNN libraries fit TensorFlow's build",
             cuda_libraries.check_tensorflow_build_libraries, LIBRARIES, cuda_libraries.CODES),
    versions("and-cuda-wheels", "nvidia-* wheels fit tensorflow[and-cuda]", and_cuda.check_and_cuda_wheels,
             LIBRARIES, and_cuda.CODES),
    machine("library-copies", "One version of each CUDA library on the search path",
            duplicate_libraries.check_library_copies, LIBRARIES, duplicate_libraries.CODES),
    versions("driver-cuda", "The driver is new enough for the CUDA runtime",
             driver_cuda.check_driver_for_cuda, LIBRARIES, driver_cuda.CODES),
    versions("gpu-architecture", "TensorFlow has code for these GPUs",
             gpu_architecture.check_gpu_architectures, LIBRARIES, gpu_architecture.CODES),
    machine_env("ptxas", "ptxas is there for XLA", ptxas.check_ptxas, LIBRARIES, ptxas.CODES),
    machine_env("cuda-environment", "LD_LIBRARY_PATH and CUDA_HOME point at the CUDA in use",
                cuda_environment.check_cuda_environment, LIBRARIES, cuda_environment.CODES),
    machine("gpu-interconnect", "GPUs can exchange gradients directly", gpus.check_gpu_interconnect, HOST,
            gpus.INTERCONNECT_CODES),
    machine("pcie-p2p", "IOMMU and PCIe ACS do not redirect GPU peer-to-peer traffic",
            pcie_p2p.check_pcie_p2p, HOST, pcie_p2p.CODES),
    machine("shared-memory", "/dev/shm is large enough for NCCL and data loaders", shm.check_shm, HOST,
            shm.CODES),
    machine("cpu-affinity", "The job runs on enough CPUs near its GPUs", cpu_affinity.check_cpu_affinity,
            HOST, cpu_affinity.CODES),
    machine("nccl-environment", "NCCL settings fit this machine", nccl_env.check_nccl_environment, HOST,
            nccl_env.CODES),
    machine_env("grpc-proxy", "TensorFlow's workers reach each other without a proxy",
                grpc_proxy.check_grpc_proxy, HOST, grpc_proxy.CODES),
    machine("container-gpus", "The container got its GPUs and driver libraries", container.check_container,
            HOST, container.CODES),
    versions(known_issues.NAME, known_issues.TITLE, known_issues.check_known_issues, Section.KNOWN_ISSUES,
             known_issues.CODES),
)

CHECK_NAMES = tuple(c.name for c in CHECKS)
VERSION_RULES = tuple(c for c in CHECKS if c.scope is Scope.VERSIONS)

__all__ = ["CHECKS", "CHECK_NAMES", "VERSION_RULES", "Check", "CheckSkipped", "Scope", "run_check",
           "select_checks"]


class UnknownCheckError(ValueError):
    pass


def select_checks(
    only: list[str] | None, skip: list[str] | None
) -> tuple[Check[ResolvedEnvironment], ...]:
    """The registry narrowed by ``--checks`` and ``--skip`` (names validated)."""
    for name in (only or []) + (skip or []):
        if name not in CHECK_NAMES:
            raise UnknownCheckError(
                f"unknown check {name!r}; known checks: {', '.join(CHECK_NAMES)}"
            )
    return tuple(
        c for c in CHECKS
        if (not only or c.name in only) and c.name not in (skip or [])
    )

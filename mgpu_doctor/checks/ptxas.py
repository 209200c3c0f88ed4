"""ptxas for XLA, and ``--xla_gpu_cuda_data_dir`` pointing at a real CUDA directory."""

from __future__ import annotations

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.checks.facts_access import need_libraries, need_machine
from mgpu_doctor.checks.library_evidence import where_found
from mgpu_doctor.environment.library_copies import best_version
from mgpu_doctor.environment.resolve import ResolvedEnvironment
from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.model.snapshot import DirKind
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.model.versions import major_minor

CODES = ("ptxas.ok", "ptxas.missing", "ptxas.older-than-runtime", "xla.cuda-data-dir-missing")


def check_ptxas(env: ResolvedEnvironment) -> list[Finding]:
    """ptxas for XLA, and --xla_gpu_cuda_data_dir pointing at a real CUDA directory."""
    snapshot = need_machine(env)
    libs = need_libraries(snapshot)
    if env.cpu_only_build:
        raise CheckSkipped(f"TensorFlow {env.tensorflow.text} is a CPU-only build: "
                           "XLA does not compile for GPUs")
    if isinstance(snapshot.nvml, Unavailable) or not snapshot.nvml.gpus:
        raise CheckSkipped("no GPU: XLA does not compile GPU kernels here")
    findings = []
    for entry in libs.search_dirs:
        if entry.kind is DirKind.XLA_DATA_DIR and not entry.exists:
            findings.append(Finding(
                "xla.cuda-data-dir-missing", Severity.ERROR,
                f"XLA_FLAGS --xla_gpu_cuda_data_dir={entry.path} points nowhere",
                [f"XLA_FLAGS={snapshot.env.get('XLA_FLAGS', '?')}"],
                fix="Point it at a CUDA toolkit directory that has bin/ptxas and nvvm/libdevice "
                "(for example /usr/local/cuda), or remove the flag.",
            ))
    ptxas = [c for c in libs.copies if c.name == "ptxas"]
    if not ptxas:
        findings.append(Finding(
            "ptxas.missing", Severity.WARNING,
            "No ptxas found: XLA (jit_compile, Keras 3's default on GPU) cannot compile kernels itself",
            ["searched: PATH, CUDA_HOME/CUDA_PATH, /usr/local/cuda*, the pip nvidia-cuda-nvcc wheel"],
            fix="pip install nvidia-cuda-nvcc-cu12 (or the CUDA toolkit), or compile with jit_compile=False.",
        ))
        return findings
    first = next((c for c in ptxas if c.on_search_path), ptxas[0])
    cudart = env.libraries.get("cudart")
    runtime = cudart.copy if cudart is not None else None
    ptx_version = best_version(first)[0]
    if runtime is not None and ptx_version:
        have, want = major_minor(ptx_version), major_minor(best_version(runtime)[0])
        if have is not None and want is not None and have < want:
            findings.append(Finding(
                "ptxas.older-than-runtime", Severity.WARNING,
                f"ptxas {ptx_version} is older than the CUDA runtime {best_version(runtime)[0]}",
                [f"ptxas: {where_found(first, first.found_by)}",
                 f"runtime: {where_found(runtime, runtime.found_by)}"],
                fix="Put a ptxas at least as new as the runtime first on PATH (pip install "
                f"nvidia-cuda-nvcc-cu{want[0]}); XLA may refuse an old one or miscompile.",
            ))
    if not findings:
        findings.append(Finding("ptxas.ok", Severity.OK, f"version {ptx_version or 'unknown'}",
                                [where_found(first, first.found_by)]))
    return findings

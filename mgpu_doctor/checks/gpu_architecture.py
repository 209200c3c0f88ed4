"""Each GPU's compute capability against the architectures TensorFlow was compiled for."""

from __future__ import annotations

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.checks.compiled_architectures import compiled_archs
from mgpu_doctor.checks.facts_access import need, need_gpus
from mgpu_doctor.checks.tensorflow_build import TF_SOURCE_DOC
from mgpu_doctor.environment.resolve import ResolvedEnvironment
from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.model.versions import major_minor

CODES = ("gpu-arch.native", "gpu-arch.ptx-jit", "gpu-arch.unsupported")


def check_gpu_architectures(env: ResolvedEnvironment) -> list[Finding]:
    """Each GPU's compute capability against the architectures TensorFlow was compiled for."""
    by_cc: dict[str, list[str]] = {}
    if env.snapshot is not None:
        nvml = need_gpus(env.snapshot)
        if not env.compiled_archs:  # else from the build info, or the table when TF was not imported
            need(env.snapshot.tensorflow, "TensorFlow")
        for gpu in nvml.gpus:
            if isinstance(gpu.compute_capability, str):
                by_cc.setdefault(gpu.compute_capability, []).append(str(gpu.index))
        if not by_cc:
            raise CheckSkipped("NVML reports no compute capability")
    elif env.machine.compute_capabilities:
        by_cc = {cc: [] for cc in env.machine.compute_capabilities}
    else:
        raise CheckSkipped("no compute capability named")
    if env.cpu_only_build:
        raise CheckSkipped(f"TensorFlow {env.tensorflow.text} is a CPU-only build")
    text = env.compiled_archs
    if not text:
        raise CheckSkipped("TensorFlow's build info lists no CUDA architectures" if env.snapshot is not None
                           else f"no architecture table row for TensorFlow {env.tensorflow.describe()}")
    source = "" if env.compiled_archs_source == "TensorFlow's build info" \
        else f" ({env.compiled_archs_source})"
    sass, ptx = compiled_archs(text)
    findings = []
    fine: list[str] = []
    tf_version = env.tensorflow.text
    for cc_text, indices in sorted(by_cc.items()):
        cc = major_minor(cc_text)
        if cc is None:
            continue
        which = (f"GPU {', '.join(indices)} (compute capability {cc_text})" if indices
                 else f"compute capability {cc_text}")
        evidence = [f"TensorFlow {tf_version} compiled for: {text}{source}"]
        if any((m, n) == cc for m, n, _ in sass):
            fine.append(f"{cc_text}: native sm_{cc[0]}{cc[1]}")
        elif any(m == cc[0] and n <= cc[1] and not s for m, n, s in sass):
            fine.append(f"{cc_text}: runs sm_{cc[0]}x code (binary compatible)")
        elif any(p <= cc for p in ptx):
            best = max(p for p in ptx if p <= cc)
            cache = env.snapshot.env.get("CUDA_CACHE_MAXSIZE", "(default)") if env.snapshot else "(not known)"
            findings.append(Finding(
                "gpu-arch.ptx-jit", Severity.WARNING,
                f"{which}: no native code in TensorFlow {tf_version}; its compute_{best[0]}{best[1]} PTX is "
                "JIT-compiled at start (minutes, on every new cache)",
                evidence + [f"CUDA_CACHE_MAXSIZE={cache}"],
                fix="Expect a slow first start; raise CUDA_CACHE_MAXSIZE (e.g. 4294967296) so the JIT result "
                "is kept, and use a TensorFlow release compiled for this GPU when there is one.",
            ))
        else:
            findings.append(Finding(
                "gpu-arch.unsupported", Severity.ERROR,
                f"{which}: TensorFlow {tf_version} has no code that runs on it",
                evidence,
                fix="Use a TensorFlow built for this GPU generation (an older release for old GPUs, a newer "
                "one for new GPUs), or build TensorFlow from source with TF_CUDA_COMPUTE_CAPABILITIES="
                f"{cc_text}.",
                links=[TF_SOURCE_DOC],
            ))
    if fine:
        findings.append(Finding("gpu-arch.native", Severity.OK,
                                f"compute capability {'; '.join(fine)} (TensorFlow {tf_version})",
                                [f"TensorFlow {tf_version} compiled for: {text}{source}"]))
    return findings

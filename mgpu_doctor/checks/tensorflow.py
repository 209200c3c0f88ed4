"""TensorFlow itself: installed, importable, seeing the GPUs NVML sees."""

from __future__ import annotations

import re

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.checks.facts_access import need, need_env, need_nvml, need_tensorflow
from mgpu_doctor.environment.visibility import hides_all_on_purpose, visible_gpus
from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.model.snapshot import Snapshot
from mgpu_doctor.model.unavailable import Unavailable, interpreter_broken

# (pattern in the error or stderr, what it usually means, what to do)
IMPORT_ERROR_HINTS: tuple[tuple[str, str, str], ...] = (
    (
        r"_ARRAY_API not found|compiled using NumPy 1\.x|numpy\.core\.multiarray failed to import",
        "This TensorFlow was built against NumPy 1.x and NumPy 2 is installed.",
        'Install a NumPy this TensorFlow supports: pip install "numpy<2" '
        "(or upgrade TensorFlow to 2.16 or newer).",
    ),
    (
        r"Descriptors cannot be created directly",
        "The installed protobuf is newer than this TensorFlow's generated code supports.",
        'Install an older protobuf: pip install "protobuf<3.21", or set '
        "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python (slow).",
    ),
    (
        r"GLIBC_?\d|GLIBCXX_\d|version `GLIBC",
        "The TensorFlow wheel needs a newer C library than this system has.",
        "Use a TensorFlow release built for this distribution, or a newer OS / container image.",
    ),
    (
        r"lib(cudart|cublas|cudnn|cufft|curand|cusolver|cusparse|nccl)\S*\.so",
        "A CUDA library TensorFlow links against could not be loaded.",
        "Install the matching CUDA libraries: pip install 'tensorflow[and-cuda]', or put the "
        "CUDA/cuDNN versions TensorFlow was built for on LD_LIBRARY_PATH "
        "(run `mgpu-doctor libs`).",
    ),
    (
        r"No module named 'tensorflow",
        "A TensorFlow distribution is registered but its files are missing or broken "
        "(often after uninstalling one of two TensorFlow packages that share files).",
        "Reinstall cleanly: pip uninstall -y tensorflow tensorflow-cpu tensorflow-gpu && "
        "pip install tensorflow",
    ),
    (
        r"DLL load failed",
        "A native library failed to load (Windows).",
        "Install the Microsoft Visual C++ redistributable and the CUDA/cuDNN versions this "
        "TensorFlow was built for.",
    ),
)
SIGNAL_HINTS = {
    "SIGILL": (
        "The CPU lacks an instruction the TensorFlow wheel uses (AVX/AVX2 since TensorFlow 1.6).",
        "Use a CPU with AVX, or a TensorFlow build compiled without AVX for this CPU.",
    ),
    "SIGSEGV": (
        "A native library crashed during import: typically two incompatible copies of a "
        "CUDA, protobuf or NumPy library loaded into one process.",
        "Run `mgpu-doctor libs` to see which copies are loaded, and try `import tensorflow` in "
        "a fresh virtual environment with nothing else installed.",
    ),
    "SIGABRT": (
        "A native library aborted during import (often a failed CHECK in TensorFlow's C++ "
        "code, or an ABI mismatch).",
        "Read the last lines of stderr below; reinstall TensorFlow in a clean environment.",
    ),
}


IMPORT_CODES = (
    "tensorflow.imported",
    "tensorflow.not-installed",
    "tensorflow.import-failed",
    "tensorflow.probe-not-started",
)


def check_tensorflow_import(snapshot: Snapshot) -> list[Finding]:
    tf = snapshot.tensorflow
    python = snapshot.python
    who = python.executable if not isinstance(python, Unavailable) else "the diagnosed Python"
    if not isinstance(tf, Unavailable):
        return [Finding(
            "tensorflow.imported", Severity.OK,
            f"version {tf.version}" if tf.version else "its log lines are pasted (version not in them)",
            evidence=[f"import took {tf.import_seconds:.1f} s", f"module: {tf.module_path}"],
        )]
    if tf.reason == "skipped":
        raise CheckSkipped(tf.detail)
    if interpreter_broken(tf):
        raise CheckSkipped("the diagnosed Python does not work (see the `interpreter` check)")
    if tf.cause == "child-not-started":
        return [Finding(
            "tensorflow.probe-not-started", Severity.ERROR,
            f"The TensorFlow probe could not be started under {who}",
            evidence=[line for line in tf.detail.splitlines() if line.strip()][:14],
            fix="The interpreter ran the package probe a moment before: check that it, its #! line "
                "and the files it opens are still there and executable, and that the machine can "
                "start processes (ulimit -u, free memory).",
        )]
    if tf.reason == "absent":
        return [Finding(
            "tensorflow.not-installed", Severity.ERROR,
            f"TensorFlow is not installed for {who}",
            evidence=[tf.detail],
            fix="Install it (pip install tensorflow), or, if you train in another environment, "
            "point the doctor at it: mgpu-doctor check --python /path/to/env/bin/python",
        )]
    meaning, fix = _explain_import_failure(tf)
    return [Finding(
        "tensorflow.import-failed", Severity.ERROR,
        _import_failure_title(tf),
        evidence=[line for line in tf.detail.splitlines() if line.strip()][:14]
        + ([f"what it usually means: {meaning}"] if meaning else []),
        fix=fix,
    )]


def _import_failure_title(tf: Unavailable) -> str:
    if tf.cause == "timeout":
        return "`import tensorflow` hangs"
    if tf.cause.startswith("signal:"):
        return f"`import tensorflow` crashes the process ({tf.cause.split(':', 1)[1]})"
    return "`import tensorflow` fails"


def _explain_import_failure(tf: Unavailable) -> tuple[str, str]:
    if tf.cause == "timeout":
        return (
            "Importing TensorFlow blocked: a wedged GPU driver, a library on a hung network "
            "filesystem, or a lock held by another process.",
            "Look at the stacks above; check `nvidia-smi` answers and `dmesg` shows no Xid "
            "errors; try `python -X importtime -c 'import tensorflow'`.",
        )
    if tf.cause.startswith("signal:"):
        sig = tf.cause.split(":", 1)[1]
        if sig in SIGNAL_HINTS:
            return SIGNAL_HINTS[sig]
    for pattern, meaning, fix in IMPORT_ERROR_HINTS:
        if re.search(pattern, tf.detail):
            return meaning, fix
    return "", (
        "Run `python -c 'import tensorflow'` in the same environment to see the full "
        "traceback; reinstall TensorFlow in a clean virtual environment if it persists."
    )


GPUS_CODES = (
    "tensorflow.gpus-match",
    "tensorflow.cpu-only-build",
    "tensorflow.fewer-gpus-mig",
    "tensorflow.fewer-gpus-than-nvml",
    "tensorflow.more-gpus-than-nvml",
)


def check_tensorflow_gpus(snapshot: Snapshot) -> list[Finding]:
    """TensorFlow should see exactly the GPUs that NVML reports as visible to CUDA."""
    tf = need_tensorflow(snapshot)
    nvml = need_nvml(snapshot)
    devices = need(tf.physical_devices, "TensorFlow's device list")
    tf_gpus = [d for d in devices if d.device_type == "GPU"]
    cvd = snapshot.env.get("CUDA_VISIBLE_DEVICES")
    visible = visible_gpus(nvml.gpus, cvd, snapshot.env.get("CUDA_DEVICE_ORDER")).visible
    expected = len(visible)
    evidence = [
        f"NVML: {len(nvml.gpus)} GPU(s)",
        f"CUDA_VISIBLE_DEVICES: {cvd!r}" if cvd is not None else "CUDA_VISIBLE_DEVICES: not set",
        f"expected visible to TensorFlow: {expected}",
        f"TensorFlow sees: {len(tf_gpus)} ({', '.join(d.name for d in tf_gpus) or 'none'})",
    ]
    if len(tf_gpus) == expected:
        if expected == 0:
            raise CheckSkipped("no GPU is visible, so there is nothing for TensorFlow to see")
        return [Finding("tensorflow.gpus-match", Severity.OK,
                        f"all {expected} visible GPU(s)", evidence)]
    if len(tf_gpus) > expected:
        return [Finding(
            "tensorflow.more-gpus-than-nvml", Severity.WARNING,
            f"TensorFlow sees {len(tf_gpus)} GPU(s) but NVML reports {expected} visible",
            evidence,
            fix="NVML's answer may be incomplete (see the NVML check) or the snapshot mixes two "
            "machines; run `nvidia-smi -L` and compare.",
        )]
    mig = [g.index for g in nvml.gpus if g.index in visible and g.mig_mode is True]
    if mig:
        return [Finding(
            "tensorflow.fewer-gpus-mig", Severity.WARNING,
            f"TensorFlow sees {len(tf_gpus)} of the {expected} visible GPU(s); MIG is enabled on "
            f"GPU {', '.join(map(str, mig))}",
            evidence,
            fix="A CUDA process sees at most one MIG instance: see the MIG check. Disable MIG "
            "for multi-GPU training, or select the instance to use with "
            "CUDA_VISIBLE_DEVICES=MIG-<uuid> (`nvidia-smi -L` lists them).",
        )]
    if not isinstance(tf.built_with_cuda, Unavailable) and not tf.built_with_cuda:
        return [Finding(
            "tensorflow.cpu-only-build", Severity.ERROR,
            f"TensorFlow {tf.version} is a CPU-only build: it will never use the {expected} GPU(s)",
            evidence + [f"build info: {tf.build_info}"],
            fix="Install a GPU build: pip uninstall -y tensorflow-cpu && "
            "pip install 'tensorflow[and-cuda]' (Linux).",
        )]
    return [Finding(
        "tensorflow.fewer-gpus-than-nvml", Severity.ERROR,
        f"TensorFlow sees {len(tf_gpus)} of the {expected} GPU(s) NVML reports as visible",
        evidence + _library_evidence(tf.warnings),
        fix="Usually a CUDA or cuDNN library TensorFlow needs did not load: run "
        "`mgpu-doctor libs`, and `TF_CPP_MIN_LOG_LEVEL=0 python -c \"import tensorflow as tf; "
        "print(tf.config.list_physical_devices('GPU'))\"` to see TensorFlow's own message "
        "(look for 'Cannot dlopen some GPU libraries').",
    )]


def _library_evidence(warnings: list[str]) -> list[str]:
    return [f"TensorFlow said: {w}" for w in warnings if "dlopen" in w or "librar" in w][:5]


VISIBLE_DEVICES_CODES = (
    "cuda-visible-devices.ok",
    "cuda-visible-devices.empty",
    "cuda-visible-devices.unknown-gpu",
    "cuda-visible-devices.duplicate",
    "cuda-visible-devices.hides-all",
    "cuda-visible-devices.several-mig",
)


def check_cuda_visible_devices(snapshot: Snapshot) -> list[Finding]:
    need_env(snapshot, "CUDA_VISIBLE_DEVICES")
    cvd = snapshot.env.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        raise CheckSkipped("CUDA_VISIBLE_DEVICES is not set: every GPU is visible")
    if cvd.strip() == "":
        return [Finding(
            "cuda-visible-devices.empty", Severity.ERROR,
            "CUDA_VISIBLE_DEVICES is set to an empty string: CUDA sees no GPU at all",
            [f"CUDA_VISIBLE_DEVICES={cvd!r}"],
            fix="unset CUDA_VISIBLE_DEVICES, or list the GPUs to use (CUDA_VISIBLE_DEVICES=0,1).",
        )]
    if hides_all_on_purpose(cvd):
        return [Finding(
            "cuda-visible-devices.hides-all", Severity.WARNING,
            f"CUDA_VISIBLE_DEVICES={cvd} hides every GPU: training will run on the CPU",
            [f"CUDA_VISIBLE_DEVICES={cvd!r}"],
            fix="unset CUDA_VISIBLE_DEVICES if this job should use GPUs.",
        )]
    nvml = need_nvml(snapshot)
    vis = visible_gpus(nvml.gpus, cvd, snapshot.env.get("CUDA_DEVICE_ORDER"))
    findings = []
    evidence = [f"CUDA_VISIBLE_DEVICES={cvd!r}", f"NVML: {len(nvml.gpus)} GPU(s)",
                f"visible NVML indices: {vis.visible}"]
    if vis.mig_device:
        evidence.append(f"MIG device {vis.mig_device} (on GPU {vis.visible[0]})")
    if vis.invalid_entry:
        lost = f"; {','.join(vis.ignored_after_invalid)} after it are ignored too" \
            if vis.ignored_after_invalid else ""
        findings.append(Finding(
            "cuda-visible-devices.unknown-gpu", Severity.ERROR,
            f"CUDA_VISIBLE_DEVICES names '{vis.invalid_entry}', which is no GPU on this machine"
            + lost,
            evidence,
            fix=f"Use indices below {len(nvml.gpus)} or full GPU UUIDs from `nvidia-smi -L`. "
            "CUDA stops reading the list at the first invalid entry.",
        ))
    if vis.duplicate_entries:
        findings.append(Finding(
            "cuda-visible-devices.duplicate", Severity.WARNING,
            f"CUDA_VISIBLE_DEVICES lists a GPU twice ({', '.join(vis.duplicate_entries)})",
            evidence, fix="List each GPU once.",
        ))
    if vis.ignored_mig_entries:
        findings.append(Finding(
            "cuda-visible-devices.several-mig", Severity.WARNING,
            f"CUDA_VISIBLE_DEVICES names {1 + len(vis.ignored_mig_entries)} MIG devices, but a CUDA "
            f"process uses only the first ({vis.mig_device})",
            evidence,
            fix="Run one single-device job per MIG device, each with its own "
            "CUDA_VISIBLE_DEVICES=MIG-<uuid>.",
            links=["https://docs.nvidia.com/datacenter/tesla/mig-user-guide/#cuda-device-enumeration"],
        ))
    if not findings:
        findings.append(Finding("cuda-visible-devices.ok", Severity.INFO,
                                f"CUDA_VISIBLE_DEVICES selects {len(vis.visible)} GPU(s)", evidence))
    return findings

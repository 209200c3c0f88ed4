"""What a paste's TensorFlow log lines prove by themselves: a library that did not load, a runtime
other than the one TensorFlow was built with, a failed cuInit, the devices TensorFlow created.
Run by `check --from PASTE` after every registered check (a check of the pasted text itself)."""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from mgpu_doctor.checks.base import Check, CheckSkipped, Scope
from mgpu_doctor.environment.resolve import ResolvedEnvironment
from mgpu_doctor.model.findings import Finding, Section, Severity
from mgpu_doctor.model.pasted import LogLine, PastedFacts

NAME = "pasted-log"
TITLE = "The pasted TensorFlow log shows no failure"
CODES = (
    "pasted.log-clean",
    "pasted.devices-created",
    "pasted.library-not-loaded",
    "pasted.runtime-older-than-build",
    "pasted.runtime-mismatch",
    "pasted.cuinit-failed",
    "pasted.no-gpu",
)
TF_GPU_DOC = "https://www.tensorflow.org/install/pip"
TF_SOURCE_DOC = "https://www.tensorflow.org/install/source#gpu"
# Libraries TensorFlow's GPU support cannot start without; TensorRT (libnvinfer) and CUPTI (the
# profiler) are optional: a failed load of those only costs their feature.
REQUIRED_STEMS = ("libcuda.", "libcudart", "libcublas", "libcublaslt", "libcufft", "libcurand", "libcusolver",
                  "libcusparse", "libcudnn", "cudart64", "cublas64", "cublaslt64", "cufft64", "curand64",
                  "cusolver64", "cusparse64", "cudnn64", "nvcuda")
OPTIONAL = {"libnvinfer": "TensorRT", "nvinfer": "TensorRT", "libcupti": "the profiler (CUPTI)",
            "cupti64": "the profiler (CUPTI)"}
LABELS = {"cudnn": "cuDNN", "cuda": "the CUDA runtime", "cublas": "cuBLAS", "nccl": "NCCL"}


def check_pasted_log(env: ResolvedEnvironment) -> list[Finding]:
    snapshot = env.snapshot
    pasted = snapshot.pasted if snapshot is not None else None
    if pasted is None:
        raise CheckSkipped("not a pasted text")
    log = [e for e in pasted.log if e.kind != "nccl-version"]
    if not log:
        raise CheckSkipped("no TensorFlow log lines in the pasted text")
    findings: list[Finding] = []
    findings += _mismatches(pasted, [e for e in log if e.kind == "runtime-mismatch"])
    findings += _not_loaded([e for e in log if e.kind == "not-loaded"])
    findings += [Finding("pasted.cuinit-failed", Severity.ERROR,
                         f"TensorFlow could not initialise CUDA: {e.loaded}", [f"line {e.line}: {e.text}"],
                         fix="The driver does not see a GPU from this process: check `nvidia-smi`, "
                         "CUDA_VISIBLE_DEVICES, and (in a container) that it was started with the GPUs "
                         "(--gpus all).") for e in _once(log, "cuinit-failed")]
    if not findings:
        findings += [Finding("pasted.no-gpu", Severity.WARNING, "TensorFlow says it will not use the GPU",
                             [f"line {e.line}: {e.text}", *_no_gpu_meaning(e.text)],
                             fix="Read the lines above it in the log: they name the library that did "
                             "not load.", links=[TF_GPU_DOC]) for e in _once(log, "no-gpu")]
    devices = [e for e in log if e.kind == "device"]
    if devices:
        names = sorted({e.library for e in devices})
        ccs = sorted({e.loaded for e in devices if e.loaded})
        findings.append(Finding(
            "pasted.devices-created", Severity.OK if not findings else Severity.INFO,
            f"TensorFlow created {len({e.text for e in devices})} GPU device(s): {', '.join(names)}"
            + (f" (compute capability {', '.join(ccs)})" if ccs else ""),
            [f"line {e.line}: {e.text}" for e in devices][:8]))
    if not any(f.severity > Severity.INFO for f in findings):
        loaded = sorted({e.library for e in log if e.kind == "loaded"})
        findings.append(Finding("pasted.log-clean", Severity.OK,
                                f"{len(log)} log line(s) read, no failure among them",
                                [f"loaded: {', '.join(loaded)}"] if loaded else []))
    return findings


def _no_gpu_meaning(text: str) -> list[str]:
    """What TensorFlow's "Cannot dlopen some GPU libraries" means (gpu_device.cc prints it when a
    library its GPU support needs failed to load); its other no-GPU line is about the driver."""
    if "Cannot dlopen" not in text:
        return []
    return ["what the line means: a shared library could not be loaded (one the GPU support needs: "
            "CUDA's, cuDNN's); the lines before it in the log name which"]


def _once(log: list[LogLine], kind: str) -> list[LogLine]:
    """The first of repeated lines (a log repeats its error once per GPU)."""
    seen: set[str] = set()
    out = []
    for entry in log:
        key = f"{entry.library}|{entry.loaded}|{entry.compiled}"
        if entry.kind == kind and key not in seen:
            seen.add(key)
            out.append(entry)
    return out


def _parse(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _mismatches(pasted: PastedFacts, entries: list[LogLine]) -> list[Finding]:
    out = []
    for entry in _once(entries, "runtime-mismatch"):
        loaded, compiled = _parse(entry.loaded), _parse(entry.compiled)
        label = LABELS.get(entry.library, entry.library)
        evidence = [f"line {entry.line} (TensorFlow log): {entry.text}"]
        stated = pasted.versions.get(entry.library if entry.library != "cuda" else "cuda")
        if stated is not None:
            evidence += [f"also stated: {o}" for o in stated.others]
        if loaded is None or compiled is None:
            continue
        if loaded.major != compiled.major:
            out.append(Finding(
                "pasted.runtime-mismatch", Severity.ERROR,
                f"{label} {entry.loaded} was loaded, TensorFlow was compiled with {entry.compiled}: "
                "another major version, TensorFlow cannot use it",
                evidence, fix=f"Install {label} {compiled.major}.x (at least {entry.compiled}) where "
                "TensorFlow loads it from, or install the TensorFlow built for the one you have.",
                links=[TF_SOURCE_DOC]))
        elif loaded < compiled:
            out.append(Finding(
                "pasted.runtime-older-than-build", Severity.ERROR,
                f"{label} {entry.loaded} was loaded, older than the {entry.compiled} TensorFlow was "
                "compiled with: TensorFlow refuses it",
                evidence + [f"loaded: {entry.loaded}", f"compiled with: {entry.compiled}"],
                fix=f"Install {label} {entry.compiled} or newer within {compiled.major}.x (pip install "
                "the matching nvidia-* wheel, or put its directory first on LD_LIBRARY_PATH), or use "
                f"a TensorFlow built with {label} {loaded.major}.{loaded.minor}.",
                links=[TF_SOURCE_DOC]))
    return out


def _not_loaded(entries: list[LogLine]) -> list[Finding]:
    required = [e for e in _once(entries, "not-loaded")
                if e.library.lower().startswith(REQUIRED_STEMS)]
    optional = [e for e in _once(entries, "not-loaded") if e not in required]
    out = []
    if required:
        out.append(Finding(
            "pasted.library-not-loaded", Severity.ERROR,
            f"{', '.join(e.library for e in required)} did not load: TensorFlow will not use the GPU",
            [f"line {e.line}: {e.text}" for e in required][:8],
            fix="Install the CUDA and cuDNN versions this TensorFlow was built for (with pip: "
            "`pip install tensorflow[and-cuda]` from 2.14), or add the directory holding these "
            "files to LD_LIBRARY_PATH.", links=[TF_GPU_DOC, TF_SOURCE_DOC]))
    for entry in optional:
        feature = next((v for k, v in OPTIONAL.items() if entry.library.lower().startswith(k)), "")
        out.append(Finding(
            "pasted.library-not-loaded", Severity.INFO,
            f"{entry.library} did not load" + (f": only {feature} is unavailable" if feature else ""),
            [f"line {entry.line}: {entry.text}"]))
    return out


PASTED_CHECK: Check[ResolvedEnvironment] = Check(NAME, TITLE, check_pasted_log, Scope.MACHINE,
                                                 Section.TENSORFLOW, CODES)

"""Finding codes: the one scheme they follow, and the codes renamed since (kept as aliases).

A code is ``AREA.CONDITION``: dot-separated segments of lowercase letters, digits and single
hyphens; the first segment is an area of :data:`AREAS`; a condition may carry a qualifier
segment first (``smoke.lstm.hang``, ``known-issue.<id>``). Codes are public: acknowledge files,
CI gates and bug reports name them, so a code that changes keeps its old spelling as an alias
in :data:`RENAMED` and an acknowledgement that names it still matches.

In a declared code an upper-case segment is a placeholder (``smoke.LAYER.hang``,
``known-issue.ID``): one or more segments filled in when the finding is made.
"""

from __future__ import annotations

import re

_SEGMENT = r"[a-z0-9]+(?:-[a-z0-9]+)*"
CODE = re.compile(rf"{_SEGMENT}(?:\.{_SEGMENT})+")
_PLACEHOLDER = re.compile(r"[A-Z][A-Z_]*")

# What the first segment of a code is about. A subject has one area: never a plural beside its
# singular (gpu / gpus was the mix this scheme ended).
AREAS: dict[str, str] = {
    "snapshot": "the snapshot itself (values no machine has)",
    "interpreter": "the diagnosed Python (`--python`)",
    "gpu": "the NVIDIA driver, NVML and the GPUs",
    "cuda": "CUDA's numbering of the GPUs",
    "cuda-visible-devices": "`CUDA_VISIBLE_DEVICES`",
    "tensorflow": "TensorFlow's import and its view of the GPUs",
    "jax": "JAX's CUDA plugin, its view of the GPUs, its memory preallocation, Keras 3 on JAX",
    "packages": "the installed distributions",
    "versions": "installed against imported versions",
    "tensorflow-requires": "NumPy, protobuf, ml-dtypes and h5py against TensorFlow's own pins",
    "keras": "Keras against TensorFlow",
    "python": "the Python version against TensorFlow's builds",
    "libraries": "the CUDA libraries TensorFlow loads",
    "and-cuda": "the `nvidia-*` wheels against `tensorflow[and-cuda]`",
    "driver": "the driver against the CUDA runtime",
    "gpu-arch": "TensorFlow's compiled GPU architectures",
    "ptxas": "`ptxas` for XLA",
    "xla": "`XLA_FLAGS`",
    "cuda-env": "`LD_LIBRARY_PATH`, `CUDA_HOME`, `CUDA_PATH`",
    "pcie": "PCIe ACS and the IOMMU between GPUs",
    "shm": "`/dev/shm`",
    "cpu": "the CPUs the job may use",
    "nccl": "NCCL's environment and configuration",
    "container": "the container's GPUs and driver libraries",
    "grpc": "the proxy variables gRPC reads between TensorFlow's tasks",
    "known-issue": "a known issue of the matrix (`known-issue.ID`)",
    "matrix": "the known-issue matrix files themselves",
    "facts": "facts that could not be gathered",
    "crash": "a check that itself failed (`crash.CHECK`)",
    "require": "the `--require-*` gates",
    "user-model": "your own model (`--model`), built and read in a child",
    "code": "your training code (`--code PATH`, a paste's code blocks), read and never run",
    "smoke": "the smoke trainings (`smoke.LAYER.CONDITION`)",
    "multiworker": "the multi-worker smoke trainings",
    "fleet": "`fleet`'s comparison of nodes",
    "pasted": "what a pasted text's own log lines prove (`check --from ISSUE.txt`)",
    "drift": "what changed since a known-good run (`check --baseline FILE`)",
    "hang": "a running job read while it hangs (`hang`, `report --hang`)",
}

# The codes whose last segment is a known-issue id (declared ``....ID``): the known-issues check and a
# pasted log's line (``known-issue.ID``), the smoke trainings (a failure the matrix explains, or an
# entry not reproduced) and a hung job's stacks. An acknowledgement naming one by an id merged into
# another entry holds for that entry.
KNOWN_ISSUE_PREFIXES = ("known-issue.", "smoke.known-issue.", "smoke.not-reproduced.", "hang.known-issue.")

# Old code -> its current name. Findings carry the current name; what names an old one (an
# acknowledge file) is read through this table.
RENAMED: dict[str, str] = {
    "gpus.none": "gpu.none",
    "gpus.found": "gpu.found",
    "gpus.nvml-failed": "gpu.nvml-failed",
    "gpus.nvml-partial": "gpu.nvml-partial",
    "gpus.mixed": "gpu.mixed",
    "gpus.no-p2p": "gpu.no-p2p",
    "gpus.no-nvlink": "gpu.no-nvlink",
    "gpus.cross-socket": "gpu.cross-socket",
    "known-issues.none": "matrix.no-known-issue",
    "known-issues.matrix-problems": "matrix.problems",
    "smoke.batch-size-sweep": "smoke.scaling-map",
}
_OLD_CRASHED = re.compile(rf"({_SEGMENT})\.crashed")


def known_issue_of(code: str) -> tuple[str, str] | None:
    """(its prefix, the known-issue id) of a code that names a known issue (:data:`KNOWN_ISSUE_PREFIXES`)."""
    prefix = next((p for p in KNOWN_ISSUE_PREFIXES if code.startswith(p) and len(code) > len(p)), None)
    return None if prefix is None else (prefix, code[len(prefix):])


def crash_code(check_name: str) -> str:
    """The code of the crash finding of a check that raised."""
    return f"crash.{check_name}"


def canonical(code: str) -> str:
    """The current name of ``code``: itself, or what it was renamed to.

    Besides :data:`RENAMED`: ``CHECK.crashed`` is now ``crash.CHECK``, and underscores (once
    in ``smoke.not-in-matrix.…-uneven_final_batch``) are hyphens."""
    code = code.strip()
    if code in RENAMED:
        return RENAMED[code]
    crashed = _OLD_CRASHED.fullmatch(code)
    if crashed and crashed.group(1) not in AREAS:
        return crash_code(crashed.group(1))
    return code.replace("_", "-")


def scheme_problem(code: str) -> str | None:
    """Why ``code`` (a concrete code, or a declared one with placeholders) breaks the scheme."""
    concrete = ".".join("x" if _PLACEHOLDER.fullmatch(s) else s for s in code.split("."))
    if not CODE.fullmatch(concrete):
        return (f"{code!r} is not AREA.CONDITION in lowercase words joined by hyphens, segments "
                "separated by dots")
    area = code.split(".", 1)[0]
    if area not in AREAS:
        return f"{code!r} starts with {area!r}, which is not an area of mgpu_doctor.model.codes.AREAS"
    return None


def is_declared(code: str, declared: tuple[str, ...] | list[str]) -> bool:
    """Whether ``code`` is one of the codes ``declared`` stands for. A placeholder takes one or more
    whole segments, whatever their text: a team matrix's id is checked by the matrix's own rules,
    not here. (Segment by segment, not a pattern per declared code: every finding of every run
    is checked, and compiling those patterns was a tenth of the quick check's regular expressions.)"""
    parts = code.split(".")
    return any(_stands_for(d.split("."), parts) for d in declared)


def _stands_for(declared: list[str], parts: list[str]) -> bool:
    if not declared:
        return not parts
    first, rest = declared[0], declared[1:]
    if not (first[:1].isupper() and _PLACEHOLDER.fullmatch(first)):
        return bool(parts) and parts[0] == first and _stands_for(rest, parts[1:])
    # a placeholder: one segment or more (not one empty one), leaving the rest of the code to the rest
    return any(_stands_for(rest, parts[taken:]) for taken in range(1, len(parts) - len(rest) + 1)
               if taken > 1 or parts[0])

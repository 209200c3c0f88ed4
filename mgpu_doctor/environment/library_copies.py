"""Pure helpers over library facts: names, the best version of a copy, which copy wins.

Shared by the library probe, the checks and `mgpu-doctor libs`; no side effects here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from mgpu_doctor.model.snapshot import LibraryCopy, LibraryFacts

# The libraries TensorFlow's GPU support loads, in the order `libs` lists them.
MAIN_LIBRARIES = ("cuda", "cudart", "cublas", "cublasLt", "cufft", "curand", "cusolver", "cusparse",
                  "cudnn", "nccl", "nvrtc", "nvJitLink")
TOOLS = ("ptxas", "nvcc")
# Libraries whose soname major is the CUDA major they belong to (libcudart.so.12 -> CUDA 12).
FOLLOW_CUDA_MAJOR = ("cudart", "cublas", "cublasLt", "nvrtc", "nvJitLink")
LIBRARY_FILE = re.compile(
    r"^lib(?P<name>cuda|cudart|cublas|cublasLt|cufft|curand|cusolver|cusparse|cudnn(?:_[a-z_]+)?|nccl|"
    r"nvrtc|nvJitLink)\.so(?:\.(?P<version>\d+(?:\.\d+)*))?$"
)
# Most trustworthy first: what the library says when loaded, then what was written next to it.
VERSION_SOURCES = ("ctypes", "--version", "filename", "wheel", "version.json", "dist-info", "header",
                   "soname")


def best_version(copy: LibraryCopy) -> tuple[str, str]:
    """(version, where it was read), or ("", "") when nothing says."""
    for source in VERSION_SOURCES:
        if copy.versions.get(source):
            return copy.versions[source], source
    return "", ""


def soname_major(copy: LibraryCopy) -> int | None:
    match = re.search(r"\.so\.(\d+)", copy.soname)
    return int(match.group(1)) if match else None


def major_of(copy: LibraryCopy) -> int | None:
    """The library's own major version (cuDNN 9, NCCL 2, cuBLAS 12)."""
    version, _ = best_version(copy)
    match = re.match(r"(\d+)", version)
    if match:
        return int(match.group(1))
    return soname_major(copy)


def cuda_major_of(copy: LibraryCopy) -> int | None:
    """The CUDA major a copy belongs to, when its name or wheel says so; None when unknown."""
    wheel = re.search(r"-cu(\d+)$", copy.wheel)
    if wheel:
        return int(wheel.group(1))
    if copy.name in FOLLOW_CUDA_MAJOR:
        return major_of(copy)
    return None


def copies_of(facts: LibraryFacts, name: str) -> list[LibraryCopy]:
    return [c for c in facts.copies if c.name == name]


def winner(facts: LibraryFacts, name: str, soname: str | None = None) -> LibraryCopy | None:
    """The copy the dynamic loader takes: the first one on the search path (with that soname)."""
    for copy in facts.copies:
        if copy.name == name and copy.on_search_path and (soname is None or copy.soname == soname):
            return copy
    return None


def distinct_versions(copies: Iterable[LibraryCopy]) -> list[str]:
    seen: list[str] = []
    for copy in copies:
        version, _ = best_version(copy)
        if version and version not in seen:
            seen.append(version)
    return seen

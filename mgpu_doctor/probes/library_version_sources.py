"""Where a library copy's version is written down, read without loading it: the nvidia-* wheel
that owns it, a toolkit's ``version.json`` or ``dist-info``, the version headers, and a tool's
``--version``. (Loading the library and asking it is :mod:`~mgpu_doctor.probes.library_loading`.)
"""

from __future__ import annotations

import glob
import os
import re
from pathlib import Path

from mgpu_doctor.process.childproc import run_tool
from mgpu_doctor.process.inputs import parse_json, read_text

TOOL_TIMEOUT_S = 5.0
# How a toolkit's version.json / dist-info names each library's component.
VERSION_JSON_KEYS = {
    "cudart": "cuda_cudart", "cublas": "libcublas", "cublasLt": "libcublas", "cufft": "libcufft",
    "curand": "libcurand", "cusolver": "libcusolver", "cusparse": "libcusparse", "nvrtc": "cuda_nvrtc",
    "nvJitLink": "libnvjitlink", "ptxas": "cuda_nvcc", "nvcc": "cuda_nvcc",
}
DIST_INFO_NAMES = {
    "cudart": "cuda_runtime", "cublas": "cublas", "cublasLt": "cublas", "cufft": "cufft",
    "curand": "curand", "cusolver": "cusolver", "cusparse": "cusparse", "nvrtc": "cuda_nvrtc",
    "nvJitLink": "nvjitlink", "ptxas": "cuda_nvcc", "nvcc": "cuda_nvcc", "cudnn": "cudnn", "nccl": "nccl",
}


def wheel_of(site: str, lib_dir: str) -> tuple[str, str]:
    """The nvidia-* wheel (canonical name, version) that owns ``site/nvidia/<sub>/lib``."""
    sub = Path(lib_dir).parent.name.lower()
    candidates = []
    for dist in glob.glob(os.path.join(site, "nvidia_*.dist-info")):
        match = re.match(r"^(nvidia_.+?)-([^-]+)\.dist-info$", os.path.basename(dist))
        if not match:
            continue
        name, version = match.group(1).lower(), match.group(2)
        stem = re.sub(r"_cu\d+$", "", name[len("nvidia_"):])
        if stem == sub:
            return name.replace("_", "-"), version
        candidates.append((name, version, dist))
    for name, version, dist in candidates:  # CUDA 13 wheels share nvidia/cu13/lib: ask RECORD
        try:
            with open(os.path.join(dist, "RECORD"), encoding="utf-8", errors="replace") as fh:
                if any(line.startswith(f"nvidia/{sub}/lib/") for line in fh):
                    return name.replace("_", "-"), version
        except OSError:
            continue
    return "", ""

_json_cache: dict[str, dict[str, str]] = {}
_dist_cache: dict[str, dict[str, str]] = {}


def version_json(root: str) -> dict[str, str]:
    if root not in _json_cache:
        versions: dict[str, str] = {}
        try:
            path = Path(root, "version.json")
            data = parse_json(read_text(path, "a version.json", limit=2**20), str(path))
            for key, value in data.items():
                if isinstance(value, dict) and isinstance(value.get("version"), str):
                    versions[key] = value["version"]
        except (OSError, ValueError, AttributeError):  # InputError is a ValueError
            pass
        _json_cache[root] = versions
    return _json_cache[root]


def dist_info_versions(root: str) -> dict[str, str]:
    """Toolkits installed from wheels keep ``dist-info/nvidia_cuda_runtime-13.0.96.dist-info``."""
    if root not in _dist_cache:
        versions: dict[str, str] = {}
        for dist in glob.glob(os.path.join(root, "dist-info", "nvidia_*.dist-info")):
            match = re.match(r"^nvidia_(.+?)(?:_cu\d+)?-([^-]+)\.dist-info$", os.path.basename(dist))
            if match:
                versions[match.group(1).lower()] = match.group(2)
        _dist_cache[root] = versions
    return _dist_cache[root]


HEADERS = {
    "cudart": ("cuda_runtime_api.h", ("CUDART_VERSION",)),
    "cudnn": ("cudnn_version.h", ("CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL")),
    "nccl": ("nccl.h", ("NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH")),
    "cublas": ("cublas_api.h", ("CUBLAS_VER_MAJOR", "CUBLAS_VER_MINOR", "CUBLAS_VER_PATCH")),
    "cublasLt": ("cublas_api.h", ("CUBLAS_VER_MAJOR", "CUBLAS_VER_MINOR", "CUBLAS_VER_PATCH")),
}


def header_version(include_dir: str, name: str) -> str:
    """The version a header in ``include_dir`` declares for library ``name``; "" when none."""
    if name not in HEADERS:
        return ""
    file_name, macros = HEADERS[name]
    candidates = [file_name] + (["cudnn.h"] if name == "cudnn" else [])  # cuDNN <= 7 had no cudnn_version.h
    for candidate in candidates:
        try:
            text = Path(include_dir, candidate).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        values = []
        for macro in macros:
            match = re.search(rf"#define\s+{macro}\s+(\d+)", text)
            if not match:
                break
            values.append(int(match.group(1)))
        if len(values) != len(macros):
            continue
        if name == "cudart":  # 12050 -> 12.5
            return f"{values[0] // 1000}.{(values[0] % 1000) // 10}"
        return ".".join(str(v) for v in values)
    return ""

def tool_version(path: str) -> str:
    """``ptxas --version`` / ``nvcc --version``: "Cuda compilation tools, release 12.5, V12.5.82"."""
    out = run_tool([path, "--version"], TOOL_TIMEOUT_S).stdout  # garbage costs no other fact
    number = r"\d{1,6}"  # not a 5000-digit "version" from a program that only looks like nvcc
    match = (re.search(rf"\bV({number}\.{number}\.{number})\b", out)
             or re.search(rf"release ({number}\.{number})\b", out))
    return match.group(1) if match else ""

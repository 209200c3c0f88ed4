"""Child script: load CUDA libraries with ctypes and ask each for its version. Needs no GPU.

Usage: library_versions.py JOBS.json, where JOBS.json is a list of {"path": ..., "name": ...}
(name: cudart, cudnn, nccl, cublas, ...). Writes {"results": {path: {"version"|"error": ...}}}
to $MGPU_DOCTOR_RESULT after *each* library, so when a load hangs or crashes the parent knows
which one it was. Python 3.6+, standard library only.
"""

import ctypes
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _mgpu_child  # noqa: E402

if __name__ == "__main__":
    _mgpu_child.start()  # first: die with the doctor, stacks on SIGUSR1 even in C code


MAJOR, MINOR, PATCH = 0, 1, 2  # libraryPropertyType


def _int_out(lib, symbol):
    value = ctypes.c_int(0)
    status = getattr(lib, symbol)(ctypes.byref(value))
    if status != 0:
        raise RuntimeError("%s returned status %d" % (symbol, status))
    return value.value


def _property_version(lib, symbol):
    parts = []
    for prop in (MAJOR, MINOR, PATCH):
        value = ctypes.c_int(0)
        status = getattr(lib, symbol)(ctypes.c_int(prop), ctypes.byref(value))
        if status != 0:
            raise RuntimeError("%s returned status %d" % (symbol, status))
        parts.append(str(value.value))
    return ".".join(parts)


def _two_outs(lib, symbol, ctype):
    major, minor = ctype(0), ctype(0)
    status = getattr(lib, symbol)(ctypes.byref(major), ctypes.byref(minor))
    if status != 0:
        raise RuntimeError("%s returned status %d" % (symbol, status))
    return "%d.%d" % (major.value, minor.value)


def _cuda_code(code):
    """cudaRuntimeGetVersion / cuDriverGetVersion: 1000*major + 10*minor."""
    return "%d.%d" % (code // 1000, (code % 1000) // 10)


def _cudnn_code(code):
    # cuDNN 9: major*10000 + minor*100 + patch; cuDNN <= 8: major*1000 + minor*100 + patch.
    if code >= 90000:
        return "%d.%d.%d" % (code // 10000, (code % 10000) // 100, code % 100)
    return "%d.%d.%d" % (code // 1000, (code % 1000) // 100, code % 100)


def _nccl_code(code):
    # NCCL >= 2.9: major*10000 + minor*100 + patch; before: major*1000 + minor*100 + patch.
    if code >= 20900:
        return "%d.%d.%d" % (code // 10000, (code % 10000) // 100, code % 100)
    return "%d.%d.%d" % (code // 1000, (code % 1000) // 100, code % 100)


def version_of(name, lib):
    if name == "cudart":
        return _cuda_code(_int_out(lib, "cudaRuntimeGetVersion"))
    if name == "cuda":
        return _cuda_code(_int_out(lib, "cuDriverGetVersion"))
    if name == "cudnn":
        fn = lib.cudnnGetVersion
        fn.restype = ctypes.c_size_t
        return _cudnn_code(int(fn()))
    if name == "nccl":
        return _nccl_code(_int_out(lib, "ncclGetVersion"))
    if name == "cublasLt":
        fn = lib.cublasLtGetVersion
        fn.restype = ctypes.c_size_t
        code = int(fn())
        return "%d.%d.%d" % (code // 10000, (code % 10000) // 100, code % 100)
    if name in ("cublas", "cufft", "curand", "cusolver", "cusparse"):
        return _property_version(lib, name + "GetProperty")
    if name == "nvrtc":
        return _two_outs(lib, "nvrtcVersion", ctypes.c_int)
    if name == "nvJitLink":
        return _two_outs(lib, "nvJitLinkVersion", ctypes.c_uint)
    return None  # loadable, but no version function we know


def main():
    with open(sys.argv[1]) as fh:
        jobs = json.load(fh)
    results = {}
    for job in jobs:
        path, name = job["path"], job["name"]
        _mgpu_child.heartbeat("loading " + path)
        entry = {}
        try:
            lib = ctypes.CDLL(path, mode=getattr(os, "RTLD_LOCAL", 0) | getattr(os, "RTLD_NOW", 2))
        except OSError as exc:
            entry["error"] = str(exc)
        else:
            try:
                version = version_of(name, lib)
                if version:
                    entry["version"] = version
            except (AttributeError, RuntimeError, OSError, ValueError) as exc:
                entry["version_error"] = "%s: %s" % (type(exc).__name__, exc)
        results[path] = entry
        _mgpu_child.write_result({"results": results})
    _mgpu_child.write_result({"results": results, "done": True})


if __name__ == "__main__":
    main()

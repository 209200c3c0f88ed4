"""Child script: load CUDA libraries with ctypes and ask each for its version. Needs no GPU.

Usage: library_versions.py JOBS.json, where JOBS.json is a list of {"path": ..., "name": ...}
(name: cudart, cudnn, nccl, cublas, ...). Writes {"results": {path: {"version"|"error": ...}}}
to $MGPU_DOCTOR_RESULT after *each* library, so when a load hangs or crashes the parent knows
which one it was; before a version function runs, the entry says {"calling": SYMBOL}, so the
parent can tell a crash in the call (cuDNN aborts when its sub-library is missing) from one in
the load. Each file is opened by the path the loader finds it under, not its resolved target:
``$ORIGIN`` in its RUNPATH is that path's directory. Python 3.6+, standard library only.
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
    # CUDNN_VERSION in cudnn_version.h: cuDNN 9 major*10000 + minor*100 + patch (9.3.0: 90300);
    # cuDNN <= 8 major*1000 + minor*100 + patch (8.9.7: 8907).
    if code >= 90000:
        return _code_10000(code)
    return "%d.%d.%d" % (code // 1000, (code % 1000) // 100, code % 100)


def _nccl_code(code):
    # NCCL_VERSION(X,Y,Z) in nccl.h: X*1000 + Y*100 + Z up to 2.8, X*10000 + Y*100 + Z from 2.9.
    if code >= 20900:
        return _code_10000(code)
    return "%d.%d.%d" % (code // 1000, (code % 1000) // 100, code % 100)


# The function each library is asked: (symbol, how to call it and decode the answer).
VERSION_FUNCTIONS = {
    "cudart": ("cudaRuntimeGetVersion", lambda lib, sym: _cuda_code(_int_out(lib, sym))),
    "cuda": ("cuDriverGetVersion", lambda lib, sym: _cuda_code(_int_out(lib, sym))),
    "cudnn": ("cudnnGetVersion", lambda lib, sym: _cudnn_code(_size_t_call(lib, sym))),
    "nccl": ("ncclGetVersion", lambda lib, sym: _nccl_code(_int_out(lib, sym))),
    # CUBLAS_VERSION in cublas_api.h: major*10000 + minor*100 + patch (cublasLtGetVersion's too).
    "cublasLt": ("cublasLtGetVersion", lambda lib, sym: _code_10000(_size_t_call(lib, sym))),
    "nvrtc": ("nvrtcVersion", lambda lib, sym: _two_outs(lib, sym, ctypes.c_int)),
    "nvJitLink": ("nvJitLinkVersion", lambda lib, sym: _two_outs(lib, sym, ctypes.c_uint)),
}
for _name in ("cublas", "cufft", "curand", "cusolver", "cusparse"):
    VERSION_FUNCTIONS[_name] = (_name + "GetProperty", _property_version)


def _size_t_call(lib, symbol):
    fn = getattr(lib, symbol)
    fn.restype = ctypes.c_size_t
    return int(fn())


def _code_10000(code):
    """major*10000 + minor*100 + patch."""
    return "%d.%d.%d" % (code // 10000, (code % 10000) // 100, code % 100)


def version_of(name, lib):
    if name not in VERSION_FUNCTIONS:
        return None  # loadable, but no version function we know
    symbol, call = VERSION_FUNCTIONS[name]
    return call(lib, symbol)


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
            if name in VERSION_FUNCTIONS:
                results[path] = {"calling": VERSION_FUNCTIONS[name][0]}
                _mgpu_child.write_result({"results": results})
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

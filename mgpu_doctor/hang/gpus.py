"""Which processes hold which GPU, with the memory NVML counts for them and the GPU's utilisation.

The NVML module is passed in (tests hand over a narrow fake with pynvml's call shapes); a driver
that never answers is a fact after a timeout, as in ``probes/nvml.py``.
"""

from __future__ import annotations

import threading
from typing import Any

from mgpu_doctor.model.hang import GpuUse
from mgpu_doctor.model.unavailable import Unavailable, absent, failed
from mgpu_doctor.probes.nvml import load_pynvml

NVML_TIMEOUT_S = 10.0


def gpu_holders(nvml: Any | None = None,
                timeout_s: float = NVML_TIMEOUT_S) -> dict[int, list[GpuUse]] | Unavailable:
    """PID -> its GPUs; Unavailable where NVML cannot say (no driver, no pynvml, a wedged driver)."""
    if nvml is None:
        try:
            nvml = load_pynvml()
        except ImportError as exc:
            return absent(str(exc), "no-pynvml")
        if nvml is None:
            return absent("no NVIDIA driver library (libnvidia-ml.so.1): no GPU to read", "no-driver")
    box: list[dict[int, list[GpuUse]] | Unavailable] = []

    def work() -> None:
        try:
            box.append(_holders(nvml))
        except Exception as exc:  # a probe never crashes the doctor
            box.append(failed(f"NVML: {type(exc).__name__}: {exc}", "exception"))

    thread = threading.Thread(target=work, name="mgpu-doctor-hang-nvml", daemon=True)
    thread.start()
    thread.join(timeout_s)
    return box[0] if box else failed(f"NVML did not answer within {timeout_s:g} s (a wedged driver? "
                                     "see `dmesg` for Xid errors)", "timeout")


def _holders(nvml: Any) -> dict[int, list[GpuUse]] | Unavailable:
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return failed(f"NVML did not start: {exc}", "init")
    try:
        found: dict[int, list[GpuUse]] = {}
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            utilisation = _optional(nvml, lambda h=handle: int(nvml.nvmlDeviceGetUtilizationRates(h).gpu))
            for proc in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                used = getattr(proc, "usedGpuMemory", None)
                memory: int | Unavailable = int(used) if used is not None else absent("not reported")
                found.setdefault(int(proc.pid), []).append(GpuUse(index, memory, utilisation))
        return found
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass


def _optional(nvml: Any, read: Any) -> int | Unavailable:
    try:
        return int(read())
    except nvml.NVMLError as exc:
        return absent(f"not supported on this GPU ({exc})", "not-supported")

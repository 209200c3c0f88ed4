"""GPU facts from NVML (through ``pynvml``), never through the CUDA runtime.

The NVML module is passed in, so tests can hand over a narrow fake with the same call shapes
while every line here still runs. Each per-GPU field that the GPU does not support becomes an
``Unavailable``; NVML failing part-way keeps what was gathered and says where it stopped.
"""

from __future__ import annotations

import ctypes
import importlib.util
import sys
import threading
import warnings
from collections.abc import Callable
from itertools import combinations
from types import SimpleNamespace
from typing import Any, TypeVar

from mgpu_doctor.model.snapshot import GpuFacts, GpuLink, GpuProcess, MigDevice, NvmlFacts
from mgpu_doctor.model.unavailable import Unavailable, absent, failed
from mgpu_doctor.record import record

T = TypeVar("T")

NVML_TIMEOUT_S = 10.0
NVML_LIBRARY = "libnvidia-ml.so.1"  # the name pynvml opens on Linux

COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}
TOPOLOGY_LEVELS = {
    0: "internal", 10: "single", 20: "multiple", 30: "hostbridge", 40: "node", 50: "system",
}
P2P_STATUSES = {
    0: "ok", 1: "chipset_not_supported", 2: "gpu_not_supported",
    3: "ioh_topology_not_supported", 4: "disabled_by_regkey", 5: "not_supported", 6: "unknown",
}
THROTTLE_REASONS = (
    (0x1, "gpu_idle"), (0x2, "applications_clocks_setting"), (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"), (0x10, "sync_boost"), (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"), (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)
# NVML error codes (nvml.h) that mean "this GPU or driver does not offer that".
NOT_SUPPORTED_CODES = {2, 3, 13}  # invalid argument, not supported, function not found
LIBRARY_NOT_FOUND, DRIVER_NOT_LOADED, NO_PERMISSION, GPU_IS_LOST = 12, 9, 4, 15
NOT_FOUND, FUNCTION_NOT_FOUND, LIB_RM_VERSION_MISMATCH = 6, 13, 18
NVLINK_DEVICE_TYPE_SWITCH = 2  # nvmlIntNvLinkDeviceType_t: GPU 0, IBM NPU 1, switch 2


class _Stopped(Exception):
    """NVML failed in a way that ends the gathering (GPU lost, driver gone)."""


class _GpuLost(_Stopped):
    """One GPU fell off the bus (NVML_ERROR_GPU_IS_LOST); the others may still answer."""


def load_pynvml() -> Any:
    """Import pynvml (from ``nvidia-ml-py``) or explain why not.

    None where pynvml is installed but the driver library it opens is not: what nvmlInit would
    answer, known without importing the binding (a large module: a few percent of `check --quick`
    on a machine without a driver).
    """
    try:
        # The `pynvml` wrapper distribution (13.x) warns on import, and already when looked for,
        # that it is deprecated; the binding underneath is nvidia-ml-py's and works, so the
        # warning is noise in a report.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            if importlib.util.find_spec("pynvml") is not None and not _library_loads():
                return None
            import pynvml
    except ImportError as exc:
        raise ImportError(
            f"cannot import pynvml ({exc}); install nvidia-ml-py: pip install nvidia-ml-py"
        ) from exc
    return pynvml


def gather_nvml(nvml: Any | None = None, timeout_s: float = NVML_TIMEOUT_S) -> NvmlFacts | Unavailable:
    """Gather NVML facts in a helper thread; a driver that never answers becomes a fact."""
    if nvml is None:
        try:
            nvml = load_pynvml()
        except ImportError as exc:
            return absent(str(exc), cause="no-pynvml")
        if nvml is None:
            return _library_not_found()
    box: list[NvmlFacts | Unavailable] = []

    def work() -> None:
        try:
            box.append(_gather(nvml))
        except BaseException as exc:  # never let a probe crash the doctor
            box.append(failed(f"NVML probe raised {type(exc).__name__}: {exc}", "exception"))

    thread = threading.Thread(target=work, name="mgpu-doctor-nvml", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if not box:
        return failed(
            f"NVML did not answer within {timeout_s:.0f} s: the driver may be wedged "
            "(check `nvidia-smi` and `dmesg` for Xid errors)",
            cause="timeout",
        )
    return box[0]


def _gather(nvml: Any) -> NvmlFacts | Unavailable:
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return _init_failure(nvml, exc)
    try:
        return _gather_initialised(nvml)
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:  # shutting down a half-broken NVML must not hide the facts
            pass


def _library_loads() -> bool:
    """Whether the library pynvml opens on Linux loads."""
    if not sys.platform.startswith("linux"):
        return True  # pynvml looks elsewhere on other systems: let it
    try:
        ctypes.CDLL(NVML_LIBRARY)
    except OSError:
        return False
    return True


def _library_not_found() -> Unavailable:
    return absent(
        f"NVML library ({NVML_LIBRARY}) not found: no NVIDIA driver is installed, or this "
        "container was started without the NVIDIA runtime",
        cause="library-not-found",
    )


def _init_failure(nvml: Any, exc: Exception) -> Unavailable:
    code = getattr(exc, "value", None)
    if code == LIBRARY_NOT_FOUND:
        return _library_not_found()
    if code == DRIVER_NOT_LOADED:
        return absent(
            "NVIDIA driver is installed but not loaded (no GPU, or the kernel module failed "
            "to load: see `dmesg | grep -i nvidia`)",
            cause="driver-not-loaded",
        )
    if code == NO_PERMISSION:
        return failed(f"no permission to use NVML: {exc}", cause="no-permission")
    if code == LIB_RM_VERSION_MISMATCH:
        return failed(
            "driver/library version mismatch: the NVIDIA driver was upgraded but the old kernel "
            "module is still loaded (reboot, or unload and reload the nvidia modules)",
            cause="driver-library-mismatch",
        )
    return failed(f"nvmlInit failed: {exc}", cause=f"nvml-error:{code}")


def _gather_initialised(nvml: Any) -> NvmlFacts:
    driver = _text(nvml.nvmlSystemGetDriverVersion())
    cuda = _optional(nvml, lambda: _cuda_version(nvml.nvmlSystemGetCudaDriverVersion()))
    nvml_version = _optional(nvml, lambda: _text(nvml.nvmlSystemGetNVMLVersion()))
    gpus: list[GpuFacts] = []
    links: list[GpuLink] = []
    handles: list[Any] = []
    lost: list[str] = []
    partial = ""
    try:
        count = nvml.nvmlDeviceGetCount()
        for index in range(count):
            try:
                handle = _call(nvml, _bind(nvml.nvmlDeviceGetHandleByIndex, index))
                gpu = _gpu(nvml, index, handle)
            except _GpuLost as exc:  # the other GPUs still answer: keep enumerating
                lost.append(f"GPU {index} ({exc})")
                continue
            handles.append(handle)
            gpus.append(gpu)
        links = _links(nvml, gpus, handles)
    except (_Stopped, nvml.NVMLError) as exc:
        partial = (
            f"NVML stopped answering after {len(gpus)} GPU(s): {exc}; "
            "the facts below are incomplete"
        )
    if lost:
        partial = "; ".join(filter(None, [
            f"NVML lost {', '.join(lost)} part-way through; the other GPUs are listed", partial,
        ]))
    return NvmlFacts(
        driver_version=driver, cuda_driver_version=cuda, nvml_version=nvml_version,
        gpus=gpus, links=links, partial_error=partial,
    )


def _gpu(nvml: Any, index: int, h: Any) -> GpuFacts:
    memory = _call(nvml, lambda: nvml.nvmlDeviceGetMemoryInfo(h))
    return GpuFacts(
        index=index,
        name=_text(_call(nvml, lambda: nvml.nvmlDeviceGetName(h))),
        uuid=_text(_call(nvml, lambda: nvml.nvmlDeviceGetUUID(h))),
        pci_bus_id=_text(_call(nvml, lambda: nvml.nvmlDeviceGetPciInfo(h)).busId),
        memory_total_bytes=int(memory.total),
        memory_used_bytes=int(memory.used),
        compute_capability=_optional(
            nvml, lambda: "{}.{}".format(*nvml.nvmlDeviceGetCudaComputeCapability(h))
        ),
        persistence_mode=_optional(nvml, lambda: bool(nvml.nvmlDeviceGetPersistenceMode(h))),
        compute_mode=_optional(
            nvml, lambda: COMPUTE_MODES.get(nvml.nvmlDeviceGetComputeMode(h), "unknown")
        ),
        mig_mode=_optional(nvml, lambda: bool(nvml.nvmlDeviceGetMigMode(h)[0])),
        ecc_enabled=_optional(nvml, lambda: bool(nvml.nvmlDeviceGetEccMode(h)[0])),
        ecc_uncorrected_volatile=_optional(
            nvml, lambda: int(nvml.nvmlDeviceGetTotalEccErrors(h, 1, 0))  # uncorrected, volatile
        ),
        temperature_c=_optional(nvml, lambda: int(nvml.nvmlDeviceGetTemperature(h, 0))),
        throttle_reasons=_optional(nvml, lambda: _throttle_reasons(nvml, h)),
        pcie_gen_current=_optional(nvml, lambda: int(nvml.nvmlDeviceGetCurrPcieLinkGeneration(h))),
        pcie_gen_max=_optional(nvml, lambda: int(nvml.nvmlDeviceGetMaxPcieLinkGeneration(h))),
        pcie_width_current=_optional(nvml, lambda: int(nvml.nvmlDeviceGetCurrPcieLinkWidth(h))),
        pcie_width_max=_optional(nvml, lambda: int(nvml.nvmlDeviceGetMaxPcieLinkWidth(h))),
        processes=_optional(nvml, lambda: _processes(nvml, h)),
        mig_devices=_optional(nvml, lambda: _mig_devices(nvml, h)),
    )


def _mig_devices(nvml: Any, h: Any) -> list[MigDevice]:
    """The MIG devices of a GPU in MIG mode (empty when MIG is off)."""
    current, _pending = nvml.nvmlDeviceGetMigMode(h)
    if not current:
        return []
    found = []
    for slot in range(int(nvml.nvmlDeviceGetMaxMigDeviceCount(h))):
        try:
            mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(h, slot)
        except nvml.NVMLError as exc:
            if getattr(exc, "value", None) == NOT_FOUND:  # an empty slot
                continue
            raise
        memory = _optional(nvml, _bind(_memory_total, nvml, mig))
        found.append(MigDevice(index=slot, uuid=_text(nvml.nvmlDeviceGetUUID(mig)),
                               memory_total_bytes=memory))
    return found


def _memory_total(nvml: Any, h: Any) -> int:
    return int(nvml.nvmlDeviceGetMemoryInfo(h).total)


def _throttle_reasons(nvml: Any, h: Any) -> list[str]:
    # "Event" replaced "Throttle" in R535; drivers before it only have the old name.
    mask = int(_first_present(nvml, ("nvmlDeviceGetCurrentClocksEventReasons",
                                     "nvmlDeviceGetCurrentClocksThrottleReasons"), h))
    return [name for bit, name in THROTTLE_REASONS if mask & bit]


def _first_present(nvml: Any, names: tuple[str, ...], *args: Any) -> Any:
    """Call the first of ``names`` that both the binding and the driver have.

    A binding newer than the driver calls entry points the driver lacks (the ``_v3`` process
    lists on R470): NVML says FunctionNotFound, or the binding raises NVMLLibraryMismatchError
    for an unversioned name it maps to a newer version.
    """
    mismatch = getattr(nvml, "NVMLLibraryMismatchError", None)
    missing: tuple[type[BaseException], ...] = (mismatch,) if isinstance(mismatch, type) else ()
    last: BaseException | None = None
    for name in names:
        fn = getattr(nvml, name, None)
        if fn is None:
            continue
        try:
            return fn(*args)
        except nvml.NVMLError as exc:
            if getattr(exc, "value", None) != FUNCTION_NOT_FOUND:
                raise
            last = exc
        except missing as exc:
            last = exc
    if isinstance(last, nvml.NVMLError):
        raise last
    raise nvml.NVMLError(FUNCTION_NOT_FOUND) if last is None else _function_not_found(nvml, last)


def _function_not_found(nvml: Any, cause: BaseException) -> BaseException:
    try:
        exc = nvml.NVMLError(FUNCTION_NOT_FOUND)
    except Exception:  # a binding whose NVMLError cannot be built from a code
        return cause
    exc.__cause__ = cause
    return exc


def _processes(nvml: Any, h: Any) -> list[GpuProcess]:
    found = []
    for kind, stem in (("compute", "nvmlDeviceGetComputeRunningProcesses"),
                       ("graphics", "nvmlDeviceGetGraphicsRunningProcesses")):
        try:
            procs = _first_present(nvml, (stem, f"{stem}_v2"), h)
        except nvml.NVMLError as exc:
            if getattr(exc, "value", None) != FUNCTION_NOT_FOUND:
                raise
            # Bindings 11.515-12.x call only _v3 (R510+) and wrap no _v2: ask the driver's
            # _v2 entry point (R470 has it) through the binding's own library handle.
            procs = _processes_v2(nvml, h, f"{stem}_v2")
        for proc in procs:
            used = getattr(proc, "usedGpuMemory", None)
            memory: int | Unavailable = (
                int(used) if used is not None else absent("not reported (no permission?)")
            )
            found.append(GpuProcess(pid=int(proc.pid), used_memory_bytes=memory, kind=kind))
    return found


class _ProcessInfoV2(ctypes.Structure):
    """nvmlProcessInfo_v2_t (nvml.h)."""

    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


NVML_VALUE_NOT_AVAILABLE = 2**64 - 1
INSUFFICIENT_SIZE = 7


def _processes_v2(nvml: Any, h: Any, symbol: str) -> list[Any]:
    # The `pynvml` 11.x wrapper keeps the binding in pynvml.nvml and exports no private names.
    getter = getattr(nvml, "_nvmlGetFunctionPointer", None) or \
        getattr(getattr(nvml, "nvml", None), "_nvmlGetFunctionPointer", None)
    if getter is None:
        raise nvml.NVMLError(FUNCTION_NOT_FOUND)
    fn = getter(symbol)  # raises FunctionNotFound when the driver lacks it
    count = ctypes.c_uint(0)
    ret = fn(h, ctypes.byref(count), None)
    if ret == 0:
        return []
    if ret != INSUFFICIENT_SIZE:
        raise nvml.NVMLError(ret)
    count.value = count.value * 2 + 5  # room for processes started since
    infos = (_ProcessInfoV2 * count.value)()
    ret = fn(h, ctypes.byref(count), infos)
    if ret != 0:
        raise nvml.NVMLError(ret)
    return [SimpleNamespace(pid=i.pid, usedGpuMemory=None if i.usedGpuMemory == NVML_VALUE_NOT_AVAILABLE
                            else i.usedGpuMemory) for i in infos[:count.value]]


def _links(nvml: Any, gpus: list[GpuFacts], handles: list[Any]) -> list[GpuLink]:
    by_bus = {_bus_key(g.pci_bus_id): g.index for g in gpus}
    ends = {g.index: _nvlink_ends(nvml, h, by_bus) for g, h in zip(gpus, handles, strict=True)}
    links = []
    for (ga, ha), (gb, hb) in combinations(zip(gpus, handles, strict=True), 2):
        links.append(GpuLink(
            a=ga.index, b=gb.index,
            topology=_optional(nvml, _bind(_topology, nvml, ha, hb)),
            nvlink_links=_nvlink_count(ends[ga.index], ends[gb.index], gb.index),
            p2p_read=_optional(nvml, _bind(_p2p_read, nvml, ha, hb)),
        ))
    return links


def _topology(nvml: Any, ha: Any, hb: Any) -> str:
    return TOPOLOGY_LEVELS.get(nvml.nvmlDeviceGetTopologyCommonAncestor(ha, hb), "unknown")


def _p2p_read(nvml: Any, ha: Any, hb: Any) -> str:
    return P2P_STATUSES.get(nvml.nvmlDeviceGetP2PStatus(ha, hb, 0), "unknown")


def _bind(fn: Callable[..., T], *args: Any) -> Callable[[], T]:
    return lambda: fn(*args)


@record
class _NvlinkEnds:
    """Where one GPU's active NVLinks go: straight to peer GPUs, or into NVSwitches."""

    gpus: dict[int, int]  # peer NVML index -> links
    switches: dict[str, int]  # switch PCI bus id -> links


def _nvlink_count(
    a: _NvlinkEnds | Unavailable, b: _NvlinkEnds | Unavailable, b_index: int
) -> int | Unavailable:
    """NVLinks from a that reach b: direct links, plus through each NVSwitch both are wired to.

    Through NVSwitches (DGX A100: 2 links from every GPU to each of 6 switches) every GPU
    reaches every other with all its switch links; `nvidia-smi topo -m` shows NV12 there.
    """
    if isinstance(a, Unavailable):
        return a
    if isinstance(b, Unavailable):
        return b
    through = sum(min(n, b.switches[s]) for s, n in a.switches.items() if s in b.switches)
    return a.gpus.get(b_index, 0) + through


def _nvlink_ends(nvml: Any, h: Any, by_bus: dict[str, int]) -> _NvlinkEnds | Unavailable:
    peers: dict[int, int] = {}
    switches: dict[str, int] = {}
    for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            if not nvml.nvmlDeviceGetNvLinkState(h, link):
                continue
            remote = _bus_key(_text(nvml.nvmlDeviceGetNvLinkRemotePciInfo(h, link).busId))
        except nvml.NVMLError as exc:
            if getattr(exc, "value", None) in NOT_SUPPORTED_CODES:
                break  # no NVLink on this GPU, or no more links
            if getattr(exc, "value", None) == GPU_IS_LOST:
                raise _GpuLost(str(exc)) from exc
            return failed(f"NVLink query failed: {exc}")
        if remote in by_bus:
            peers[by_bus[remote]] = peers.get(by_bus[remote], 0) + 1
        elif _is_switch(nvml, h, link):
            switches[remote] = switches.get(remote, 0) + 1
    return _NvlinkEnds(peers, switches)


def _is_switch(nvml: Any, h: Any, link: int) -> bool:
    """Whether a link whose far end is no GPU of ours ends in an NVSwitch."""
    get_type = getattr(nvml, "nvmlDeviceGetNvLinkRemoteDeviceType", None)
    if get_type is None:  # bindings before 11.460: a non-GPU far end on x86 is an NVSwitch
        return True
    try:
        return bool(get_type(h, link) == NVLINK_DEVICE_TYPE_SWITCH)
    except nvml.NVMLError:
        return True


def _call(nvml: Any, fn: Callable[[], T]) -> T:
    """A call whose failure ends the gathering (the GPU's identity cannot be left out)."""
    try:
        return fn()
    except nvml.NVMLError as exc:
        if getattr(exc, "value", None) == GPU_IS_LOST:
            raise _GpuLost(str(exc)) from exc
        raise _Stopped(str(exc)) from exc


def _optional(nvml: Any, fn: Callable[[], T]) -> T | Unavailable:
    """A call whose failure is a fact about that field alone."""
    try:
        return fn()
    except nvml.NVMLError as exc:
        code = getattr(exc, "value", None)
        if code == GPU_IS_LOST:
            raise _GpuLost(str(exc)) from exc
        if code in NOT_SUPPORTED_CODES:
            return absent("not supported by this GPU or driver", cause="not-supported")
        return failed(str(exc), cause=f"nvml-error:{code}")


def _cuda_version(value: int) -> str:
    return f"{value // 1000}.{(value % 1000) // 10}"


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _bus_key(bus_id: str) -> str:
    """NVML bus ids come as 00000000:3B:00.0 or 0000:3b:00.0; compare them normalised."""
    domain, _, rest = bus_id.strip().lower().partition(":")
    try:
        return f"{int(domain, 16):08x}:{rest}" if rest else bus_id.lower()
    except ValueError:
        return bus_id.lower()

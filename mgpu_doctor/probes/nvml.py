"""GPU facts from NVML (through ``pynvml``), never through the CUDA runtime.

The NVML module is passed in, so tests can hand over a narrow fake with the same call shapes
while every line here still runs. Each per-GPU field that the GPU does not support becomes an
``Unavailable``; NVML failing part-way keeps what was gathered and says where it stopped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from itertools import combinations
from typing import Any, TypeVar

from mgpu_doctor.facts import Unavailable, absent, failed
from mgpu_doctor.snapshot import GpuFacts, GpuLink, GpuProcess, NvmlFacts

T = TypeVar("T")

NVML_TIMEOUT_S = 10.0

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


class _Stopped(Exception):
    """NVML failed in a way that ends the gathering (GPU lost, driver gone)."""


def load_pynvml() -> Any:
    """Import pynvml (from ``nvidia-ml-py``) or explain why not."""
    try:
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


def _init_failure(nvml: Any, exc: Exception) -> Unavailable:
    code = getattr(exc, "value", None)
    if code == LIBRARY_NOT_FOUND:
        return absent(
            "NVML library (libnvidia-ml.so.1) not found: no NVIDIA driver is installed, or this "
            "container was started without the NVIDIA runtime",
            cause="library-not-found",
        )
    if code == DRIVER_NOT_LOADED:
        return absent(
            "NVIDIA driver is installed but not loaded (no GPU, or the kernel module failed "
            "to load: see `dmesg | grep -i nvidia`)",
            cause="driver-not-loaded",
        )
    if code == NO_PERMISSION:
        return failed(f"no permission to use NVML: {exc}", cause="no-permission")
    return failed(f"nvmlInit failed: {exc}", cause=f"nvml-error:{code}")


def _gather_initialised(nvml: Any) -> NvmlFacts:
    driver = _text(nvml.nvmlSystemGetDriverVersion())
    cuda = _optional(nvml, lambda: _cuda_version(nvml.nvmlSystemGetCudaDriverVersion()))
    nvml_version = _optional(nvml, lambda: _text(nvml.nvmlSystemGetNVMLVersion()))
    gpus: list[GpuFacts] = []
    links: list[GpuLink] = []
    handles: list[Any] = []
    partial = ""
    try:
        count = nvml.nvmlDeviceGetCount()
        for index in range(count):
            handle = _call(nvml, _bind(nvml.nvmlDeviceGetHandleByIndex, index))
            handles.append(handle)
            gpus.append(_gpu(nvml, index, handle))
        links = _links(nvml, gpus, handles)
    except (_Stopped, nvml.NVMLError) as exc:
        partial = (
            f"NVML stopped answering after {len(gpus)} GPU(s): {exc}; "
            "the facts below are incomplete"
        )
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
    )


def _throttle_reasons(nvml: Any, h: Any) -> list[str]:
    getter = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    if getter is None:
        getter = nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    mask = int(getter(h))
    return [name for bit, name in THROTTLE_REASONS if mask & bit]


def _processes(nvml: Any, h: Any) -> list[GpuProcess]:
    found = []
    for kind, getter in (
        ("compute", nvml.nvmlDeviceGetComputeRunningProcesses),
        ("graphics", nvml.nvmlDeviceGetGraphicsRunningProcesses),
    ):
        for proc in getter(h):
            used = getattr(proc, "usedGpuMemory", None)
            memory: int | Unavailable = (
                int(used) if used is not None else absent("not reported (no permission?)")
            )
            found.append(GpuProcess(pid=int(proc.pid), used_memory_bytes=memory, kind=kind))
    return found


def _links(nvml: Any, gpus: list[GpuFacts], handles: list[Any]) -> list[GpuLink]:
    by_bus = {_bus_key(g.pci_bus_id): g.index for g in gpus}
    nvlinks = {g.index: _nvlink_peers(nvml, h, by_bus) for g, h in zip(gpus, handles, strict=True)}
    links = []
    for a, b in combinations(range(len(gpus)), 2):
        ha, hb = handles[a], handles[b]
        peers = nvlinks[a]
        links.append(GpuLink(
            a=a, b=b,
            topology=_optional(nvml, _bind(_topology, nvml, ha, hb)),
            nvlink_links=peers.get(b, 0) if not isinstance(peers, Unavailable) else peers,
            p2p_read=_optional(nvml, _bind(_p2p_read, nvml, ha, hb)),
        ))
    return links


def _topology(nvml: Any, ha: Any, hb: Any) -> str:
    return TOPOLOGY_LEVELS.get(nvml.nvmlDeviceGetTopologyCommonAncestor(ha, hb), "unknown")


def _p2p_read(nvml: Any, ha: Any, hb: Any) -> str:
    return P2P_STATUSES.get(nvml.nvmlDeviceGetP2PStatus(ha, hb, 0), "unknown")


def _bind(fn: Callable[..., T], *args: Any) -> Callable[[], T]:
    return lambda: fn(*args)


def _nvlink_peers(nvml: Any, h: Any, by_bus: dict[str, int]) -> dict[int, int] | Unavailable:
    """Active NVLink links of one GPU, counted per peer GPU index."""
    peers: dict[int, int] = {}
    for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            if not nvml.nvmlDeviceGetNvLinkState(h, link):
                continue
            remote = _bus_key(_text(nvml.nvmlDeviceGetNvLinkRemotePciInfo(h, link).busId))
        except nvml.NVMLError as exc:
            if getattr(exc, "value", None) in NOT_SUPPORTED_CODES:
                if link == 0:
                    return {}  # no NVLink on this GPU
                break
            if getattr(exc, "value", None) == GPU_IS_LOST:
                raise _Stopped(str(exc)) from exc
            return failed(f"NVLink query failed: {exc}")
        if remote in by_bus:
            peers[by_bus[remote]] = peers.get(by_bus[remote], 0) + 1
    return peers


def _call(nvml: Any, fn: Callable[[], T]) -> T:
    """A call whose failure ends the gathering (the GPU's identity cannot be left out)."""
    try:
        return fn()
    except nvml.NVMLError as exc:
        raise _Stopped(str(exc)) from exc


def _optional(nvml: Any, fn: Callable[[], T]) -> T | Unavailable:
    """A call whose failure is a fact about that field alone."""
    try:
        return fn()
    except nvml.NVMLError as exc:
        code = getattr(exc, "value", None)
        if code == GPU_IS_LOST:
            raise _Stopped(str(exc)) from exc
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

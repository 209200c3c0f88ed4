"""A narrow stand-in for the `pynvml` module: the same call shapes, driven by a spec.

Only the NVML boundary is fake; the probe code above it runs for real. Unsupported fields
raise NVMLError(NVML_ERROR_NOT_SUPPORTED) as NVML does on GPUs without that feature.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

NOT_SUPPORTED = 3
LIBRARY_NOT_FOUND = 12
DRIVER_NOT_LOADED = 9
GPU_IS_LOST = 15
NVML_NVLINK_MAX_LINKS = 18


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


@dataclass
class FakeGpu:
    name: str = "NVIDIA A100-SXM4-80GB"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    bus_id: str = "00000000:07:00.0"
    memory_total: int = 80 * 2**30
    memory_used: int = 500 * 2**20
    cc: tuple[int, int] | None = (8, 0)
    persistence: int | None = 1
    compute_mode: int | None = 0
    mig: int | None = 0
    ecc: int | None = 1
    ecc_uncorrected: int | None = 0
    temperature: int | None = 34
    throttle_mask: int | None = 0x1
    pcie_gen: tuple[int, int] | None = (4, 4)
    pcie_width: tuple[int, int] | None = (16, 16)
    processes: list[tuple[int, int | None]] = field(default_factory=list)
    nvlink_peers: list[str] = field(default_factory=list)  # remote bus ids, one per active link
    lost_after: str | None = None  # name of a call after which the GPU falls off the bus
    utilisation: int | None = 37  # percent busy over NVML's last sample period


@dataclass
class FakeMachine:
    driver: str = "560.35.03"
    cuda: int | None = 12060
    gpus: list[FakeGpu] = field(default_factory=list)
    init_error: int | None = None
    p2p: dict[tuple[int, int], int] = field(default_factory=dict)  # status per pair, default ok
    topology: dict[tuple[int, int], int] = field(default_factory=dict)  # default NVML_TOPOLOGY_NODE
    hang_in_init: bool = False


class FakeNvml:
    NVMLError = NVMLError
    NVML_NVLINK_MAX_LINKS = NVML_NVLINK_MAX_LINKS

    def __init__(self, machine: FakeMachine) -> None:
        self.m = machine
        self.calls: list[str] = []
        self.initialised = False

    # -- system
    def nvmlInit(self) -> None:
        if self.m.hang_in_init:
            import time

            time.sleep(3600)
        if self.m.init_error is not None:
            raise NVMLError(self.m.init_error)
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.initialised = False

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.m.driver

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return self._opt(self.m.cuda)

    def nvmlSystemGetNVMLVersion(self) -> bytes:
        return b"12.560.35.03"

    def nvmlDeviceGetCount(self) -> int:
        return len(self.m.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        if i >= len(self.m.gpus):
            raise NVMLError(2)
        return i

    # -- per GPU
    def _gpu(self, h: int, call: str) -> FakeGpu:
        gpu = self.m.gpus[h]
        self.calls.append(call)
        if gpu.lost_after is not None and gpu.lost_after in self.calls[:-1]:
            raise NVMLError(GPU_IS_LOST)
        return gpu

    @staticmethod
    def _opt(value: Any) -> Any:
        if value is None:
            raise NVMLError(NOT_SUPPORTED)
        return value

    def nvmlDeviceGetName(self, h: int) -> str:
        return self._gpu(h, "name").name

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return self._gpu(h, "uuid").uuid

    def nvmlDeviceGetPciInfo(self, h: int) -> Any:
        return SimpleNamespace(busId=self._gpu(h, "pci").bus_id.encode())

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        g = self._gpu(h, "memory")
        return SimpleNamespace(total=g.memory_total, used=g.memory_used, free=g.memory_total - g.memory_used)

    def nvmlDeviceGetCudaComputeCapability(self, h: int) -> tuple[int, int]:
        return self._opt(self._gpu(h, "cc").cc)

    def nvmlDeviceGetPersistenceMode(self, h: int) -> int:
        return self._opt(self._gpu(h, "persistence").persistence)

    def nvmlDeviceGetComputeMode(self, h: int) -> int:
        return self._opt(self._gpu(h, "compute_mode").compute_mode)

    def nvmlDeviceGetMigMode(self, h: int) -> tuple[int, int]:
        mig = self._opt(self._gpu(h, "mig").mig)
        return (mig, mig)

    def nvmlDeviceGetMaxMigDeviceCount(self, h: int) -> int:
        self._gpu(h, "mig_count")
        return 0  # MIG devices are the C mock's business (tests/mock_nvml)

    def nvmlDeviceGetEccMode(self, h: int) -> tuple[int, int]:
        ecc = self._opt(self._gpu(h, "ecc").ecc)
        return (ecc, ecc)

    def nvmlDeviceGetTotalEccErrors(self, h: int, error_type: int, counter_type: int) -> int:
        assert (error_type, counter_type) == (1, 0), "expects uncorrected, volatile"
        return self._opt(self._gpu(h, "ecc_errors").ecc_uncorrected)

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        return self._opt(self._gpu(h, "temperature").temperature)

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return self._opt(self._gpu(h, "clocks_event").throttle_mask)

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: int) -> int:
        return self._opt(self._gpu(h, "pcie").pcie_gen)[0]

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: int) -> int:
        return self._opt(self._gpu(h, "pcie").pcie_gen)[1]

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: int) -> int:
        return self._opt(self._gpu(h, "pcie").pcie_width)[0]

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: int) -> int:
        return self._opt(self._gpu(h, "pcie").pcie_width)[1]

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]:
        return [SimpleNamespace(pid=pid, usedGpuMemory=mem)
                for pid, mem in self._gpu(h, "processes").processes]

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        return SimpleNamespace(gpu=self._opt(self._gpu(h, "utilisation").utilisation), memory=0)

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: int) -> list[Any]:
        return []

    # -- between GPUs
    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:
        peers = self._gpu(h, "nvlink").nvlink_peers
        if not peers:
            raise NVMLError(NOT_SUPPORTED)
        if link >= len(peers):
            raise NVMLError(2)  # invalid argument: no such link
        return 1

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h: int, link: int) -> Any:
        return SimpleNamespace(busId=self.m.gpus[h].nvlink_peers[link])

    def nvmlDeviceGetTopologyCommonAncestor(self, a: int, b: int) -> int:
        return self.m.topology.get((a, b), 40)

    def nvmlDeviceGetP2PStatus(self, a: int, b: int, index: int) -> int:
        return self.m.p2p.get((a, b), 0)


def bus(i: int) -> str:
    return f"00000000:{0x07 + 0x10 * i:02X}:00.0"


def uuid(i: int) -> str:
    return f"GPU-{i:08x}-1111-2222-3333-444455556666"


def gpus(n: int, **kw: Any) -> list[FakeGpu]:
    return [FakeGpu(uuid=uuid(i), bus_id=bus(i), **kw) for i in range(n)]

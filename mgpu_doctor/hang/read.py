"""Read every process of the job at once: /proc at the start and end of a short interval (is its CPU
time moving?), py-spy's dumps in parallel threads meanwhile, and NVML's view of its GPUs."""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mgpu_doctor.hang import procfs
from mgpu_doctor.hang.pyspy import PySpy
from mgpu_doctor.model.hang import GpuUse, HangReading, ProcessReading, ThreadStack
from mgpu_doctor.model.unavailable import Unavailable, absent

INTERVAL_S = 1.0
MAX_PARALLEL = 16
STOPPED = ("T", "t")


def read_job(pids: Sequence[int], found_by: str, spy: PySpy,
             holders: dict[int, list[GpuUse]] | Unavailable, interval_s: float = INTERVAL_S,
             proc: Path = procfs.PROC, serves: dict[int, int] | None = None) -> HangReading:
    serves = serves or {}
    begun = time.monotonic()
    first = {pid: procfs.read_stat(pid, proc) for pid in pids}
    started = time.monotonic()

    def dump(pid: int) -> tuple[list[ThreadStack] | Unavailable, float]:
        stat = first[pid]
        if stat is None:
            return absent(f"PID {pid} is gone", "gone"), 0.0
        if stat.state == "Z":
            return absent(f"PID {pid} is a zombie: it exited, its parent has not reaped it", "zombie"), 0.0
        threads, took = spy.dump(pid, stopped=stat.state in STOPPED)
        now = procfs.read_stat(pid, proc)
        if isinstance(threads, Unavailable) and stat.state not in STOPPED and now is not None \
                and now.state in STOPPED:  # stopped meanwhile: ptrace cannot pause it again
            threads, more = spy.dump(pid, stopped=True)
            took += more
        return threads, took

    with ThreadPoolExecutor(max_workers=max(1, min(MAX_PARALLEL, len(pids)))) as pool:
        dumps = dict(zip(pids, pool.map(dump, pids), strict=True))
    time.sleep(max(0.0, interval_s - (time.monotonic() - started)))
    last = {pid: procfs.read_stat(pid, proc) for pid in pids}
    interval = time.monotonic() - started
    readings = []
    for pid in pids:
        before, after = first[pid], last[pid]
        state = after.state if after is not None else "gone"
        cpu = after.cpu_s - before.cpu_s if before is not None and after is not None else 0.0
        threads, took = dumps[pid]
        gpus: list[GpuUse] | Unavailable = holders.get(pid, []) if isinstance(holders, dict) else holders
        role = "" if pid in serves else procfs.role_of(pid, proc)  # a worker's is its parent's
        readings.append(ProcessReading(
            pid, role, procfs.command_line(pid, proc), state, round(cpu, 3),
            round(interval, 3), threads, gpus, round(took, 3), serves.get(pid, 0)))
    return HangReading(found_by, readings, spy.version(), round(time.monotonic() - begun, 3))

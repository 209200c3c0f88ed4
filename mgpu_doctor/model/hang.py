"""A running job read while it hangs (`mgpu-doctor hang`, `report --hang`): per process its stacks,
its state in /proc, whether its CPU time moves, and its GPUs, as facts; what each waits for and the
verdict are derived from them (``mgpu_doctor.hang``), so `check --from` replays them."""

from __future__ import annotations

from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.record import field, record


@record
class Frame:
    """One Python frame (or a native one, with ``line`` 0), as py-spy names it."""

    name: str  # the function, with its class where py-spy knows it (`OwnedIterator.__next__`)
    file: str  # py-spy's short file name: the path below site-packages (`tensorflow/python/...`)
    line: int = 0

    def __str__(self) -> str:
        return f"{self.name} ({self.file}:{self.line})" if self.line else f"{self.name} ({self.file})"


@record
class ThreadStack:
    """One thread's frames, innermost first."""

    name: str
    thread_id: int
    active: bool  # py-spy: on a CPU at the moment of the dump (not waiting)
    frames: list[Frame] = field(default_factory=list)


@record
class GpuUse:
    """What NVML says of the process on one GPU."""

    gpu_index: int
    used_memory_bytes: int | Unavailable
    utilisation_percent: int | Unavailable  # the GPU's, over NVML's last sample period


@record
class ProcessReading:
    """One process of the job: facts read from outside it, without stopping it longer than a dump."""

    pid: int
    role: str  # "worker 1" (its TF_CONFIG task), "rank 3" (Slurm), "" where nothing says
    command: str  # its command line, credentials masked
    # /proc/PID/stat: R running, S sleeping, D uninterruptible (I/O), T stopped, t traced, Z zombie;
    # "gone": it ended before it could be read
    state: str
    cpu_seconds: float  # CPU time (user + system) spent over the interval
    interval_s: float
    threads: list[ThreadStack] | Unavailable  # py-spy's dump, or why there is none
    gpus: list[GpuUse] | Unavailable = field(default_factory=list)
    dump_s: float = 0.0  # how long py-spy's dump took
    # The PID of the job's process this one works for (a multiprocessing or PyDataset worker, which
    # inherits its environment and role); 0: one of the job's own processes
    serves: int = 0

    @property
    def cpu_fraction(self) -> float:
        return self.cpu_seconds / self.interval_s if self.interval_s > 0 else 0.0


@record
class HangReading:
    """Every process of the job, and how they were found."""

    found_by: str  # "the PIDs given", "NVML", "TF_CONFIG", "Slurm job 1234"
    processes: list[ProcessReading]
    tool: str = ""  # the stack reader and its version (`py-spy 0.4.3`)
    duration_s: float = 0.0  # the whole reading: the interval and the dumps

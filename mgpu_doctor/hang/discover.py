"""Which processes make up the job: the PIDs given, the processes of a Slurm job on this node, or
the Python processes that hold GPUs (NVML) or carry a TF_CONFIG."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from mgpu_doctor.errors import BadInput
from mgpu_doctor.hang import procfs
from mgpu_doctor.model.hang import GpuUse
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.record import field, record

SLURM_TIMEOUT_S = 15.0
Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


@record
class Targets:
    pids: list[int]
    found_by: str
    serves: dict[int, int] = field(default_factory=dict)  # worker process -> the job's process


def with_workers(targets: Targets, holders: dict[int, list[GpuUse]] | Unavailable,
                 proc: Path = procfs.PROC) -> Targets:
    """The targets and the Python processes below them, each told apart: a child that inherited its
    parent's role and holds no GPU is a worker process of it (multiprocessing, a PyDataset's workers,
    a DataLoader-like pool); one with a role or GPU of its own is a process of the job (the ranks a
    launcher such as horovodrun started). A given PID below another given one is told apart the same
    way, so a worker found through its inherited TF_CONFIG is not taken for a second task."""
    parent_of = procfs.parents(proc)
    below = _descendants(set(targets.pids), parent_of)
    candidates = set(targets.pids) | {p for p in below if procfs.is_python(p, proc)}
    holding = holders if isinstance(holders, dict) else {}
    roles = {p: procfs.role_of(p, proc) for p in candidates}
    serves: dict[int, int] = {}
    for pid in sorted(candidates):
        above = _nearest_above(pid, candidates, parent_of)
        if above is not None and pid not in holding and roles[pid] == roles[above]:
            serves[pid] = above
    for pid, above in serves.items():  # a worker's worker serves the job's process at the top
        while above in serves:
            above = serves[above]
        serves[pid] = above
    added = len(candidates) - len(set(targets.pids))
    how = targets.found_by + (f", with the {added} Python process{'es' if added != 1 else ''} they started"
                              if added else "")
    return Targets(sorted(candidates), how, serves)


def _descendants(roots: set[int], parent_of: dict[int, int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, parent in parent_of.items():
        children.setdefault(parent, []).append(pid)
    found: set[int] = set()
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found and child not in roots:
                found.add(child)
                todo.append(child)
    return found


def _nearest_above(pid: int, among: set[int], parent_of: dict[int, int]) -> int | None:
    seen = {pid}
    parent = parent_of.get(pid, 0)
    while parent > 1 and parent not in seen:
        if parent in among:
            return parent
        seen.add(parent)
        parent = parent_of.get(parent, 0)
    return None


def given(pids: Sequence[int], proc: Path = procfs.PROC) -> Targets:
    missing = [p for p in pids if procfs.read_stat(p, proc) is None]
    if missing:
        raise BadInput(f"no process with PID {', '.join(map(str, missing))} on this machine")
    return Targets(list(dict.fromkeys(pids)), "the PIDs given")


def found(holders: dict[int, list[GpuUse]] | Unavailable, proc: Path = procfs.PROC,
          own: int | None = None) -> Targets:
    """Python processes that hold a GPU, and those started with a TF_CONFIG (not this one)."""
    own = os.getpid() if own is None else own
    holding = holders if isinstance(holders, dict) else {}
    on_gpu = [p for p in holding if p != own and procfs.is_python(p, proc)]
    with_config = [p for p in procfs.all_pids(proc) if p != own and p not in on_gpu
                   and procfs.environ_value(p, "TF_CONFIG", proc) is not None and procfs.is_python(p, proc)]
    how = [w for w, pids in (("NVML", on_gpu), ("TF_CONFIG", with_config)) if pids]
    if not how:
        gpu = ("" if isinstance(holders, dict) else f" (NVML: {holders.detail})")
        raise BadInput("no training process found: no Python process holds a GPU" + gpu + " or carries "
                       "a TF_CONFIG; give its PIDs (`mgpu-doctor hang PID ...`) or --slurm-job ID")
    return Targets(sorted(on_gpu + with_config), " and ".join(how))


def slurm_job(job: str, runner: Runner | None = None, which: Callable[[str], str | None] = shutil.which,
              proc: Path = procfs.PROC) -> Targets:
    """The Python processes of a Slurm job on this node (``scontrol listpids``)."""
    if not job.isdigit() and not job.replace("_", "").replace(".", "").isdigit():
        raise BadInput(f"--slurm-job {job!r}: a Slurm job id is a number (1234, 1234_5, 1234.0)")
    if which("scontrol") is None:
        raise BadInput("--slurm-job needs Slurm's scontrol, which is not on PATH here: run it on a node "
                       f"of the job, on every node with `srun --overlap --jobid {job} --ntasks-per-node=1 "
                       f"mgpu-doctor hang --slurm-job {job}`")
    run = runner or _run
    try:
        done = run(["scontrol", "listpids", job])
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BadInput(f"scontrol listpids {job}: {exc}") from None
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip().splitlines()
        raise BadInput(f"scontrol listpids {job}: {why[0] if why else f'exit {done.returncode}'} (is this a "
                       "node of the job?)")
    pids = []
    for line in done.stdout.splitlines()[1:]:  # PID JOBID STEPID LOCALID GLOBALID
        first = line.split()[:1]
        if first and first[0].isdigit() and procfs.is_python(int(first[0]), proc):
            pids.append(int(first[0]))
    if not pids:
        raise BadInput(f"Slurm job {job} has no Python process on this node")
    return Targets(sorted(set(pids)), f"Slurm job {job}")


def _run(command: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(command), capture_output=True, text=True, timeout=SLURM_TIMEOUT_S,
                          stdin=subprocess.DEVNULL)

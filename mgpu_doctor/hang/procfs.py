"""What /proc says of a process without touching it: its state, CPU time, command line, parent,
and the TF_CONFIG task it was started with."""

from __future__ import annotations

import json
import os
from pathlib import Path

from mgpu_doctor.process.masking import mask_credentials
from mgpu_doctor.record import record

PROC = Path("/proc")
TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
MAX_ENVIRON = 1 << 20


@record
class Stat:
    state: str  # R S D T t Z ...
    cpu_s: float  # user + system
    ppid: int


def read_stat(pid: int, proc: Path = PROC) -> Stat | None:
    """None: the process is gone (or never was)."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: the fields after its last ')'.
    fields = text[text.rindex(")") + 2:].split()
    return Stat(fields[0], (int(fields[11]) + int(fields[12])) / TICKS_PER_S, int(fields[1]))


def command_line(pid: int, proc: Path = PROC) -> str:
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return ""
    return mask_credentials(" ".join(a.decode(errors="replace") for a in raw.split(b"\0") if a))


def environ_value(pid: int, name: str, proc: Path = PROC) -> str | None:
    """One variable of the environment the process started with (None: unset or unreadable)."""
    try:
        with open(proc / str(pid) / "environ", "rb") as f:
            raw = f.read(MAX_ENVIRON)
    except OSError:
        return None
    prefix = name.encode() + b"="
    for entry in raw.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix):].decode(errors="replace")
    return None


def tf_config_role(text: str | None) -> str:
    """``worker 1`` from a TF_CONFIG; "" where there is none or it does not say."""
    if not text:
        return ""
    try:
        task = json.loads(text).get("task", {})
        return f"{task['type']} {int(task['index'])}"
    except (ValueError, TypeError, KeyError, AttributeError):
        return ""


def role_of(pid: int, proc: Path = PROC) -> str:
    """Which part of the job the process is: its TF_CONFIG task, else its Slurm or MPI rank."""
    role = tf_config_role(environ_value(pid, "TF_CONFIG", proc))
    if role:
        return role
    for name in ("SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        value = environ_value(pid, name, proc)
        if value is not None and value.isdigit():
            return f"rank {value}"
    return ""


def all_pids(proc: Path = PROC) -> list[int]:
    return sorted(int(p.name) for p in proc.iterdir() if p.name.isdigit())


def parents(proc: Path = PROC) -> dict[int, int]:
    """Every process's parent PID, read once."""
    found = {}
    for pid in all_pids(proc):
        stat = read_stat(pid, proc)
        if stat is not None:
            found[pid] = stat.ppid
    return found


def is_python(pid: int, proc: Path = PROC) -> bool:
    """Whether the process runs a Python interpreter (its executable, or its first argument)."""
    try:
        exe = os.readlink(proc / str(pid) / "exe")
    except OSError:
        exe = ""
    first = command_line(pid, proc).split(" ", 1)[0]
    return any("python" in Path(p).name for p in (exe, first) if p)

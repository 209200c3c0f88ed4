"""Every process a child started ends with it, in whatever session it put itself.

The children run in their own process group, and the group is killed when a run ends. A user's
model function can leave that group (``start_new_session=True``, a double fork, a daemon): those
processes carry the run's own environment variable (its heartbeat file, unique per run), so they
are found by it in ``/proc`` and killed. The doctor is also made a child subreaper where Linux
allows it (``prctl(PR_SET_CHILD_SUBREAPER)``): what escapes is then re-parented to the doctor, not
to the container's init, and reaped here instead of staying a zombie. A process that clears its
own environment escapes the search; nothing short of a cgroup finds that one.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
ROUNDS = 50  # a killed daemon's own children are re-parented and found on the next round
_state: dict[str, bool | None] = {"subreaper": None}


def become_subreaper() -> bool:
    """Make this process adopt its orphaned descendants (Linux 3.4+); False where it cannot."""
    if _state["subreaper"] is None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            _state["subreaper"] = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
        except (OSError, AttributeError):
            _state["subreaper"] = False
    return bool(_state["subreaper"])


def end_marked(name: str, value: str, proc: Path = Path("/proc")) -> int:
    """SIGKILL every process (but this one) whose environment holds ``name=value``; how many."""
    marker = f"\0{name}={value}\0".encode()
    me, ended = os.getpid(), 0
    for _ in range(ROUNDS):
        found = [pid for pid in _pids(proc) if pid != me and marker in _environ(proc, pid)]
        if not found:
            break
        for pid in found:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        ended += len(found)
        time.sleep(0.01)
        _reap(found)
    return ended


def _pids(proc: Path) -> list[int]:
    try:
        return [int(entry) for entry in os.listdir(proc) if entry.isdecimal()]
    except OSError:
        return []


def _environ(proc: Path, pid: int) -> bytes:
    """The process's environment as NUL-separated bytes ("" for a zombie, or one not ours)."""
    try:
        return b"\0" + (proc / str(pid) / "environ").read_bytes() + b"\0"
    except OSError:
        return b""


def _reap(pids: list[int]) -> None:
    """Collect the exit of those that were re-parented to this process (the others are not ours)."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.waitpid(pid, os.WNOHANG)

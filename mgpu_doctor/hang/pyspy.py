"""Python stacks of a running process, read from outside with py-spy (``pip install mgpu-doctor[hang]``).

py-spy is a child with a timeout, never imported: it attaches with ptrace, pauses the target for the
time of one dump (milliseconds), and prints every thread as JSON. What keeps it from working is
said in one line with its fix: py-spy missing, ptrace denied (who may trace whom, ``ptrace_scope``,
the container's ``CAP_SYS_PTRACE``), the process gone or not a Python.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from mgpu_doctor.model.hang import Frame, ThreadStack
from mgpu_doctor.model.unavailable import Unavailable, absent, failed
from mgpu_doctor.record import record

DUMP_TIMEOUT_S = 10.0
PTRACE_SCOPE = Path("/proc/sys/kernel/yama/ptrace_scope")
INSTALL = "pip install 'mgpu-doctor[hang]' (or: pip install py-spy)"
# What py-spy prints when the kernel refuses to let it read the process (EPERM).
_DENIED = ("permission denied", "operation not permitted", "eperm")
_CAP_SYS_PTRACE = 19  # linux/capability.h


class PySpyMissing(Exception):
    """py-spy is not installed where the doctor looks; the message says how to install it."""


@record
class PySpy:
    """The py-spy executable, and how it is asked."""

    executable: str
    native: bool = False  # native frames too: seconds per process (symbols of TensorFlow's libraries)
    timeout_s: float = DUMP_TIMEOUT_S

    def version(self) -> str:
        try:
            done = subprocess.run([self.executable, "--version"], capture_output=True, text=True,
                                  timeout=self.timeout_s, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            return "py-spy"
        return done.stdout.strip() or "py-spy"

    def dump(self, pid: int, stopped: bool = False) -> tuple[list[ThreadStack] | Unavailable, float]:
        """Every thread of ``pid``, innermost frame first, and the seconds the dump took.

        A stopped process (state T) cannot be paused again: it is read without pausing it
        (``--nonblocking``), which is exact since it does not run.
        """
        command = [self.executable, "dump", "--pid", str(pid), "--json"]
        command += ["--native"] if self.native else []
        command += ["--nonblocking"] if stopped else []
        begun = time.monotonic()
        try:
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, start_new_session=True)
        except OSError as exc:
            return failed(f"cannot run {self.executable}: {exc.strerror or exc}", "not-started"), 0.0
        try:
            out, err = proc.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            return failed(f"py-spy did not answer within {self.timeout_s:g} s", "timeout"), \
                time.monotonic() - begun
        took = time.monotonic() - begun
        if proc.returncode != 0:
            return dump_failure(pid, err or out), took
        try:
            return parse_dump(out), took
        except ValueError as exc:
            return failed(f"py-spy's output is not what it should be: {exc}", "bad-output"), took


def find_pyspy(executable: str | None = None) -> str:
    """py-spy beside the doctor's Python (a virtualenv not on PATH), else on PATH."""
    if executable:
        return executable
    beside = Path(sys.executable).parent / "py-spy"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("py-spy")
    if found is None:
        raise PySpyMissing(f"py-spy is not installed (it reads the running processes' stacks): {INSTALL}")
    return found


def parse_dump(text: str) -> list[ThreadStack]:
    """py-spy's ``dump --json``: a list of threads, each with its frames innermost first."""
    data = json.loads(text)
    if not isinstance(data, list):
        raise ValueError("not a list of threads")
    threads = []
    for raw in data:
        if not isinstance(raw, dict) or not isinstance(raw.get("frames"), list):
            raise ValueError("a thread without frames")
        frames = [Frame(str(f.get("name", "?")), str(f.get("short_filename") or f.get("filename") or "?"),
                        int(f.get("line") or 0))
                  for f in raw["frames"] if isinstance(f, dict)]
        threads.append(ThreadStack(str(raw.get("thread_name") or ""), int(raw.get("os_thread_id") or 0),
                                   bool(raw.get("active")), frames))
    return threads


def dump_failure(pid: int, output: str) -> Unavailable:
    """py-spy's complaint as one line that says what to do."""
    first = next((line.strip() for line in output.splitlines() if line.strip()), "no output")
    lower = output.lower()
    if any(word in lower for word in _DENIED):
        return failed(f"ptrace of PID {pid} not allowed ({first}): {ptrace_hint()}", "ptrace-denied")
    if "failed to get process executable name" in lower or "no such process" in lower:
        return absent(f"PID {pid} is gone (it ended before its stacks were read)", "gone")
    if "failed to find python version" in lower:
        return absent(f"PID {pid} is not a Python process (py-spy: {first})", "not-python")
    return failed(f"py-spy could not read PID {pid}: {first}", "py-spy")


def ptrace_hint(scope_file: Path = PTRACE_SCOPE, status_file: Path = Path("/proc/self/status")) -> str:
    """What lets py-spy read another process here: the fix for the rule that blocks it."""
    hints = ["run mgpu-doctor as the job's user, or with sudo"]
    try:
        scope = scope_file.read_text().strip()
    except OSError:
        scope = ""
    if scope:
        meaning = {"1": "only a parent may trace its children", "2": "only root (CAP_SYS_PTRACE) may trace",
                   "3": "no process may trace"}.get(scope, "")
        if meaning:
            hints.append(f"kernel.yama.ptrace_scope is {scope} ({meaning}): sudo, or "
                         "`sysctl kernel.yama.ptrace_scope=0` where policy allows")
    if not _has_cap_sys_ptrace(status_file):
        hints.append("in a container without CAP_SYS_PTRACE: start it with --cap-add SYS_PTRACE "
                     "(Kubernetes: securityContext.capabilities.add: [SYS_PTRACE])")
    return "; ".join(hints)


def _has_cap_sys_ptrace(status_file: Path) -> bool:
    try:
        for line in status_file.read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> _CAP_SYS_PTRACE & 1)
    except (OSError, ValueError, IndexError):
        pass
    return True  # cannot tell: say nothing about containers


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.communicate()

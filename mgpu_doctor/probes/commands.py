"""Run a short system command (``lspci``) with a timeout; probes take the runner as a parameter.

The command runs in its own session with stdin closed and its output going to a file, never a
pipe (a grandchild holding a pipe could block us); on a timeout its whole process group is
killed. Output beyond ``MAX_OUTPUT_BYTES`` is cut.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass

MAX_OUTPUT_BYTES = 8 * 2**20
KILL_WAIT_S = 1.0


@dataclass(frozen=True)
class CommandResult:
    """What a command printed; ``error`` says why there is nothing to use ("" when it ran)."""

    stdout: str
    returncode: int | None  # None: not started, or killed after the timeout
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.error


Runner = Callable[[Sequence[str], float], CommandResult]


def run_command(argv: Sequence[str], timeout_s: float) -> CommandResult:
    """Run ``argv`` (found on PATH) for at most ``timeout_s`` seconds."""
    program = shutil.which(argv[0])
    if program is None:
        return CommandResult("", None, f"{argv[0]} not found on PATH")
    with tempfile.TemporaryFile() as out:
        try:
            proc = subprocess.Popen([program, *argv[1:]], stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True,
                                    env={**os.environ, "LC_ALL": "C"})
        except OSError as exc:
            return CommandResult("", None, f"cannot run {argv[0]}: {exc}")
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            return CommandResult("", None, f"{argv[0]} did not finish within {timeout_s:g} s")
        except BaseException:
            _kill_group(proc)
            raise
        _kill_group(proc)  # anything it left in its group goes too
        out.seek(0)
        text = out.read(MAX_OUTPUT_BYTES).decode("utf-8", "replace")
    if proc.returncode != 0:
        return CommandResult(text, proc.returncode, f"{argv[0]} exited with status {proc.returncode}")
    return CommandResult(text, 0)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(KILL_WAIT_S)
    except subprocess.TimeoutExpired:  # pragma: no cover - a process in D state
        pass

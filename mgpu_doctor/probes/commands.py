"""Run a short system command (``lspci``) with a timeout; probes take the runner as a parameter.

The command goes through the doctor's one supervised runner (:func:`mgpu_doctor.process.childproc.run_tool`):
its own session, stdin closed, output to a file (never a pipe), at most ``MAX_OUTPUT_BYTES`` of it
read, and on a timeout the whole process group killed with the ladder.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence

from mgpu_doctor.process.childproc import run_tool
from mgpu_doctor.record import record

MAX_OUTPUT_BYTES = 8 * 2**20


@record
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
    ran = run_tool([program, *argv[1:]], timeout_s, keep_bytes=MAX_OUTPUT_BYTES,
                   env={**os.environ, "LC_ALL": "C"})
    if ran.start_error:
        return CommandResult("", None, f"cannot run {argv[0]}: {ran.start_error}")
    if ran.timed_out:
        return CommandResult("", None, f"{argv[0]} did not finish within {timeout_s:g} s")
    if ran.returncode != 0:
        why = f"crashed with {ran.signal_name}" if ran.signal_name else f"exited with status {ran.returncode}"
        return CommandResult(ran.stdout, ran.returncode, f"{argv[0]} {why}")
    return CommandResult(ran.stdout, 0)

"""The Python being diagnosed (``--python``), and running the child scripts under it.

Not a probe: probes, the smoke trainings and the multi-worker suite all run their children here.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from mgpu_doctor.process.childproc import ChildOutcome, ProgressCallback, run_child
from mgpu_doctor.record import record

CHILD_SCRIPTS = Path(__file__).resolve().parent.parent / "child_scripts"


@record
class Interpreter:
    """The Python whose environment is diagnosed; by default the doctor's own."""

    executable: str

    @classmethod
    def current(cls) -> Interpreter:
        return cls(sys.executable)

    def as_reported(self, executable: str) -> Interpreter:
        """This interpreter named by the path it reports for itself (``sys.executable``): a pyenv
        shim or a wrapper script execs the real one, and one report names it one way only."""
        return Interpreter(executable) if executable else self

    def problem(self) -> str:
        """Why this interpreter cannot be used, or "" when it can."""
        path = Path(self.executable)
        try:
            path.stat()
        except FileNotFoundError:
            return f"{self.executable}: no such file"
        except OSError as exc:  # in a folder the user may not search, a name too long, ...: the OS's words
            return f"{self.executable}: {exc.strerror or exc}"
        if path.is_dir():
            return f"{self.executable}: is a directory, not a Python interpreter"
        if not os.access(path, os.X_OK):
            return f"{self.executable}: not executable"
        return ""

    def run_script(
        self,
        name: str,
        *args: str,
        timeout_s: float,
        stall_timeout_s: float | None = None,
        env: Mapping[str, str] | None = None,
        on_tick: ProgressCallback | None = None,
    ) -> ChildOutcome:
        script = CHILD_SCRIPTS / name
        return run_child(
            [self.executable, str(script), *args],
            timeout_s=timeout_s, stall_timeout_s=stall_timeout_s, env=env, on_tick=on_tick,
        )

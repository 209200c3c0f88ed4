"""Running the planned smoke trainings with a progress line each on stderr, each run appended to
``--results`` as it ends; the ``--results`` file itself (redacted, masked, a full disk reported once)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, TextIO

from mgpu_doctor.errors import BadInput
from mgpu_doctor.model.redact import Identity, Redactor, redactor_for
from mgpu_doctor.model.serde import to_jsonable
from mgpu_doctor.model.smoke_runs import SmokeRun, SmokeSpec
from mgpu_doctor.model.snapshot import Snapshot
from mgpu_doctor.process.interpreter import Interpreter
from mgpu_doctor.process.masking import mask_credentials
from mgpu_doctor.process.terminal import redraws
from mgpu_doctor.smoke.plan import LEVELS, Level
from mgpu_doctor.smoke.rules import compare_with_single
from mgpu_doctor.smoke.runner import WORKER_SCRIPT, run_suite


def run_with_progress(specs: list[SmokeSpec], interpreter: Interpreter, stall_timeout_s: float,
                      stream: TextIO | None, results_file: ResultsFile | None, *,
                      env: dict[str, str] | None = None,
                      worker: Path = WORKER_SCRIPT) -> tuple[list[SmokeRun], bool]:
    """The worker's runs with a progress line each, each written to ``--results`` as it ends,
    compared with their 1-device twins; whether a stop signal cut the suite short."""
    progress = _RunProgress(len(specs), stream or sys.stderr)

    def on_run(run: SmokeRun) -> None:
        progress.finished(run)
        if results_file is not None:
            results_file.write(json.dumps(to_jsonable(run)) + "\n")
            results_file.flush()

    try:
        suite = run_suite(specs, python=interpreter.executable, stall_timeout_s=stall_timeout_s, env=env,
                          on_start=progress.started, on_run=on_run, worker=worker)
    finally:
        progress.done()
    return compare_with_single(suite.runs), suite.interrupted


def level_note(level: Level, runs: int) -> str:
    more = "" if level.name == "long" else f"; `--level long`: {LEVELS['long'].summary}"
    return f"Level {level.name}: {runs} smoke training(s), {level.summary}{more}."


class ResultsFile:
    """The ``--results`` JSONL, file-like: every line redacted (with ``redactor``) and its
    credentials masked before it is written, as everything else that leaves the process. A file
    that stops taking lines (a full disk) is reported once; the runs go on."""

    def __init__(self, path: Path, fh: IO[str], redactor: Redactor | None) -> None:
        self.path, self._fh, self._redactor = path, fh, redactor
        self._failed = False
        self.failure = ""  # why it stopped taking lines: the command exits 2 with it, as for --junit

    def write(self, text: str) -> None:
        if not self._failed:
            self._guarded(lambda: self._fh.write(self._redactor.text(text) if self._redactor
                                                 else mask_credentials(text)))

    def flush(self) -> None:
        if not self._failed:
            self._guarded(self._fh.flush)

    def _guarded(self, action: Callable[[], object]) -> None:
        try:
            action()
        except OSError as exc:
            self._failed = True
            self.failure = f"cannot write {self.path}: {exc.strerror or exc}"
            print(f"mgpu-doctor: warning: cannot write {self.path} ({exc.strerror or exc}): the runs go "
                  "on, their results are in the report", file=sys.stderr)

    def close(self) -> None:
        try:
            self._fh.close()
        except OSError as exc:  # what was buffered did not reach the disk
            if not self._failed:
                self._failed = True
                self.failure = f"cannot write {self.path}: {exc.strerror or exc}"


def open_results(path: Path | None, snapshot: Snapshot | None = None,
                 redact: bool = True) -> ResultsFile | None:
    """The results file, appended to; redacted for ``snapshot``'s machine unless ``redact`` is off."""
    if path is None:
        return None
    try:
        fh = open(path, "a", encoding="utf-8", errors="backslashreplace")  # noqa: SIM115 - closed by the caller
    except OSError as exc:
        raise BadInput(f"cannot write {path}: {exc.strerror or exc}") from None
    redactor = redactor_for(snapshot, Identity.current()) if redact and snapshot is not None else None
    return ResultsFile(path, fh, redactor)


class _RunProgress:
    """A line per finished run on stderr; on a terminal also a live line for the run in flight."""

    def __init__(self, total: int, stream: TextIO) -> None:
        self.total = total
        self.count = 0
        self.stream = stream
        self.live = redraws(stream)
        self.shown = False

    def started(self, spec: SmokeSpec) -> None:
        if self.live:
            self.stream.write(f"\r\x1b[K… smoke {self.count + 1}/{self.total}: {spec.label}")
            self.stream.flush()
            self.shown = True

    def finished(self, run: SmokeRun) -> None:
        self.count += 1
        self._clear()
        self.stream.write(f"mgpu-doctor: smoke {self.count}/{self.total} {run.status:<8} "
                          f"{run.name} ({run.duration_s:.1f} s)\n")
        self.stream.flush()

    def done(self) -> None:
        self._clear()

    def _clear(self) -> None:
        if self.live and self.shown:
            self.stream.write("\r\x1b[K")
            self.shown = False

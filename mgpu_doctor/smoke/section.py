"""The smoke trainings as a section of a report: plan, run, judge, and match against the matrix.

Used by `check`, `report` (through :mod:`mgpu_doctor.diagnose`) and `smoke`; no argparse here.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, TextIO

from mgpu_doctor.environment.matrix_view import environment_from_resolved
from mgpu_doctor.environment.resolve import ResolvedEnvironment, resolve
from mgpu_doctor.errors import BadInput
from mgpu_doctor.matrix.known_issues import load_matrix
from mgpu_doctor.matrix.paths import bundled_matrix_dir
from mgpu_doctor.model.findings import CheckOutcome, CheckStatus
from mgpu_doctor.model.redact import Identity, Redactor, redactor_for
from mgpu_doctor.model.serde import to_jsonable
from mgpu_doctor.model.smoke_runs import SmokeRun, SmokeSpec
from mgpu_doctor.model.snapshot import Snapshot
from mgpu_doctor.model.unavailable import Unavailable, interpreter_broken
from mgpu_doctor.model.user_model import ModelObservation
from mgpu_doctor.probes.gather import GatherOptions, Progress, gather_snapshot
from mgpu_doctor.probes.tensorflow import gather_tensorflow, tensorflow_installed
from mgpu_doctor.process.inputs import shorten
from mgpu_doctor.process.interpreter import Interpreter
from mgpu_doctor.process.masking import mask_credentials
from mgpu_doctor.process.terminal import redraws
from mgpu_doctor.smoke.known_issues import SmokeRunLike, with_known_issues
from mgpu_doctor.smoke.leak import with_leak_verdicts
from mgpu_doctor.smoke.plan import (
    LEVELS,
    Level,
    PlanError,
    SmokeOptions,
    batch_splits,
    check_device_counts,
    plan_runs,
)
from mgpu_doctor.smoke.request import SmokeRequest, after_model
from mgpu_doctor.smoke.rules import batch_split_outcomes, compare_with_single, smoke_outcomes
from mgpu_doctor.smoke.runner import WORKER_SCRIPT, run_suite


@dataclass
class SmokeSection:
    """What the smoke suite adds to a report."""

    outcomes: list[CheckOutcome] = field(default_factory=list)
    runs: list[SmokeRun] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    interrupted: bool = False
    snapshot: Snapshot | None = None  # with TensorFlow's view added when it had to be probed


def visible_gpus(snapshot: Snapshot) -> int:
    tf = snapshot.tensorflow
    if isinstance(tf, Unavailable) or isinstance(tf.physical_devices, Unavailable):
        return 0
    return sum(1 for d in tf.physical_devices if d.device_type == "GPU")


def judged_outcomes(
    runs: list[SmokeRun], snapshot: Snapshot, matrix_dirs: tuple[Path, ...] = (),
    stall_timeout_s: float | None = None, resolved: ResolvedEnvironment | None = None,
) -> list[CheckOutcome]:
    """One outcome per run; a failed run also says whether the known-issue matrix explains it."""
    tried = [r for r in runs if r.status != "skipped"]  # a skipped run did not fail
    return with_matrix_verdicts(smoke_outcomes(runs, stall_timeout_s), tried, snapshot, matrix_dirs,
                                resolved=resolved)


def with_matrix_verdicts(
    outcomes: list[CheckOutcome], failed: Sequence[SmokeRunLike], snapshot: Snapshot,
    matrix_dirs: tuple[Path, ...] = (), strategy: str = "mirrored",
    resolved: ResolvedEnvironment | None = None,
) -> list[CheckOutcome]:
    """The outcomes of the ``failed`` runs gain the verdict of the bundled (and --matrix) entries;
    ``resolved``: the machine's environment with the training profile applied (default: the
    snapshot's), whose layers and usage the user's model's runs are looked up with."""
    matrix = load_matrix(bundled_matrix_dir(), matrix_dirs)  # its problems: the known-issues check's
    environment = environment_from_resolved(resolved if resolved is not None else resolve(snapshot))
    outcomes = with_known_issues(outcomes, failed, matrix.issues, environment, strategy=strategy)
    probed = [run for run in failed if isinstance(run, SmokeRun)]  # the leak probe looks clean runs up too
    return with_leak_verdicts(outcomes, probed, matrix.issues, environment, strategy=strategy)


def replayed_section(
    runs: list[SmokeRun], snapshot: Snapshot, matrix_dirs: tuple[Path, ...] = (), level: str = "",
    resolved: ResolvedEnvironment | None = None,
) -> SmokeSection:
    """Smoke runs read back from a saved report (`check --from`), judged by today's rules and matrix."""
    at = f" (level {level if level in LEVELS else shorten(level)})" if level else ""
    return SmokeSection(outcomes=judged_outcomes(runs, snapshot, matrix_dirs, resolved=resolved), runs=runs,
                        notes=[f"{len(runs)} smoke run(s) replayed from the file{at}, not run here."])


def run_smoke_section(
    snapshot: Snapshot,
    options: SmokeOptions,
    interpreter: Interpreter,
    *,
    stall_timeout_s: float,
    results_file: ResultsFile | None = None,
    stream: TextIO | None = None,
    matrix_dirs: tuple[Path, ...] = (),
    resolved: ResolvedEnvironment | None = None,
    observation: ModelObservation | None = None,
) -> SmokeSection:
    """Plan and run the smoke suite for this snapshot's machine; never raises on Ctrl-C.

    ``observation``: the user's model as its own child built it; its runs start only where that
    worked (:func:`after_model`)."""
    options, model_note = after_model(options, observation)
    if options.backend == "jax":
        from mgpu_doctor.smoke.jax_section import run_jax_section

        return run_jax_section(snapshot, options, interpreter, stall_timeout_s=stall_timeout_s,
                               results_file=results_file, stream=stream, matrix_dirs=matrix_dirs)
    try:  # a bad option is exit 2 also where the suite is skipped
        check_device_counts(options, *gpu_count(snapshot))
    except PlanError as exc:
        raise BadInput(str(exc)) from None
    if interpreter_broken(snapshot.python):
        return SmokeSection(outcomes=[_skipped("the diagnosed Python does not work (`interpreter` check)")])
    if tensorflow_installed(snapshot.packages) is False:
        return SmokeSection(outcomes=[_skipped(f"TensorFlow is not installed for {interpreter.executable}")])
    if isinstance(snapshot.tensorflow, Unavailable) and snapshot.tensorflow.reason == "failed":
        return SmokeSection(outcomes=[_skipped(f"TensorFlow does not import: "
                                               f"{snapshot.tensorflow.detail.splitlines()[0]}")])
    try:
        specs = plan_runs(options, visible_gpus(snapshot))
        splits = batch_splits(options, visible_gpus(snapshot))
    except PlanError as exc:
        raise BadInput(str(exc)) from None
    if not specs and model_note:
        return SmokeSection(outcomes=[_skipped(model_note)], notes=[model_note])
    runs, interrupted = run_with_progress(specs, interpreter, stall_timeout_s, stream, results_file)
    notes = [model_note] if model_note else []
    nvml_gpus = 0 if isinstance(snapshot.nvml, Unavailable) else len(snapshot.nvml.gpus)
    if nvml_gpus > visible_gpus(snapshot) and visible_gpus(snapshot) < 2 <= nvml_gpus:
        notes.append(f"NVML sees {nvml_gpus} GPUs but TensorFlow sees {visible_gpus(snapshot)}, so "
                     "the smoke trainings could not use them; `mgpu-doctor check` says why.")
    if specs and specs[0].device_kind == "cpu-virtual":
        notes.append(f"Smoke trainings were simulated on {specs[0].virtual_devices} logical CPU devices "
                     "(fewer than 2 GPUs): correctness results hold, speed figures say nothing about "
                     "GPUs.")
    notes.append(level_note(options.plan_level, len(specs)))
    if interrupted:
        notes.append(f"Interrupted: {len(runs)} of {len(specs)} smoke runs finished.")
    outcomes = (judged_outcomes(runs, snapshot, matrix_dirs, stall_timeout_s, resolved)
                + batch_split_outcomes(splits))
    return SmokeSection(outcomes=outcomes, runs=runs, notes=notes, interrupted=interrupted)


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


def gpu_count(snapshot: Snapshot) -> tuple[int, str]:
    """The GPUs the smoke trainings can use, and who counted them: TensorFlow when it was asked,
    else NVML."""
    if not isinstance(snapshot.tensorflow, Unavailable):
        return visible_gpus(snapshot), "TensorFlow sees"
    return (0 if isinstance(snapshot.nvml, Unavailable) else len(snapshot.nvml.gpus)), "NVML finds"


def gather_for_smoke(interpreter: Interpreter, nvml_module: object = None,
                     progress: Progress | None = None, options: SmokeOptions | None = None) -> Snapshot:
    """The quick facts, plus TensorFlow's GPU list only where NVML sees a GPU at all.

    With ``options``, device counts NVML cannot satisfy are refused (BadInput) before TensorFlow
    is imported."""
    say: Progress = progress or (lambda *_a, **_k: None)
    snapshot = gather_snapshot(GatherOptions(interpreter, quick=True, nvml_module=nvml_module), say)
    if options is not None:
        try:
            check_device_counts(options, *gpu_count(snapshot))
        except PlanError as exc:
            raise BadInput(str(exc)) from None
    nvml = snapshot.nvml
    if not isinstance(nvml, Unavailable) and nvml.gpus:
        say("TensorFlow: counting the GPUs it sees (a few seconds)", slow=True)
        snapshot = replace(snapshot, tensorflow=gather_tensorflow(interpreter, snapshot.packages))
    return snapshot


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


def run_requested(snapshot: Snapshot, request: SmokeRequest, interpreter: Interpreter,
                  matrix_dirs: tuple[Path, ...] = (), stream: TextIO | None = None,
                  resolved: ResolvedEnvironment | None = None,
                  observation: ModelObservation | None = None) -> SmokeSection:
    """Run the smoke suite asked for, appending each run to the results file as it finishes."""
    results_file = open_results(request.results_path, snapshot, request.redact)
    try:
        return run_smoke_section(snapshot, request.options, interpreter,
                                 stall_timeout_s=request.stall_timeout_s, results_file=results_file,
                                 stream=stream, matrix_dirs=matrix_dirs, resolved=resolved,
                                 observation=observation)
    finally:
        if results_file is not None:
            results_file.close()


def _skipped(reason: str) -> CheckOutcome:
    return CheckOutcome("smoke", "Smoke trainings", CheckStatus.SKIPPED, skip_reason=reason)


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

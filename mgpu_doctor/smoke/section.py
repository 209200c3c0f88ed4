"""The smoke trainings as a section of a report: plan, run, judge, and match against the matrix.

Used by `check`, `report` (through :mod:`mgpu_doctor.diagnose`) and `smoke`; no argparse here.
``judged`` holds the section's result and verdicts, ``progress`` the run loop and ``--results``,
shared with ``jax_section`` (which this module calls for `--backend jax`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from mgpu_doctor.environment.resolve import ResolvedEnvironment
from mgpu_doctor.errors import BadInput
from mgpu_doctor.model.findings import CheckOutcome, CheckStatus
from mgpu_doctor.model.smoke_runs import SmokeRun
from mgpu_doctor.model.snapshot import Snapshot
from mgpu_doctor.model.unavailable import Unavailable, interpreter_broken
from mgpu_doctor.model.user_model import ModelObservation
from mgpu_doctor.probes.gather import GatherOptions, Progress, gather_snapshot
from mgpu_doctor.probes.tensorflow import gather_tensorflow, tensorflow_installed
from mgpu_doctor.process.inputs import shorten
from mgpu_doctor.process.interpreter import Interpreter
from mgpu_doctor.record import replace
from mgpu_doctor.smoke.judged import SmokeSection, judged_outcomes
from mgpu_doctor.smoke.plan import (
    LEVELS,
    PlanError,
    SmokeOptions,
    batch_splits,
    check_device_counts,
    plan_runs,
)
from mgpu_doctor.smoke.progress import ResultsFile, level_note, open_results, run_with_progress
from mgpu_doctor.smoke.request import SmokeRequest, after_model
from mgpu_doctor.smoke.rules import batch_split_outcomes


def visible_gpus(snapshot: Snapshot) -> int:
    tf = snapshot.tensorflow
    if isinstance(tf, Unavailable) or isinstance(tf.physical_devices, Unavailable):
        return 0
    return sum(1 for d in tf.physical_devices if d.device_type == "GPU")


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



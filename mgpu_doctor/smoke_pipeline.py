"""The pipeline behind `smoke` (diagnose.py's sibling): gather the quick facts and TensorFlow's GPU
list, build the user's model in a child (``--model``), run the single-host suite or the
multi-worker one (``--workers K``, ``--tf-config``), judge the runs, redact: one report.

The command line parses its options into a :class:`SmokeCommand`, calls :func:`run_smoke` and
renders what comes back; progress goes to stderr through the ``progress`` it passes in.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Protocol

from mgpu_doctor import __version__
from mgpu_doctor.checks import CHECKS, run_check
from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.checks.packages import LEGACY_WITHOUT_TF_KERAS, check_keras
from mgpu_doctor.environment.resolve import resolve
from mgpu_doctor.matrix.known_issues import load_matrix
from mgpu_doctor.matrix.paths import bundled_matrix_dir
from mgpu_doctor.model.findings import CheckOutcome, CheckStatus
from mgpu_doctor.model.multiworker import MultiWorkerRun
from mgpu_doctor.model.redact import Identity, redact_report
from mgpu_doctor.model.report import Report, new_report
from mgpu_doctor.model.serde import to_jsonable
from mgpu_doctor.model.snapshot import Snapshot
from mgpu_doctor.model.training import TrainingProfile
from mgpu_doctor.model.unavailable import Unavailable, interpreter_broken
from mgpu_doctor.model.user_model import ModelRequest
from mgpu_doctor.multiworker.findings import KERAS3_CODE, multiworker_outcomes, skipped_resumes
from mgpu_doctor.multiworker.resume import KILL_EPOCH, KILL_TASK
from mgpu_doctor.multiworker.suite import MultiWorkerPlan, run_plan
from mgpu_doctor.probes.tensorflow import tensorflow_installed
from mgpu_doctor.process.interpreter import Interpreter
from mgpu_doctor.record import record, replace
from mgpu_doctor.smoke.judged import with_matrix_verdicts
from mgpu_doctor.smoke.plan import LEVELS
from mgpu_doctor.smoke.progress import ResultsFile, open_results
from mgpu_doctor.smoke.request import SmokeRequest
from mgpu_doctor.smoke.section import gather_for_smoke, run_smoke_section
from mgpu_doctor.training.apply import with_training


class LiveProgress(Protocol):
    """Progress on stderr: ``(step, slow=False)`` shows a step, ``done()`` clears a live line."""

    def __call__(self, step: str, slow: bool = False) -> None: ...

    def done(self) -> None: ...


@record
class SmokeCommand:
    """What `smoke` was asked: the suite, how the user trains, the Python to diagnose, and either
    the multi-worker plan (validated TF_CONFIG) or None for the single-host suite."""

    request: SmokeRequest
    training: TrainingProfile
    interpreter: Interpreter
    matrix_dirs: tuple[Path, ...] = ()
    multiworker: MultiWorkerPlan | None = None
    model: ModelRequest | None = None  # --model: built and read in a child (single-host only)
    nvml_module: object = None  # a fake NVML for tests; None: the real one


@record
class SmokeDiagnosis:
    report: Report
    interrupted: bool = False  # a stop signal cut the suite short; the report has what finished
    results_failure: str = ""  # why the --results file stopped taking lines ("" when it did not)


def run_smoke(command: SmokeCommand, progress: LiveProgress) -> SmokeDiagnosis:
    request, training, interpreter = command.request, command.training, command.interpreter
    level = request.options.level
    snapshot = gather_for_smoke(interpreter, command.nvml_module, progress,
                                request.options if command.multiworker is None else None)
    progress.done()
    if interpreter_broken(snapshot.python):  # nothing can train under it: say why, run nothing
        interpreter_check = next(c for c in CHECKS if c.name == "interpreter")
        skipped = CheckOutcome("smoke", "Smoke trainings", CheckStatus.SKIPPED,
                               skip_reason="the diagnosed Python does not work")
        outcomes = [run_check(interpreter_check, resolve(snapshot)), skipped]
        return SmokeDiagnosis(new_report("smoke", "this machine", outcomes, tool_version=__version__,
                                         snapshot=snapshot, level=level))
    model_outcomes = []
    observation = None
    if command.model is not None and command.multiworker is None:
        from mgpu_doctor.probes.user_model import observe_model
        from mgpu_doctor.training.observed import model_outcome, with_observed

        observation = observe_model(command.model, interpreter)
        model_outcomes.append(model_outcome(observation))
        training = with_observed(training, observation)
    if not request.options.usage:  # the declared or observed usage adds its usage scenarios
        request = replace(request, options=replace(request.options, usage=training.facts().usage))
    results_file = open_results(request.results_path, snapshot, request.redact)
    try:
        if command.multiworker is not None:
            report, interrupted = multiworker_report(command.multiworker, interpreter, snapshot, results_file,
                                                     command.matrix_dirs, request.stall_timeout_s,
                                                     progress, level)
        else:
            section = run_smoke_section(snapshot, request.options, interpreter,
                                        stall_timeout_s=request.stall_timeout_s, results_file=results_file,
                                        matrix_dirs=command.matrix_dirs,
                                        resolved=with_training(resolve(snapshot), training),
                                        observation=observation)
            report = new_report("smoke", "this machine", model_outcomes + section.outcomes,
                                tool_version=__version__, snapshot=snapshot, notes=section.notes,
                                smoke_runs=section.runs, level=level, training=training)
            interrupted = section.interrupted
    finally:
        if results_file is not None:
            results_file.close()
    if request.redact:
        report = redact_report(report, snapshot, Identity.current())
    return SmokeDiagnosis(report, interrupted, results_file.failure if results_file is not None else "")


def multiworker_report(
    plan: MultiWorkerPlan,
    interpreter: Interpreter,
    snapshot: Snapshot,
    results_file: ResultsFile | None,
    matrix_dirs: tuple[Path, ...],
    stall_timeout_s: float,
    progress: LiveProgress,
    level: str = "",
) -> tuple[Report, bool]:
    """The multi-worker smoke's report (not redacted), and whether a stop signal cut it short."""
    notes = plan_notes(plan, level)
    outcomes: list[CheckOutcome] = []
    runs: list[MultiWorkerRun] = []
    interrupted = False
    skip = why_not(plan, snapshot, interpreter)
    if skip:
        outcomes.append(CheckOutcome("smoke/multiworker", "Multi-worker smoke training",
                                     CheckStatus.SKIPPED, skip_reason=skip))
    else:
        plan, skipped = without_missing_tf_keras(plan, snapshot, interpreter)
        outcomes += skipped
        runs, interrupted = _run(plan, interpreter, stall_timeout_s, results_file, progress)
        outcomes = judged(runs, snapshot, matrix_dirs) + skipped_resumes(plan.resume_runs(), runs) + outcomes
        notes += keras_notes(runs)
        if interrupted:
            finished = f"{len(runs)} of {plan.planned()} multi-worker runs finished"
            notes.append(f"Interrupted: {finished}.")
            # The report says what ran and what did not, not "0 checks ... no problems found".
            outcomes.append(CheckOutcome("smoke/multiworker", "Multi-worker smoke training",
                                         CheckStatus.SKIPPED,
                                         skip_reason=f"interrupted: {finished}; the rest did not run"))
    report = new_report("smoke", "this machine", outcomes, tool_version=__version__, snapshot=snapshot,
                        notes=notes, multiworker_runs=runs, level=level)
    return report, interrupted


def judged(
    runs: list[MultiWorkerRun], snapshot: Snapshot, matrix_dirs: tuple[Path, ...] = ()
) -> list[CheckOutcome]:
    """One outcome per run; a failure other than the known Keras 3 one is looked up in the matrix.

    Not a hang of one task of a cluster: its peers run elsewhere, and a peer that never came is
    far likelier than a TensorFlow bug ("not in the matrix, report it" would mislead).
    """
    outcomes = multiworker_outcomes(runs, load_matrix(bundled_matrix_dir(), matrix_dirs).issues)
    explained = {o.name for o in outcomes if any(f.code == KERAS3_CODE for f in o.findings)}
    unexplained = [r for r in runs if r.name not in explained and r.status not in ("ok", "stopped")
                   and not (r.mode == "task" and r.status == "hang")]
    return with_matrix_verdicts(outcomes, unexplained, snapshot, matrix_dirs,
                                strategy="multi_worker_mirrored")


def why_not(plan: MultiWorkerPlan, snapshot: Snapshot, interpreter: Interpreter) -> str:
    if tensorflow_installed(snapshot.packages) is False:
        return f"TensorFlow is not installed for {interpreter.executable}"
    return ""


def without_missing_tf_keras(
    plan: MultiWorkerPlan, snapshot: Snapshot, interpreter: Interpreter
) -> tuple[MultiWorkerPlan, list[CheckOutcome]]:
    """tf-keras runs cannot run without tf-keras: skipped, with how to install it. The
    environment's own Keras (``--keras env``) with TF_USE_LEGACY_KERAS=1 and no tf-keras fails in
    every worker: an error with the real cause (the `keras` check's finding), not run."""
    plan, outcomes = _without_broken_env_keras(plan, snapshot)
    plan, skipped = _without_tf_keras_runs(plan, snapshot, interpreter)
    return plan, outcomes + skipped


def _without_broken_env_keras(
    plan: MultiWorkerPlan, snapshot: Snapshot
) -> tuple[MultiWorkerPlan, list[CheckOutcome]]:
    if "env" not in plan.kerases:
        return plan, []
    try:
        findings = check_keras(resolve(snapshot))
    except CheckSkipped:
        return plan, []
    legacy = next((f for f in findings if f.code == LEGACY_WITHOUT_TF_KERAS), None)
    if legacy is None:
        return plan, []
    finding = replace(legacy, evidence=[*legacy.evidence, "so `tf.keras` fails in every worker: the "
                                        "multi-worker smoke with this environment's Keras was not run"])
    failed = CheckOutcome("smoke/multiworker", "Multi-worker smoke training", CheckStatus.FAILED, [finding])
    kept = tuple(k for k in plan.kerases if k != "env")
    return replace(plan, kerases=kept), [failed]


def _without_tf_keras_runs(
    plan: MultiWorkerPlan, snapshot: Snapshot, interpreter: Interpreter
) -> tuple[MultiWorkerPlan, list[CheckOutcome]]:
    packages = snapshot.packages
    if "tf-keras" not in plan.kerases or isinstance(packages, Unavailable) or "tf-keras" in packages.versions:
        return plan, []
    tensorflow = resolve(snapshot).tensorflow.text
    pin = f"'tf-keras~={'.'.join(tensorflow.split('.')[:2])}.0'" if tensorflow.count(".") >= 1 else "tf-keras"
    kept = tuple(k for k in plan.kerases if k != "tf-keras")  # may be empty: nothing left to run
    skipped = CheckOutcome("smoke/multiworker/tf-keras", "Multi-worker smoke training with tf-keras",
                           CheckStatus.SKIPPED,
                           skip_reason=f"tf-keras is not installed for {interpreter.executable} "
                                       f"(pip install {pin})")
    return replace(plan, kerases=kept), [skipped]


def plan_notes(plan: MultiWorkerPlan, level: str = "") -> list[str]:
    notes = []
    if plan.task is None:
        notes.append(f"Multi-worker smoke: {plan.workers} worker processes on this host, on CPU, with "
                     "TF_CONFIG on free 127.0.0.1 ports. It tests TensorFlow's collective runtime and Keras "
                     "under MultiWorkerMirroredStrategy, not the network or the GPUs between nodes: run it "
                     "under the scheduler (--tf-config or TF_CONFIG, one task per node) for those.")
    else:
        task = plan.task
        notes.append(f"Multi-worker smoke: this node is task {task.task_type}:{task.task_index} of "
                     f"{plan.workers} ({task.own_address}); the other tasks must run the same command at "
                     "the same time.")
    if plan.resume_layers:
        notes.append(f"Multi-worker resume test ({', '.join(plan.resume_layers)}): an uninterrupted "
                     f"training with BackupAndRestore, then one in which worker {KILL_TASK} is killed in "
                     f"epoch {KILL_EPOCH + 1} and the whole job restarted with the same backup directory "
                     f"(3 jobs of {plan.workers} workers each).")
    elif plan.task is not None and LEVELS.get(level) is not None and LEVELS[level].resume_layers:
        notes.append("The resume test runs with --workers K only: under a scheduler, restarting a job "
                     "after a lost worker is the scheduler's part.")
    return notes


def keras_notes(runs: list[MultiWorkerRun]) -> list[str]:
    """Which Keras each --keras choice turned out to be: the results depend on it."""
    seen: dict[str, str] = {}
    for run in runs:
        if run.framework:
            seen.setdefault(run.keras, run.framework)
    how = {"env": "TF_USE_LEGACY_KERAS as this environment has it", "default": "TF_USE_LEGACY_KERAS unset",
           "tf-keras": "TF_USE_LEGACY_KERAS=1"}
    notes = [f"Multi-worker smoke: tf.keras was {framework} ({how[keras]})."
             for keras, framework in seen.items()]
    if set(seen) == {"env"}:
        notes.append("`mgpu-doctor smoke --workers 2 --keras both` runs TensorFlow's default Keras and "
                     "tf-keras one after the other.")
    return notes


def _run(
    plan: MultiWorkerPlan, interpreter: Interpreter, stall_timeout_s: float, results_file: ResultsFile | None,
    progress: LiveProgress,
) -> tuple[list[MultiWorkerRun], bool]:
    total = plan.planned()

    def started(index: int, label: str) -> None:
        progress(f"multi-worker smoke {index + 1}/{total}: {label} (each worker imports TensorFlow)",
                 slow=True)

    def finished(run: MultiWorkerRun) -> None:
        progress.done()
        sys.stderr.write(f"mgpu-doctor: multi-worker smoke {run.status:<8} {run.name} "
                         f"({run.duration_s:.1f} s)\n")
        sys.stderr.flush()
        if results_file is not None:
            results_file.write(json.dumps(to_jsonable(run)) + "\n")
            results_file.flush()

    try:
        return run_plan(plan, interpreter, stall_timeout_s=stall_timeout_s, on_start=started,
                        on_run=finished, on_progress=lambda text: progress(text))
    finally:
        progress.done()

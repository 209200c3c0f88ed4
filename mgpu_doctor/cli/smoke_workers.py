"""`mgpu-doctor smoke --workers K` / `--tf-config`: the multi-worker smoke (MultiWorkerMirroredStrategy).

Part of the `smoke` sub-command (its options and its run live in ``cli/smoke.py``); this module
decides whether a multi-worker run was asked for, validates TF_CONFIG before anything starts,
and builds the report.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from mgpu_doctor import __version__
from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.checks.packages import LEGACY_WITHOUT_TF_KERAS, check_keras
from mgpu_doctor.cli.common import Progress, emit
from mgpu_doctor.cli.errors import UsageError
from mgpu_doctor.cli.options import OutputOptions
from mgpu_doctor.environment.resolve import resolve
from mgpu_doctor.model.findings import CheckOutcome, CheckStatus
from mgpu_doctor.model.multiworker import MultiWorkerRun
from mgpu_doctor.model.redact import Identity, redact_report
from mgpu_doctor.model.report import new_report
from mgpu_doctor.model.serde import to_jsonable
from mgpu_doctor.model.snapshot import Snapshot
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.multiworker.findings import KERAS3_CODE, multiworker_outcomes, skipped_resumes
from mgpu_doctor.multiworker.resume import KILL_EPOCH, KILL_TASK
from mgpu_doctor.multiworker.suite import (
    DEFAULT_LAYERS,
    MultiWorkerPlan,
    keras_choices,
    resume_layers,
    run_plan,
)
from mgpu_doctor.multiworker.tf_config import TfConfigError, check_addresses, parse_tf_config
from mgpu_doctor.probes.tensorflow import tensorflow_installed
from mgpu_doctor.process.inputs import InputError, read_text
from mgpu_doctor.process.interpreter import Interpreter
from mgpu_doctor.smoke.judged import with_matrix_verdicts
from mgpu_doctor.smoke.plan import DEFAULT_LEVEL, LEVELS, PlanError, parse_layers
from mgpu_doctor.smoke.progress import ResultsFile

MWMS_TASK_TYPES = ("chief", "worker")
# Local multi-worker smoke: each worker is a process importing TensorFlow (about 0.6 GB each).
MAX_LOCAL_WORKERS = 32


def plan_from(
    args: argparse.Namespace, environ: Mapping[str, str], level: str = DEFAULT_LEVEL
) -> MultiWorkerPlan | None:
    """The multi-worker plan asked for, or None for the single-host smoke. Raises UsageError.

    ``level``: ``long`` adds the resume test (local mode) for the layers LEVELS names."""
    workers = getattr(args, "workers", None)
    text, source = getattr(args, "tf_config", None), "--tf-config"
    if workers is not None and text:
        raise UsageError("--workers K starts K workers on this host, --tf-config runs this node's one "
                         "task of a cluster: give one of them")
    if text is not None and not text.strip():
        raise UsageError("--tf-config is empty: give the cluster as JSON or @FILE (or leave the option "
                         "out for the single-host smoke)")
    if workers is None and not text:
        text = environ.get("TF_CONFIG", "")
        if not text.strip():
            return None
        source = "TF_CONFIG (from the environment; unset it for the single-host smoke)"
    flag = "--workers" if workers is not None else source.split(" ")[0]
    for name in ("gpus", "batch_sizes", "model_sizes", "leak_probe"):
        if getattr(args, name, None):
            raise UsageError(f"--{name.replace('_', '-')} applies to the single-host smoke, not with {flag}")
    try:
        layers = parse_layers(args.layers) if getattr(args, "layers", None) else DEFAULT_LAYERS
    except PlanError as exc:
        raise UsageError(str(exc)) from None
    kerases = keras_choices(getattr(args, "keras", "env"))
    if workers is not None:
        if not 2 <= workers <= MAX_LOCAL_WORKERS:
            raise UsageError(f"--workers takes a number from 2 to {MAX_LOCAL_WORKERS} (each worker is a "
                             f"process importing TensorFlow on this host), got {workers}")
        return MultiWorkerPlan(workers, layers, kerases,
                               resume_layers=resume_layers(level, layers, local=True))
    assert text is not None
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            text = read_text(path, "a TF_CONFIG JSON file")
        except InputError as exc:
            raise UsageError(f"--tf-config: {exc}") from None
        except OSError as exc:
            raise UsageError(f"--tf-config: cannot read {path}: {exc.strerror or exc}") from None
        source = f"--tf-config @{path}"
    try:
        config = parse_tf_config(text, source)
        if config.task_type not in MWMS_TASK_TYPES:
            raise TfConfigError(f"{source}: task.type {config.task_type!r}: MultiWorkerMirroredStrategy "
                                "runs chief and worker tasks only")
        check_addresses(config)
    except TfConfigError as exc:
        raise UsageError(str(exc)) from None
    return MultiWorkerPlan(config.num_workers, layers, kerases, task=config,
                           resume_layers=resume_layers(level, layers, local=False))


def run_multiworker(
    plan: MultiWorkerPlan,
    interpreter: Interpreter,
    snapshot: Snapshot,
    results_file: ResultsFile | None,
    matrix_dirs: tuple[Path, ...],
    output: OutputOptions,
    stall_timeout_s: float,
    redact: bool = True,
    level: str = "",
) -> int:
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
        runs, interrupted = _run(plan, interpreter, stall_timeout_s, results_file)
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
    if redact:
        report = redact_report(report, snapshot, Identity.current())
    return emit(report, output, interrupted)


def judged(
    runs: list[MultiWorkerRun], snapshot: Snapshot, matrix_dirs: tuple[Path, ...] = ()
) -> list[CheckOutcome]:
    """One outcome per run; a failure other than the known Keras 3 one is looked up in the matrix.

    Not a hang of one task of a cluster: its peers run elsewhere, and a peer that never came is
    far likelier than a TensorFlow bug ("not in the matrix, report it" would mislead).
    """
    outcomes = multiworker_outcomes(runs)
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
    plan: MultiWorkerPlan, interpreter: Interpreter, stall_timeout_s: float, results_file: ResultsFile | None
) -> tuple[list[MultiWorkerRun], bool]:
    progress = Progress(sys.stderr)
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

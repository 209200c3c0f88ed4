"""What a multi-worker smoke run means for the user (pure): one CheckOutcome per run."""

from __future__ import annotations

import re
from collections.abc import Sequence

from mgpu_doctor.matrix.known_issues import KnownIssue, known_issue_line
from mgpu_doctor.matrix.signatures import normalised, pieces_in
from mgpu_doctor.model.findings import CheckOutcome, CheckStatus, Finding, Severity, status_for
from mgpu_doctor.model.multiworker import (
    RESUME_FAILED,
    MultiWorkerResume,
    MultiWorkerRun,
    WorkerOutcome,
    worst_status,
)
from mgpu_doctor.multiworker.launcher import MultiWorkerResult
from mgpu_doctor.multiworker.resume import KILL_EPOCH, KILL_TASK, ResumeJobs
from mgpu_doctor.record import replace
from mgpu_doctor.smoke.checkpoint import BACKUP_GUIDE, RELOAD_TOLERANCE

KERAS3_MWMS_ISSUE = "https://github.com/keras-team/keras/issues/20585"
TF_KERAS3_MWMS_ISSUE = "https://github.com/tensorflow/tensorflow/issues/72388"
MWMS_GUIDE = "https://www.tensorflow.org/tutorials/distribute/multi_worker_with_keras"
# gRPC honours https_proxy even for 127.0.0.1: a proxy that does not forward leaves the workers waiting.
PROXY_HANG_THREAD = "https://github.com/tensorflow/tensorflow/issues/24887"
PROXY_FIX = ("First take the proxy out of the workers' way: list the workers' hosts in no_proxy, as "
             "TF_CONFIG names them (export no_proxy=\"$no_proxy,127.0.0.1\" for this host's smoke), "
             "or start them without the proxy variables (`mgpu-doctor check` names them). ")
# Weights may differ in the last bits when reductions run in another order; more is a bug.
WEIGHT_TOLERANCE = 1e-5
KERAS3_CODE = "multiworker.keras3-fit-unsupported"
KERAS3_MWMS_ENTRY = "keras-20585-mwms-model-fit"  # the matrix entry with the same sources
STACK_LINES = 40
# TensorFlow's C++ info/warning log lines (I0000 00:00:... file.cc:12]) say nothing about a failure.
CPP_CHATTER = re.compile(r"^[IW]\d{4} ")
# How gRPC and the collectives say a peer is gone (the worker that is left raises this, not a hang).
LOST_PEER = re.compile(r"UnavailableError|connection reset by peer|Socket closed|failed to connect to all "
                       r"addresses|peer.*(?:down|unavailable)|Connection refused", re.IGNORECASE)
PEER_TASK = re.compile(r"/job:\w+/replica:\d+/task:\d+|\btask:\d+")
KERAS_LABELS = {"env": "", "default": "TensorFlow's default Keras",
                "tf-keras": "tf-keras (TF_USE_LEGACY_KERAS=1)"}


def multiworker_run(
    result: MultiWorkerResult, *, layer: str, variant: str = "", workers: int, mode: str, keras: str,
    tf_config: str = "",
) -> MultiWorkerRun:
    """The report's record of one launch (the weights themselves stay out: only their agreement)."""
    difference = result.max_weight_difference() if result.ok else None
    frameworks = sorted({w.keras for w in result.workers if w.keras})
    return MultiWorkerRun(
        layer=layer, variant=variant, workers=workers, mode=mode, keras=keras,
        status=worst_status([w.status for w in result.workers]), worker_outcomes=list(result.workers),
        framework=", ".join(frameworks),
        max_weight_difference=difference,
        weights_identical=None if difference is None else difference <= WEIGHT_TOLERANCE,
        tf_config=tf_config, duration_s=result.duration_s,
    )


def resume_run(
    jobs: ResumeJobs, *, layer: str, variant: str = "", workers: int, keras: str,
) -> MultiWorkerRun:
    """The report's record of one resume test: the worker outcomes of the job that failed, or of
    the restarted job, and what the three jobs measured."""
    stage, job = "reference", jobs.reference
    if jobs.killed is not None:
        stage, job = "killed", jobs.killed
    if jobs.restarted is not None:
        stage, job = "restarted", jobs.restarted
    seconds = {name: round(j.duration_s, 1) for name, j in
               (("reference", jobs.reference), ("killed", jobs.killed), ("restarted", jobs.restarted))
               if j is not None}
    resume = MultiWorkerResume(stage=stage, killed_task=KILL_TASK, killed_in_epoch=KILL_EPOCH + 1,
                               backup_lost=jobs.backup_lost, job_seconds=seconds)
    if jobs.killed is not None:
        victim = next((w for w in jobs.killed.workers if w.task_index == KILL_TASK), None)
        others = [w.duration_s for w in jobs.killed.workers if w.task_index != KILL_TASK]
        resume = replace(
            resume, killed_job=[f"worker {w.task_index}: {w.summary}" for w in jobs.killed.workers],
            stopped_after_s=(round(max(0.0, max(others) - victim.duration_s), 2)
                             if victim is not None and others and jobs.kill_went_as_planned else None))
    status = worst_status([w.status for w in job.workers])
    if stage == "killed" and status == "ok":  # every worker finished: nobody was killed
        status = RESUME_FAILED
        resume = replace(resume, error=f"worker {KILL_TASK} was not killed in epoch {KILL_EPOCH + 1} "
                                       "as planned: every worker finished the training")
    if stage == "restarted" and job.ok:
        resume = _compared(resume, jobs.reference, job)
        if resume.error or resume.differs or resume.resumed_at_epoch != KILL_EPOCH:
            status = RESUME_FAILED
    return MultiWorkerRun(
        layer=layer, variant=variant, workers=workers, mode="local", keras=keras, status=status,
        worker_outcomes=list(job.workers),
        framework=", ".join(sorted({w.keras for w in job.workers if w.keras})),
        duration_s=sum(j.duration_s for j in (jobs.reference, jobs.killed, jobs.restarted) if j is not None),
        kind="resume", resume=resume,
    )


def _compared(resume: MultiWorkerResume, reference: MultiWorkerResult,
              restarted: MultiWorkerResult) -> MultiWorkerResume:
    """Where the restarted job began and how far its final weights are from the reference's."""
    starts = {w.task_index: (w.epochs_begun[0] if w.epochs_begun else None) for w in restarted.workers}
    ours = reference.weights.get(0, [])
    theirs = [restarted.weights.get(w.task_index, []) for w in restarted.workers]
    errors = []
    if len(set(starts.values())) > 1:
        errors.append("the restarted workers began at different epochs: "
                      + ", ".join(f"worker {i}: {_epoch(e)}" for i, e in sorted(starts.items())))
    if not ours or any(len(t) != len(ours) for t in theirs):
        errors.append("the restarted workers reported other weights than the reference "
                      f"({len(ours)} values; restarted: {', '.join(str(len(t)) for t in theirs)})")
        diff = None
    else:
        diff = max(abs(a - b) for t in theirs for a, b in zip(ours, t, strict=True))
    return replace(resume, resumed_at_epoch=starts.get(0), max_abs_diff=diff,
                   max_abs_reference=max((abs(v) for v in ours), default=0.0), error="; ".join(errors))


def training_failed(
    runs: list[MultiWorkerRun], layer: str, variant: str, keras: str
) -> MultiWorkerRun | None:
    """The training of this layer, variant and Keras when it did not pass: its resume test is not
    run (its reference job would fail alike)."""
    return next((r for r in runs if r.kind == "train" and r.status != "ok"
                 and (r.layer, r.variant, r.keras) == (layer, variant, keras)), None)


def skipped_resumes(planned: list[tuple[str, str, str]], runs: list[MultiWorkerRun]) -> list[CheckOutcome]:
    """A skipped outcome for each planned resume test (layer, variant, keras) that was not run
    because its training failed."""
    out = []
    for layer, variant, keras in planned:
        failed = training_failed(runs, layer, variant, keras)
        if failed is not None and not any(r.kind == "resume" and (r.layer, r.variant, r.keras)
                                          == (layer, variant, keras) for r in runs):
            title = _title(replace(failed, kind="resume"))
            out.append(CheckOutcome(f"{failed.name}/resume", title, CheckStatus.SKIPPED,
                                    skip_reason=f"the training itself did not pass ({failed.name}: "
                                                f"{failed.status})"))
    return out


def _epoch(value: int | None) -> str:
    return "none" if value is None else str(value + 1)


# Every finding code of a multi-worker run; LAYER is the model trained.
CODES = (
    "multiworker.LAYER.ok", "multiworker.LAYER.hang", "multiworker.LAYER.crash", "multiworker.LAYER.error",
    "multiworker.LAYER.nan", "multiworker.LAYER.diverged", "multiworker.LAYER.lost-peer",
    "multiworker.LAYER.weights-differ", "multiworker.keras3-fit-unsupported",
)
# ... and those only the resume test makes (its jobs' own failures have the codes above).
RESUME_CODES = (
    "multiworker.LAYER.restarted-from-scratch", "multiworker.LAYER.resume-differs",
    "multiworker.LAYER.resume-failed",
)


def multiworker_outcomes(runs: list[MultiWorkerRun], issues: Sequence[KnownIssue] = ()) -> list[CheckOutcome]:
    """One outcome per run. ``issues``: the matrix; its Keras 3 + MultiWorkerMirroredStrategy entry's
    lines tell a worker's failure in model.fit for that known limitation."""
    out = []
    for run in runs:
        findings = sorted(run_findings(run, issues), key=lambda f: f.severity, reverse=True)
        out.append(CheckOutcome(run.name, _title(run), status_for(findings), findings))
    return out


def run_findings(run: MultiWorkerRun, issues: Sequence[KnownIssue] = ()) -> list[Finding]:
    keras3 = next((i for i in issues if i.id == KERAS3_MWMS_ENTRY), None)
    if run.kind == "resume" and run.resume is not None:
        return resume_findings(run, run.resume, keras3)
    return _training_findings(run, keras3)


def _training_findings(run: MultiWorkerRun, keras3: KnownIssue | None) -> list[Finding]:
    failed = [w for w in run.worker_outcomes if w.status not in ("ok", "stopped")]
    stopped = [w for w in run.worker_outcomes if w.status == "stopped"]
    if failed:
        findings: list[Finding] = []
        for worker in failed:
            finding = _failure(run, worker, stopped, keras3)
            same = next((f for f in findings if f.code == KERAS3_CODE == finding.code), None)
            if same is None:
                findings.append(finding)
            else:  # every worker fails alike in model.fit: one finding, each worker in its evidence
                workers = [e for e in same.evidence if e.startswith("worker ")]
                rest = [e for e in same.evidence if not e.startswith("worker ")]
                merged = [*workers, finding.evidence[0], *rest]
                findings[findings.index(same)] = replace(same, evidence=merged)
        return findings
    if stopped:  # every worker stopped by the launcher: interrupted, nothing to judge
        return [Finding(f"multiworker.{run.layer}.error", Severity.ERROR,
                        f"{_label(run)}: the workers were stopped before they finished",
                        [f"worker {w.task_index}: {w.summary}" for w in stopped],
                        fix="Run it again and let it finish.")]
    per_worker = [f"worker {w.task_index}: loss {_losses(w)}; {w.keras}" for w in run.worker_outcomes]
    difference = run.max_weight_difference
    if not run.weights_identical:
        return [Finding(
            f"multiworker.{run.layer}.weights-differ", Severity.ERROR,
            f"{_label(run)}: the workers ended with different weights: the all-reduce did not "
            "keep them in sync",
            per_worker + [f"largest difference of one weight between workers: {difference:.3g}"
                          if difference is not None
                          else "the workers returned weight lists of different sizes"],
            fix="Check that every worker runs the same TensorFlow/Keras and the same program; "
            "rerun with NCCL_DEBUG=INFO / TF_CPP_MIN_LOG_LEVEL=0 and report it if it persists.",
            links=[MWMS_GUIDE],
        )]
    how = ("compared in the parent" if run.mode == "local" and run.workers > 1
           else "all-gathered over the cluster by the worker")
    return [Finding(
        f"multiworker.{run.layer}.ok", Severity.OK,
        f"{run.workers} workers trained with MultiWorkerMirroredStrategy and ended with the same weights",
        per_worker + [f"largest weight difference between workers ({how}): {difference:g}",
                      f"took {run.duration_s:.1f} s"],
    )]


STAGE_LABELS = {"reference": "the uninterrupted reference job",
                "killed": f"the job whose worker {KILL_TASK} was to be killed in epoch {KILL_EPOCH + 1}",
                "restarted": "the restarted job"}
SHARED_BACKUP_FIX = (
    "Give BackupAndRestore(backup_dir=...) a directory on storage every worker can read and that "
    "outlives the job (a shared file system, or gs:// / s3:// through tf.io.gfile; not a node-local "
    "/tmp or a pod's own disk): the chief writes backup_dir/chief and every worker, restarted on "
    "any node, restores from there. Pass the same backup_dir on the restart, do not clean it "
    "between attempts, and restart every worker of the job, not only the lost one.")
SAME_TRAINING_FIX = (
    "Restart with the same model code, compile arguments, strategy and number of workers: a "
    "backup only fits the training that wrote it. With save_freq='epoch' the restart redoes the "
    "interrupted epoch from the beginning of the dataset, so every epoch must get the same batches "
    "(a seeded shuffle, steps_per_epoch covering whole passes of a repeated dataset); with an "
    "integer save_freq the restart counts on from the saved step but its dataset iterator starts "
    "from the beginning.")


def resume_findings(run: MultiWorkerRun, resume: MultiWorkerResume,
                    keras3: KnownIssue | None = None) -> list[Finding]:
    """The resume test: a job that failed on its own, or where the restart began and ended."""
    where = f"resume test, {STAGE_LABELS.get(resume.stage, resume.stage)}"
    killed = [f"killed job: {'; '.join(resume.killed_job)}"] if resume.killed_job else []
    if run.status not in ("ok", RESUME_FAILED):  # a worker of one of the jobs failed by itself
        return [replace(f, title=f"{f.title} ({where})",
                        evidence=[f"during the {where}", *killed, *f.evidence])
                for f in _training_findings(run, keras3)]
    label = _label(run)
    if resume.stage != "restarted":  # the jobs ran, but not as planned
        return [Finding(
            f"multiworker.{run.layer}.resume-failed", Severity.ERROR,
            f"{label}: the resume test could not run as planned ({where})",
            [resume.error or "no result", *killed],
            fix="Run it again; if it persists, run the worker with the same TF_CONFIG by hand.",
            links=[BACKUP_GUIDE],
        )]
    evidence = [*killed]
    if resume.stopped_after_s is not None:
        evidence.append(f"the launcher stopped the other workers {resume.stopped_after_s:.1f} s after "
                        f"worker {resume.killed_task} died")
    starts = {w.task_index: w.epochs_begun for w in run.worker_outcomes}
    evidence.append("restarted job (fresh ports, the same backup_dir), epochs begun (1-based): "
                    + "; ".join(f"worker {i}: {', '.join(str(e + 1) for e in epochs) or 'none'}"
                                for i, epochs in sorted(starts.items())))
    if resume.max_abs_diff is not None:
        evidence.append(f"largest final-weight difference to the uninterrupted reference: "
                        f"{resume.max_abs_diff:.3g} (tolerance {resume.tolerance:.3g}: {RELOAD_TOLERANCE:g} "
                        f"x max(1, largest weight {resume.max_abs_reference or 0.0:.3g}))")
    if resume.backup_lost:
        evidence.append("test-only fault MGPU_DOCTOR_TEST_FORGET_BACKUP: the backup directory was "
                        "emptied before the restart")
    evidence.append("jobs: " + ", ".join(f"{name} {s:.1f} s" for name, s in resume.job_seconds.items()))
    killed_in, began = resume.killed_in_epoch, resume.resumed_at_epoch
    findings = []
    if resume.restarted_from_scratch:
        findings.append(Finding(
            f"multiworker.{run.layer}.restarted-from-scratch", Severity.ERROR,
            f"{label}: worker {resume.killed_task} was killed in epoch {killed_in} and the restarted "
            f"job began again at epoch {_epoch(began)}: it did not find its BackupAndRestore backup",
            evidence, fix=SHARED_BACKUP_FIX, links=[BACKUP_GUIDE, MWMS_GUIDE],
        ))
    elif began is not None and began != killed_in - 1:
        findings.append(Finding(
            f"multiworker.{run.layer}.resume-differs", Severity.ERROR,
            f"{label}: killed in epoch {killed_in}, the restarted job began at epoch {_epoch(began)} "
            f"instead of {killed_in}: epochs were skipped",
            evidence, fix=SAME_TRAINING_FIX, links=[BACKUP_GUIDE],
        ))
    if resume.differs:
        findings.append(Finding(
            f"multiworker.{run.layer}.resume-differs", Severity.ERROR,
            f"{label}: the restarted job ended with other weights than an uninterrupted training",
            evidence, fix=SAME_TRAINING_FIX, links=[BACKUP_GUIDE],
        ))
    if resume.error or began is None:
        findings.append(Finding(
            f"multiworker.{run.layer}.resume-failed", Severity.ERROR,
            f"{label}: the restarted job cannot be compared with the uninterrupted reference",
            [resume.error or "the restarted workers did not report the epochs they began", *evidence],
            fix=SAME_TRAINING_FIX, links=[BACKUP_GUIDE],
        ))
    if findings:
        return findings
    return [Finding(
        f"multiworker.{run.layer}.ok", Severity.OK,
        f"worker {resume.killed_task} of {run.workers} killed in epoch {killed_in}, the job restarted: "
        f"it resumed from the BackupAndRestore backup at epoch {_epoch(began)} and ended with the "
        "weights of an uninterrupted training",
        evidence,
    )]


def _prints_line_of(issue: KnownIssue | None, text: str) -> bool:
    """Whether ``text`` shows a line that alone names ``issue`` (one of its identifying signatures)."""
    if issue is None:
        return False
    lines = [normalised(line) for line in text.splitlines()]
    return any(pieces_in(pieces, line) for s in issue.signatures if s.identifies and s.text
               for pieces in s.forms for line in lines)


def _failure(run: MultiWorkerRun, worker: WorkerOutcome, stopped: list[WorkerOutcome],
             keras3: KnownIssue | None = None) -> Finding:
    label = _label(run)
    evidence = [f"worker {worker.task_index}: {worker.summary}"
                + (f" (during {worker.phase})" if worker.phase else "")]
    evidence += [f"worker {w.task_index}: {w.summary}" for w in stopped]
    code = f"multiworker.{run.layer}.{worker.status}"
    if worker.status == "hang":
        stack = _head(worker.stacks)
        proxy = [run.proxy] if run.proxy else []
        return Finding(
            code, Severity.ERROR,
            f"{label}: worker {worker.task_index} hung: MultiWorkerMirroredStrategy waited for a "
            "peer or a collective that never came",
            proxy + evidence + (["its Python stacks when the hang was declared:", *stack] if stack else []),
            fix=(PROXY_FIX if run.proxy else "") + "Check that every address in TF_CONFIG is reachable "
            "from every worker (firewall, the right interface), that every worker started (a task that "
            "starts minutes later needs a longer --stall-timeout) and that no other worker failed; the "
            "stacks show where it waited.",
            links=[MWMS_GUIDE] + ([PROXY_HANG_THREAD] if run.proxy else []),
        )
    if (worker.status == "error" and worker.phase == "fit" and worker.keras.startswith("keras ")
            and _prints_line_of(keras3, worker.summary)):
        return Finding(
            KERAS3_CODE, Severity.ERROR,
            f"{label}: Keras 3's model.fit fails under MultiWorkerMirroredStrategy (known Keras 3 "
            "limitation): multi-worker training with tf.keras as it resolves here does not work",
            evidence + [f"Keras: {worker.keras}, TensorFlow {worker.tensorflow}",
                        known_issue_line(KERAS3_MWMS_ENTRY)],
            fix=f"Use tf-keras for multi-worker training: pip install {_tf_keras_pin(worker.tensorflow)} "
            "and export TF_USE_LEGACY_KERAS=1 for every worker (check it with `mgpu-doctor smoke "
            "--workers 2 --keras tf-keras`); or keep Keras 3 and train with a custom loop "
            "(strategy.run over strategy.experimental_distribute_dataset) instead of model.fit.",
            links=[KERAS3_MWMS_ISSUE, TF_KERAS3_MWMS_ISSUE],
        )
    if worker.status == "crash":
        return Finding(
            code, Severity.ERROR, f"{label}: worker {worker.task_index} crashed with {worker.signal}",
            evidence + _last_error_lines(worker.stderr_tail, 8),
            fix="Run the worker outside mgpu-doctor to get the native backtrace, and check that the "
            "driver, CUDA, cuDNN and NCCL versions match this TensorFlow on every node "
            "(`mgpu-doctor check`, `mgpu-doctor fleet`).",
        )
    if worker.status == "nan":
        return Finding(
            code, Severity.ERROR,
            f"{label}: worker {worker.task_index}: the loss or the weights became NaN/Inf",
            evidence + [f"loss per epoch: {_losses(worker)}", f"weights finite: {worker.weights_finite}"],
            fix="Find the first non-finite value with `tf.debugging.enable_check_numerics()`; if the "
            "single-host `mgpu-doctor smoke` of this layer is fine, compare the nodes' versions "
            "with `mgpu-doctor fleet`.",
        )
    if worker.status == "diverged":
        return Finding(
            code, Severity.ERROR,
            f"{label}: worker {worker.task_index}: the loss blew up ({_losses(worker)})",
            evidence + [f"loss per epoch: {_losses(worker)}"],
            fix="Scale the learning rate with the global batch (it grows with the number of workers) "
            "and check that the loss is reduced over the global batch.",
        )
    text = f"{worker.summary}\n{worker.error_message}"
    if worker.status == "error" and LOST_PEER.search(text):
        peers = sorted(set(PEER_TASK.findall(text)))
        return Finding(
            f"multiworker.{run.layer}.lost-peer", Severity.ERROR,
            f"{label}: worker {worker.task_index} lost its connection to "
            + (", ".join(peers) if peers else "another worker")
            + ": that worker stopped, crashed or became unreachable",
            evidence + _last_error_lines(worker.error_message or worker.stderr_tail),
            fix="Look at the other worker first (its own finding, or its log under the scheduler): a "
            "crash, an out-of-memory kill, a preempted node or a scancel there ends the collective "
            "here. If it is still running, check that every worker can reach every TF_CONFIG address.",
            links=[MWMS_GUIDE],
        )
    return Finding(
        code, Severity.ERROR,
        f"{label}: worker {worker.task_index} {worker.summary}",
        evidence + _last_error_lines(worker.error_message or worker.stderr_tail),
        fix="The error above is TensorFlow's; run `mgpu-doctor check` for the environment, and "
        "check that every worker runs the same TensorFlow/Keras (`mgpu-doctor fleet`).",
        links=[MWMS_GUIDE],
    )


def _title(run: MultiWorkerRun) -> str:
    where = (f"{run.workers} workers on this host (CPU, 127.0.0.1)" if run.mode == "local"
             else f"task {run.worker_outcomes[0].task_index if run.worker_outcomes else 0} of "
                  f"{run.workers} (TF_CONFIG)")
    what = ("Multi-worker resume after a kill (BackupAndRestore)" if run.kind == "resume"
            else "Multi-worker smoke training")
    return f"{what}: {_layer(run)} on {where}" + (
        f", {KERAS_LABELS[run.keras]}" if KERAS_LABELS.get(run.keras) else "")


def _label(run: MultiWorkerRun) -> str:
    keras = KERAS_LABELS.get(run.keras, "")
    return f"{_layer(run)} on {run.workers} workers" + (f" with {keras}" if keras else "")


def _layer(run: MultiWorkerRun) -> str:
    return f"{run.layer} ({run.variant})" if run.variant else run.layer


def _losses(worker: WorkerOutcome) -> str:
    return ", ".join("nan" if v is None else f"{v:.4f}" for v in worker.loss) or "none"


def _head(text: str, limit: int = STACK_LINES) -> list[str]:
    lines = [line.rstrip() for line in text.strip().splitlines() if line.strip()]
    return lines[:limit] + ([f"... {len(lines) - limit} more lines"] if len(lines) > limit else [])


def _last_error_lines(text: str, count: int = 4) -> list[str]:
    lines = [line for line in text.strip().splitlines() if line.strip() and not CPP_CHATTER.match(line)]
    return lines[-count:]


def _tf_keras_pin(tensorflow: str) -> str:
    """tf-keras is released in step with TensorFlow: 2.21.x goes with TensorFlow 2.21."""
    parts = tensorflow.split(".")
    if len(parts) >= 2 and parts[0].isdecimal() and parts[1].isdecimal():
        return f"'tf-keras~={parts[0]}.{parts[1]}.0'"
    return "tf-keras (the release matching your TensorFlow's major.minor)"


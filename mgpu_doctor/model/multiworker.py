"""What a multi-worker smoke training did (`MultiWorkerRun`, with one `WorkerOutcome` per worker).

Plain data with a JSON round trip (serde), kept in ``Report.multiworker_runs``; the launcher and
the findings are in ``multiworker/``. A multi-worker run is not a `SmokeRun`: it has K processes,
each with its own status, and the weights are compared between processes rather than between the
replicas of one process.
"""

from __future__ import annotations

from mgpu_doctor.model.smoke_runs import RELOAD_TOLERANCE, SCENARIO_USAGE, variant_name
from mgpu_doctor.record import field, record

# The single-host smoke statuses, plus "stopped": killed by the launcher after another worker failed.
WORKER_STATUSES = ("ok", "hang", "crash", "error", "nan", "diverged", "stopped")
# A run's status: its worst worker's, or for the resume test: its jobs ran, but the restart did
# not continue from the backup or ended with other weights than the uninterrupted reference.
RESUME_FAILED = "resume-failed"
RUN_KINDS = ("train", "resume")
# Worst first: the run's status is that of its worst worker.
_STATUS_ORDER = ("hang", "crash", "error", "nan", "diverged", "stopped", "ok")
KERAS_CHOICES = ("env", "default", "tf-keras", "both")


@record
class WorkerOutcome:
    """How one worker ended (``status`` in WORKER_STATUSES) and what it measured."""

    task_index: int
    status: str
    summary: str  # one line
    task_type: str = "worker"
    phase: str = ""  # import, strategy, model, fit, compare-weights, done
    keras: str = ""  # "keras 3.15.1" or "tf_keras 2.21.0": what tf.keras resolved to
    tensorflow: str = ""  # the version the worker imported
    replicas: int | None = None  # num_replicas_in_sync over the whole cluster
    local_gpus: int | None = None
    loss: list[float | None] = field(default_factory=list)  # per epoch; None where not finite
    weights_finite: bool | None = None
    # Largest difference of one weight between all workers, from the worker's own all-gather.
    weight_spread: float | None = None
    seconds: dict[str, float] = field(default_factory=dict)  # import, strategy, fit, gather
    epochs_begun: list[int] = field(default_factory=list)  # 0-based, as model.fit began them
    duration_s: float = 0.0
    error_type: str = ""
    error_message: str = ""
    signal: str = ""
    stacks: str = ""  # every thread's Python stack when a hang was declared
    stderr_tail: str = ""


@record
class MultiWorkerResume:
    """What the resume test measured (``multiworker/resume.py``); the run's worker outcomes are
    those of ``stage``, the job that failed or the restarted one.

    ``max_abs_diff``: the largest difference of a final weight of any restarted worker to the
    reference's; judged against RELOAD_TOLERANCE x max(1, largest absolute reference weight).
    """

    stage: str  # reference, killed, restarted
    killed_task: int
    killed_in_epoch: int  # 1-based
    killed_job: list[str] = field(default_factory=list)  # how each worker of the killed job ended
    # From the killed worker's death until the launcher had stopped every other worker.
    stopped_after_s: float | None = None
    resumed_at_epoch: int | None = None  # 0-based: the first epoch the restarted job began
    max_abs_diff: float | None = None
    max_abs_reference: float | None = None
    backup_lost: bool = False  # the test-only fault emptied the backup before the restart
    job_seconds: dict[str, float] = field(default_factory=dict)  # reference, killed, restarted
    error: str = ""  # why the jobs could not be compared

    @property
    def tolerance(self) -> float:
        return RELOAD_TOLERANCE * max(1.0, self.max_abs_reference or 0.0)

    @property
    def restarted_from_scratch(self) -> bool:
        """The restart began before the epoch it was killed in: it did not find the backup."""
        return self.resumed_at_epoch is not None and self.resumed_at_epoch < self.killed_in_epoch - 1

    @property
    def differs(self) -> bool:
        return self.max_abs_diff is not None and self.max_abs_diff > self.tolerance


@record
class MultiWorkerRun:
    """One multi-worker smoke training: a layer on K workers with one Keras.

    ``mode``: ``local`` (K worker processes on this host, on CPU, loopback TF_CONFIG) or
    ``task`` (this node's one task of a cluster, with the scheduler's TF_CONFIG). ``keras``:
    what was asked for (``env``: as this environment's TF_USE_LEGACY_KERAS says; ``default``:
    TensorFlow's default Keras; ``tf-keras``: TF_USE_LEGACY_KERAS=1).
    ``max_weight_difference``: between the weights the workers reported (local mode), else the
    largest ``weight_spread`` a worker gathered; None when no comparison was possible.
    """

    layer: str
    variant: str
    workers: int  # tasks in the cluster
    mode: str
    keras: str
    status: str
    worker_outcomes: list[WorkerOutcome] = field(default_factory=list)
    framework: str = ""
    max_weight_difference: float | None = None
    weights_identical: bool | None = None
    tf_config: str = ""  # the cluster (task mode), or "" for the loopback cluster
    duration_s: float = 0.0
    kind: str = "train"  # RUN_KINDS: a training, or the resume test (three jobs)
    resume: MultiWorkerResume | None = None
    # Set when a proxy variable may route the workers' gRPC connections through a proxy.
    proxy: str = ""

    @property
    def name(self) -> str:
        """Stable identifier, also the check / JUnit testcase name."""
        layer = variant_name(self.layer, self.variant)
        keras = "" if self.keras == "env" else f"/{self.keras}"
        where = (f"{self.workers}workers" if self.mode == "local"
                 else f"task{self._task_index}-of-{self.workers}")
        return f"smoke/multiworker/{layer}/{where}{keras}" + ("/resume" if self.kind == "resume" else "")

    @property
    def _task_index(self) -> int:
        return self.worker_outcomes[0].task_index if self.worker_outcomes else 0

    # The attributes the known-issue matching reads (mgpu_doctor.smoke.known_issues.SmokeRunLike).
    @property
    def devices(self) -> int:
        replicas = [w.replicas for w in self.worker_outcomes if w.replicas]
        return max(replicas) if replicas else self.workers

    @property
    def device_kind(self) -> str:
        return "gpu" if any(w.local_gpus for w in self.worker_outcomes) else "cpu"

    @property
    def scenario(self) -> str:
        return "resume" if self.kind == "resume" else "even"

    @property
    def usage(self) -> tuple[str, ...]:
        """The ways of training (the matrix's ``usage``) beyond model.fit: BackupAndRestore is a
        checkpoint, as for the single-host resume scenario."""
        return SCENARIO_USAGE["resume"] if self.kind == "resume" else ()


def worst_status(statuses: list[str]) -> str:
    for status in _STATUS_ORDER:
        if status in statuses:
            return status
    return "error"  # no worker at all

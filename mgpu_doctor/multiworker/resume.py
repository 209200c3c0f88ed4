"""The multi-worker resume test: K workers with BackupAndRestore, one of them killed, the job restarted.

Three jobs of K local workers, each a fresh loopback cluster (fresh ports), the backup directory
in a scratch directory every worker shares (it stands for the shared file system of a cluster):

1. the reference: an uninterrupted training with ``BackupAndRestore`` (its own backup directory);
2. the same training, and task :data:`KILL_TASK` SIGKILLs itself at the second step of epoch
   :data:`KILL_EPOCH` + 1. The other workers would fail or wait in the next collective: the
   launcher stops them as soon as it sees the death (``launcher.run_workers``);
3. the whole job restarted with the same backup directory. Every worker reports the epochs
   ``model.fit`` began and its final weights, which :func:`findings.resume_run` compares with the
   reference's.

A stage that fails ends the test there; the scratch directory is removed in every case.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from mgpu_doctor.multiworker.launcher import STALL_TIMEOUT_S, TIMEOUT_S, MultiWorkerResult, run_local_workers
from mgpu_doctor.process.interpreter import Interpreter
from mgpu_doctor.record import record

KILL_TASK = 1  # not the chief (task 0), which writes the backup every worker restores from
KILL_EPOCH = 1  # 0-based: killed in the second epoch, after the first one was backed up
# Test-only fault, read here: the backup directory is emptied before the restart (a backup kept
# on storage the restarted job cannot see), so the restart begins again at epoch 1.
FORGET_ENV = "MGPU_DOCTOR_TEST_FORGET_BACKUP"


@record
class ResumeJobs:
    """The jobs of one resume test as far as they ran (a failed stage ends it)."""

    reference: MultiWorkerResult
    killed: MultiWorkerResult | None = None
    restarted: MultiWorkerResult | None = None
    backup_lost: bool = False  # the test-only fault emptied the backup before the restart

    @property
    def kill_went_as_planned(self) -> bool:
        """The killed task died by SIGKILL and no other worker failed on its own."""
        if self.killed is None:
            return False
        victim = [w for w in self.killed.workers if w.task_index == KILL_TASK]
        others = [w for w in self.killed.workers if w.task_index != KILL_TASK]
        return (bool(victim) and victim[0].status == "crash" and victim[0].signal == "SIGKILL"
                and all(w.status in ("stopped", "error") for w in others))


def run_local_resume(
    interpreter: Interpreter,
    count: int,
    *,
    layer: str = "dense",
    variant: str = "",
    legacy_keras: bool | None = False,
    timeout_s: float = TIMEOUT_S,
    stall_timeout_s: float = STALL_TIMEOUT_S,
    extra_env: Mapping[str, str] | None = None,
    on_progress: Callable[[str], None] | None = None,
    scratch: Path | None = None,
    forget_backup: bool | None = None,
) -> ResumeJobs:
    """Run the three jobs; ``forget_backup`` None: as :data:`FORGET_ENV` says."""
    if forget_backup is None:
        forget_backup = os.environ.get(FORGET_ENV, "") not in ("", "0")
    work = Path(tempfile.mkdtemp(prefix="mgpu-doctor-resume-", dir=scratch))
    try:
        def job(stage: str, *args: str) -> MultiWorkerResult:
            def progress(text: str) -> None:
                if on_progress is not None:
                    on_progress(f"resume test, {stage}: {text}")
            return run_local_workers(interpreter, count, layer=layer, variant=variant,
                                     legacy_keras=legacy_keras, timeout_s=timeout_s,
                                     stall_timeout_s=stall_timeout_s, extra_env=extra_env,
                                     on_progress=progress, worker_args=args)

        backup = str(work / "backup")
        reference = job("the uninterrupted reference", "--backup-dir", str(work / "reference-backup"))
        if not reference.ok:
            return ResumeJobs(reference)
        killed = job(f"worker {KILL_TASK} killed in epoch {KILL_EPOCH + 1}", "--backup-dir", backup,
                     "--kill-task", str(KILL_TASK), "--kill-epoch", str(KILL_EPOCH))
        jobs = ResumeJobs(reference, killed)
        if not jobs.kill_went_as_planned:
            return jobs
        if forget_backup:
            shutil.rmtree(backup, ignore_errors=True)
        restarted = job("the restarted job", "--backup-dir", backup)
        return ResumeJobs(reference, killed, restarted, backup_lost=forget_backup)
    finally:
        shutil.rmtree(work, ignore_errors=True)

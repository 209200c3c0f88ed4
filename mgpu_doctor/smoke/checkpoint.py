"""The checkpoint scenarios of the smoke suite: save, reload and resume a model trained on N devices.

"checkpoint": the model trained under the N-device strategy is saved in every format users use,
loaded in a fresh process on 1 device and in another on N devices, and predicts the same fixed
inputs. "resume": a training with ``BackupAndRestore`` is killed in epoch 2 and restarted; it must
begin where the backup left off and end with the weights of an uninterrupted training.

The child side is ``child_scripts/_smoke_checkpoint.py``; here: what it reports, the plan and the
findings (pure).
"""

from __future__ import annotations

from typing import Any

from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.model.smoke_runs import (  # noqa: F401 (the checkpoint records live in the model)
    CHECKPOINT_STATUSES,
    RELOAD_TOLERANCE,
    SCENARIO_USAGE,
    CheckpointStep,
)
from mgpu_doctor.smoke.layers import SMOKE_LAYERS

CHECKPOINT_SCENARIOS = ("checkpoint", "resume")
SCENARIO_TITLES = {"checkpoint": "saved and reloaded on 1 and N devices",
                   "resume": "killed in epoch 2 and resumed with BackupAndRestore"}
FORMAT_LABELS = {
    "keras": 'model.save("model.keras") / keras.models.load_model',
    "weights": "model.save_weights / model.load_weights",
    "tf_checkpoint": "tf.train.Checkpoint(model=model).write / .read",
    "savedmodel": 'model.save(dir, save_format="tf") / load_model (SavedModel)',
    "h5": 'model.save("model.h5") / load_model (HDF5)',
    "backup_and_restore": "tf.keras.callbacks.BackupAndRestore",
    "training": "the training before saving",
}
SAVING_GUIDE = "https://www.tensorflow.org/tutorials/distribute/save_and_load"
BACKUP_GUIDE = "https://www.tensorflow.org/api_docs/python/tf/keras/callbacks/BackupAndRestore"
# Saved model differs from the one trained with BatchNormalization on several GPUs (the matrix
# entry tf-46488-batchnorm-replica-statistics-saved).
REPLICA_STATISTICS_ISSUE = "https://github.com/tensorflow/tensorflow/issues/46488"


def steps_from_child(data: Any) -> list[CheckpointStep]:
    """The ``checkpoint`` list of one line of runs.jsonl (fields of the wrong type are dropped)."""
    if not isinstance(data, list):
        return []
    steps = []
    for item in data:
        if not isinstance(item, dict) or not isinstance(item.get("format"), str):
            continue
        steps.append(CheckpointStep(
            format=item["format"], stage=str(item.get("stage", "")),
            load_devices=_int(item.get("load_devices")) or 0, ok=item.get("ok") is True,
            max_abs_diff=_number(item.get("max_abs_diff")),
            max_abs_reference=_number(item.get("max_abs_reference")),
            resumed_at_epoch=_int(item.get("resumed_at_epoch")),
            killed_in_epoch=_int(item.get("killed_in_epoch")),
            error=str(item.get("error", ""))[-4000:],
            model_limit=str(item.get("model_limit") or "")[-4000:],
        ))
    return steps


def checkpoint_status(status: str, steps: list[CheckpointStep]) -> str:
    """The run's status from its steps: the first of save, load, compare that went wrong."""
    if status != "ok":
        return status
    if not steps:
        return "error"
    if any(s.stage in ("resume", "reference") for s in steps):
        return "resume-failed" if any(not s.ok or s.differs or s.restarted_from_scratch or s.error
                                      for s in steps) else "ok"
    if any(s.stage == "save" and s.failed for s in steps):
        return "save-failed"
    if any(s.stage == "load" and s.failed for s in steps):
        return "load-failed"
    if any(s.stage == "load" and not s.model_limit and (s.differs or s.error) for s in steps):
        return "reload-differs"
    return "ok"


# ----------------------------------------------------------------------------- findings

def checkpoint_findings(run: Any, label: str) -> list[Finding]:
    """Findings of one checkpoint or resume run (``run``: a SmokeRun of such a scenario)."""
    code = f"smoke.{run.layer}"
    steps: list[CheckpointStep] = run.checkpoint
    if run.scenario == "resume":
        return _resume_findings(run, code, label, steps)
    findings = []
    failed_saves = [s for s in steps if s.stage == "save" and s.failed]
    if failed_saves:
        findings.append(Finding(
            code=f"{code}.save-failed", severity=Severity.ERROR,
            title=f"{label}: the model trained on {run.devices} devices could not be saved with "
                  + ", ".join(FORMAT_LABELS.get(s.format, s.format) for s in failed_saves),
            evidence=[f"{s.format}: {_last_line(s.error)}" for s in failed_saves],
            fix="Save outside `strategy.scope()` from the model object fit trained, with a file name "
                "ending in `.keras` (Keras 3) or a directory (SavedModel, tf_keras); for a custom "
                "training loop save a `tf.train.Checkpoint` of the model and its optimizer.",
            links=[SAVING_GUIDE],
        ))
    failed_loads = [s for s in steps if s.stage == "load" and s.failed]
    if failed_loads:
        findings.append(Finding(
            code=f"{code}.load-failed", severity=Severity.ERROR,
            title=f"{label}: a model saved after training on {run.devices} devices did not load back: "
                  + ", ".join(f"{s.format} on {s.load_devices} device(s)" for s in failed_loads),
            evidence=[f"{s.format} on {s.load_devices} device(s): {_last_line(s.error)}"
                      for s in failed_loads],
            fix="Load under the strategy you predict with (`with strategy.scope(): "
                "keras.models.load_model(...)`), build the model the same way before load_weights, "
                "and keep the Keras that saved it (a .keras file from Keras 3 does not load in tf_keras).",
            links=[SAVING_GUIDE],
        ))
    differing = [s for s in steps if s.stage == "load" and (s.differs or (s.ok and s.error))]
    if differing and run.replica_state_max_abs_diff:
        findings.append(_replica_state_finding(run, code, label, differing))
    elif differing:
        findings.append(Finding(
            code=f"{code}.reload-differs", severity=Severity.ERROR,
            title=f"{label}: the reloaded model predicts differently from the one trained on "
                  f"{run.devices} devices",
            evidence=_differences(differing),
            fix="Some variables were not saved or not restored (a layer built after loading, "
                "optimizer-only state, per-replica variables): restore with "
                "`checkpoint.restore(path).assert_existing_objects_matched()` to see which.",
            links=[SAVING_GUIDE],
        ))
    limited = _model_limits(steps)
    if not findings and run.status == "ok":
        loads = [s for s in steps if s.stage == "load" and s.ok]
        worst = max((s.max_abs_diff or 0.0 for s in loads), default=0.0)
        formats = sorted({s.format for s in steps if s.format not in limited}, key=list(FORMAT_LABELS).index)
        devices = sorted({s.load_devices for s in loads})
        findings.append(Finding(
            code=f"{code}.ok", severity=Severity.OK,
            title=f"saved in {len(formats)} format(s), reloaded on "
                  f"{' and '.join(map(str, devices))} device(s), same predictions",
            evidence=[f"formats: {', '.join(formats)}",
                      f"largest prediction difference after reload: {worst:.3g} "
                      f"(tolerance {RELOAD_TOLERANCE:g} relative)"],
        ))
    if limited:
        findings.append(_model_limit_finding(code, label, limited, steps))
    return findings


def _model_limits(steps: list[CheckpointStep]) -> dict[str, str]:
    """Format -> the error it gives the user's model without any strategy too (the first step's)."""
    limits: dict[str, str] = {}
    for s in steps:
        if not s.ok and s.model_limit:
            limits.setdefault(s.format, s.model_limit)
    return limits


def _model_limit_finding(code: str, label: str, limits: dict[str, str],
                         steps: list[CheckpointStep]) -> Finding:
    """Formats the user's model cannot use at all: they fail on one device without a strategy too."""
    worked = sorted({s.format for s in steps if s.ok and s.stage == "save"} - set(limits),
                    key=list(FORMAT_LABELS).index)
    return Finding(
        code=f"{code}.format-unusable", severity=Severity.INFO,
        title=f"{label}: your model does not round-trip with "
              + ", ".join(FORMAT_LABELS.get(f, f) for f in limits)
              + " on one device without a strategy either: a limit of the format for this model, "
                "not of the devices",
        evidence=[f"{fmt} (one device, no strategy): {_last_line(error)}" for fmt, error in limits.items()]
                 + [f"saved and reloaded on 1 and N devices: {', '.join(worked) or 'no format'}"],
        fix="Save this model in a format that holds it (the ones above that worked); a subclassed model "
            "saves whole only as .keras or SavedModel, and its class needs a get_config that its "
            "constructor accepts (or save the weights and build the model in code).",
        links=[SAVING_GUIDE],
    )


def _differences(steps: list[CheckpointStep]) -> list[str]:
    return [f"{s.format} on {s.load_devices} device(s): " + (
        f"largest prediction difference {s.max_abs_diff:.3g} (tolerance {s.tolerance:.3g})"
        if s.max_abs_diff is not None else _last_line(s.error)) for s in steps]


def _replica_state_finding(run: Any, code: str, label: str, differing: list[CheckpointStep]) -> Finding:
    """Reloads that differ because the replicas kept different non-trainable state: the model in
    training predicts each sample with the copy of the replica it lands on, a save keeps one
    version (the replicas' mean with tf_keras, replica 0's with Keras 3). Nothing was lost in
    saving; the model in training was never one model."""
    statistics = SMOKE_LAYERS[run.layer].batch_statistics if run.layer in SMOKE_LAYERS else False
    what = "moving mean and variance (BatchNormalization)" if statistics else "non-trainable variables"
    return Finding(
        code=f"{code}.reload-differs", severity=Severity.WARNING,
        title=f"{label}: the reloaded model predicts differently from the one in training: the "
              f"replicas kept different {what}, and a save keeps one version of them",
        evidence=[f"the replicas' copies of the {what} differ by up to "
                  f"{run.replica_state_max_abs_diff:.3g} after training; the trainable weights agree",
                  *_differences(differing)],
        fix=("Use `BatchNormalization(synchronized=True)` (tf.keras before 2.12: "
             "`tf.keras.layers.experimental.SyncBatchNormalization`) so every replica computes the "
             "same statistics over the global batch; otherwise evaluate and ship the saved model, "
             "not the one in training, whose predictions depend on the replica a sample lands on."
             if statistics else
             "Create non-trainable variables with an aggregation (`aggregation=\"mean\"` with "
             "Keras 3) or update them in cross-replica context, so every replica holds the same "
             "value; otherwise evaluate the saved model, not the one in training."),
        links=[SAVING_GUIDE, REPLICA_STATISTICS_ISSUE],
    )


def _resume_findings(run: Any, code: str, label: str, steps: list[CheckpointStep]) -> list[Finding]:
    step = steps[0] if steps else None
    if run.status == "ok" and step is not None:
        return [Finding(
            code=f"{code}.ok", severity=Severity.OK,
            title=f"killed in epoch {step.killed_in_epoch}, resumed from the backup at epoch "
                  f"{(step.resumed_at_epoch or 0) + 1}, same final weights",
            evidence=[f"largest final-weight difference to an uninterrupted training: "
                      f"{step.max_abs_diff or 0.0:.3g} (tolerance {RELOAD_TOLERANCE:g} relative)"],
        )]
    if step is None or not step.ok:
        why = _last_line(step.error) if step else "no result"
        return [Finding(
            code=f"{code}.resume-failed", severity=Severity.ERROR,
            title=f"{label}: training with BackupAndRestore could not be "
                  + ("run" if step is not None and step.stage == "reference" else "resumed after a kill"),
            evidence=[why],
            fix="Give BackupAndRestore a backup_dir every worker can write and that survives the "
                "restart, and restart the job with the same model code and strategy.",
            links=[BACKUP_GUIDE],
        )]
    evidence = []
    if step.restarted_from_scratch:
        evidence.append(f"killed in epoch {step.killed_in_epoch}; the restart began at epoch "
                        f"{(step.resumed_at_epoch or 0) + 1}, not at {step.killed_in_epoch}")
    if step.differs or step.error:
        evidence.append(f"largest final-weight difference to an uninterrupted training: "
                        f"{step.max_abs_diff if step.max_abs_diff is not None else 'not comparable'}"
                        f" (tolerance {step.tolerance:.3g})" + (f"; {step.error}" if step.error else ""))
    return [Finding(
        code=f"{code}.resume-failed", severity=Severity.ERROR,
        title=f"{label}: after a kill in epoch {step.killed_in_epoch} the restarted training did "
              "not continue from its backup",
        evidence=evidence,
        fix="Pass the same BackupAndRestore(backup_dir=...) on the restart, keep backup_dir on "
            "storage that outlives the process, and do not delete it between attempts.",
        links=[BACKUP_GUIDE],
    )]


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no message)"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None

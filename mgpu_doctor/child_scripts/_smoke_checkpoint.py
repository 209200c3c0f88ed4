"""The smoke worker's checkpoint scenarios (Python 3.6+, standard library, NumPy and TensorFlow).

Imported by smoke_worker.py, which runs each smoke run in a forked child; a checkpoint scenario
forks again, once per stage, so that every stage is a fresh process with a fresh TensorFlow
runtime (the worker imports TensorFlow but never starts it):

- "checkpoint": train on N devices and save in every format users use, then load in a fresh
  process on 1 device and in another on N devices, and predict the same fixed inputs. The
  parent judges the prediction differences (mgpu_doctor/smoke/checkpoint.py). The user's model
  (``smoke --model``) goes the same way, built by its function and fed its data; its full-model
  formats load with the classes of its module as custom objects, uncompiled (the predictions
  need no optimizer, loss or metrics). A format that failed for it is tried again in a fresh
  process on one device without a strategy: failing there too, it is the format's limit for that
  model (the step's ``model_limit``), not a multi-device problem.
- "resume": train with tf.keras.callbacks.BackupAndRestore uninterrupted (the reference);
  train again and SIGKILL the process in epoch 2; restart it and see where it begins and with
  which final weights.

Test-only faults: MGPU_DOCTOR_CHECKPOINT_FAULT="LAYER:FAULT[,...]" with FAULT one of
unsaveable (saving the .keras file raises), drift (the loaded weights are shifted by 0.01),
forget (the restart gets an empty backup directory, so it starts again from epoch 0), hang (the
training before saving blocks forever).
"""

import json
import os
import shutil
import signal
import sys
import threading
import time

import _mgpu_child
import _smoke_user_model
from _smoke_models import build_model, finite_or_none, make_data, replica_difference
from _smoke_scenarios import import_function

FAULT_ENV = "MGPU_DOCTOR_CHECKPOINT_FAULT"
PROBE_SAMPLES = 8  # the fixed inputs every reload predicts
KILL_EPOCH = 1  # 0-based: the process is killed in the second epoch


def parse_fault(layer):
    for item in os.environ.get(FAULT_ENV, "").split(","):
        parts = item.strip().split(":")
        if len(parts) >= 2 and parts[0] == layer:
            return parts[1]
    return ""


def _paths(directory, flavor):
    return {
        "keras": os.path.join(directory, "model.keras"),
        "weights": os.path.join(directory, "model.weights.h5" if flavor == "keras" else "weights"),
        "tf_checkpoint": os.path.join(directory, "tf-checkpoint"),
        "savedmodel": os.path.join(directory, "savedmodel"),
        "h5": os.path.join(directory, "model.h5"),
    }


def _error(exc):
    info = _mgpu_child.describe_exception(exc)
    return "%s: %s" % (info["type"], info["message"][-1500:])


# ----------------------------------------------------------------------------- stages

def _beat(keras, fault=""):
    """A heartbeat per training step: the parent's stall detection watches it."""
    class Beat(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if fault == "hang" and batch == 1:
                threading.Event().wait()  # injected: a stage that never finishes

        def on_train_batch_end(self, batch, logs=None):
            _mgpu_child.heartbeat("step")
    return Beat()


def _strategy(api, configure_devices, spec, devices):
    return api.strategy(configure_devices(api, dict(spec, devices=devices)))


def _compiled(api, spec):
    if spec["layer"] == _smoke_user_model.USER_MODEL:
        return _smoke_user_model.user_model(spec)
    model = build_model(api, spec["layer"], spec["variant"], spec.get("model_size", 1))
    model.compile(optimizer=api.keras.optimizers.SGD(learning_rate=0.05), loss="mse")
    return model


def _training(api, np, configure_devices, spec):
    """The model built under the N-device strategy, seeded, its dataset and the inputs the
    reloads predict: what save and resume both train."""
    strategy = _strategy(api, configure_devices, spec, int(spec["devices"]))
    api.set_seed(int(spec.get("seed", 7)))
    if spec["layer"] == _smoke_user_model.USER_MODEL:
        with strategy.scope():
            model = _compiled(api, spec)
        dataset, x = _smoke_user_model.user_data(api.tf, np, model, spec)
        return model, _first(np, api, x, dataset), dataset, strategy
    x, y = make_data(np, spec["layer"], int(spec["samples"]))
    with strategy.scope():
        model = _compiled(api, spec)
        api.same_start(model, int(spec.get("seed", 7)))
    dataset = api.tf.data.Dataset.from_tensor_slices((x, y)).batch(int(spec["global_batch"]))
    return model, x[:PROBE_SAMPLES], dataset, strategy


def _first(np, api, x, dataset):
    """The first PROBE_SAMPLES inputs: of the arrays, or of the user's dataset (eager only)."""
    if x is None:  # _skip_unsupported: only in eager mode
        x = next(iter(dataset.take(1)))[0]
    return api.tf.nest.map_structure(lambda a: np.asarray(a)[:PROBE_SAMPLES], x)


def _predict(np, model, probe):
    """The model's predictions for ``probe``, every output flattened into one float64 vector."""
    got = model.predict(probe, batch_size=PROBE_SAMPLES, verbose=0)
    parts = [got[k] for k in sorted(got)] if isinstance(got, dict) else (
        list(got) if isinstance(got, (list, tuple)) else [got])
    return np.concatenate([np.ravel(np.asarray(p, dtype="float64")) for p in parts])


def _save_probe(np, path, probe):
    if isinstance(probe, dict):
        np.savez(path, **dict(("d_" + k, v) for k, v in probe.items()))
    elif isinstance(probe, (list, tuple)):
        np.savez(path, **dict(("t_%03d" % i, v) for i, v in enumerate(probe)))
    else:
        np.savez(path, a=probe)


def _load_probe(np, path):
    with np.load(path) as saved:
        keys = sorted(saved.files)
        if keys == ["a"]:
            return saved["a"]
        if keys and keys[0].startswith("d_"):
            return dict((k[2:], saved[k]) for k in keys)
        return tuple(saved[k] for k in keys)


def _load_model(api, spec, path):
    if spec["layer"] == _smoke_user_model.USER_MODEL:
        import_function(spec["user_model"], spec.get("model_path") or "")  # its classes registered
        return api.load_model(path, custom_objects=_smoke_user_model.custom_objects(spec), compile=False)
    return api.load_model(path)


def _save(api, model, fmt, paths):
    if fmt == "keras":
        model.save(paths[fmt])
    elif fmt == "weights":
        model.save_weights(paths[fmt])
    elif fmt == "tf_checkpoint":
        api.tf_checkpoint(model, paths[fmt], write=True)
    elif fmt == "savedmodel":
        model.save(paths[fmt], save_format="tf")
    else:
        model.save(paths[fmt], save_format="h5")


def _load(api, np, spec, fmt, paths, probe):
    """The model saved as ``fmt``: loaded whole, or built by its function and its weights restored."""
    if fmt in ("keras", "savedmodel", "h5"):
        return _load_model(api, spec, paths[fmt])
    model = _compiled(api, spec)
    if not model.weights:
        # A subclassed model makes its variables on its first batch (Keras 3: also after
        # model.build(input_shape) without a build method): load_weights refuses or skips it, a
        # checkpoint's restore waits for variables never made.
        _predict(np, model, probe)
    if fmt == "weights":
        model.load_weights(paths[fmt])
    else:
        api.tf_checkpoint(model, paths[fmt], write=False)
    return model


def save_stage(api, configure_devices, spec, directory):
    import numpy as np

    model, probe, dataset, strategy = _training(api, np, configure_devices, spec)
    model.fit(dataset, epochs=int(spec["epochs"]), verbose=0,
              callbacks=[_beat(api.keras, parse_fault(spec["layer"]))])
    _mgpu_child.heartbeat("trained")
    _save_probe(np, os.path.join(directory, "probe.npz"), probe)
    # Variables the replicas keep apart (BatchNormalization's moving statistics): the model in
    # training predicts with each replica's copy, a save keeps one version.
    state = finite_or_none(replica_difference(np, api, strategy, model.non_trainable_weights))
    out = {"predictions": _predict(np, model, probe).tolist(), "steps": [],
           "replica_state_max_abs_diff": state}
    paths = _paths(directory, api.flavor)
    fault = parse_fault(spec["layer"])
    for fmt in api.checkpoint_formats():
        step = {"format": fmt, "stage": "save", "load_devices": 0, "ok": False}
        try:
            if fmt == "keras" and fault == "unsaveable":
                raise RuntimeError("injected fault: saving the .keras file fails")
            _save(api, model, fmt, paths)
            step["ok"] = True
        except Exception as exc:
            step["error"] = _error(exc)
        out["steps"].append(step)
        _mgpu_child.heartbeat("saved %s" % fmt)
    return out


def load_stage(api, configure_devices, spec, directory, devices, formats, reference):
    import numpy as np

    strategy = _strategy(api, configure_devices, spec, devices)
    probe = _load_probe(np, os.path.join(directory, "probe.npz"))
    reference = np.asarray(reference, dtype="float64")
    paths = _paths(directory, api.flavor)
    drift = parse_fault(spec["layer"]) == "drift"
    steps = []
    for fmt in formats:
        step = {"format": fmt, "stage": "load", "load_devices": devices, "ok": False}
        try:
            with strategy.scope():
                model = _load(api, np, spec, fmt, paths, probe)
            if drift:
                model.set_weights([w + 0.01 for w in model.get_weights()])
            got = _predict(np, model, probe)
            step["ok"] = True
            if got.shape != reference.shape or not np.all(np.isfinite(got)):
                step["max_abs_diff"] = None
                step["error"] = "predictions of shape %s, finite: %s" % (
                    list(got.shape), bool(np.all(np.isfinite(got))))
            else:
                step["max_abs_diff"] = float(np.max(np.abs(got - reference))) if got.size else 0.0
                step["max_abs_reference"] = float(np.max(np.abs(reference))) if reference.size else 0.0
        except Exception as exc:
            step["error"] = _error(exc)
        steps.append(step)
        _mgpu_child.heartbeat("loaded %s" % fmt)
    return {"steps": steps}


def control_stage(api, configure_devices, spec, directory, formats):
    """The user's model built on one device without a strategy, saved in ``formats`` and loaded
    back in this process: a format that fails here too cannot hold this model at all (HDF5 and a
    subclassed model in Keras 2, a class whose config does not rebuild it), whatever the devices.
    For each format that fails: the first error."""
    import numpy as np

    configure_devices(api, dict(spec, devices=1))
    probe = _load_probe(np, os.path.join(directory, "probe.npz"))
    paths = _paths(os.path.join(directory, "control"), api.flavor)
    os.makedirs(os.path.join(directory, "control"))
    api.set_seed(int(spec.get("seed", 7)))
    model = _compiled(api, spec)
    _predict(np, model, probe)  # made as by its first batch
    limits = {}
    for fmt in formats:
        try:
            _save(api, model, fmt, paths)
        except Exception as exc:
            limits[fmt] = _error(exc)
            continue
        try:
            _predict(np, _load(api, np, spec, fmt, paths, probe), probe)
        except Exception as exc:
            limits[fmt] = _error(exc)
        _mgpu_child.heartbeat("control %s" % fmt)
    return {"limits": limits}


def resume_stage(api, configure_devices, spec, backup_dir, weights_path, kill):
    import numpy as np

    keras = api.keras
    model, _, dataset, _ = _training(api, np, configure_devices, spec)
    begun = []

    class Track(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            begun.append(int(epoch))

        def on_train_batch_begin(self, batch, logs=None):
            if kill and begun and begun[-1] == KILL_EPOCH and batch == 1:
                os.kill(os.getpid(), signal.SIGKILL)  # the lost worker, in its second epoch

        def on_train_batch_end(self, batch, logs=None):
            _mgpu_child.heartbeat("step")

    backup = api.backup_and_restore()(backup_dir)
    model.fit(dataset, epochs=int(spec["epochs"]), verbose=0, callbacks=[backup, Track()])
    np.savez(weights_path, *[np.asarray(w) for w in model.get_weights()])
    return {"epochs_begun": begun}


# ----------------------------------------------------------------------------- a fresh process each

def in_fresh_process(stage, out_path):
    """Run ``stage()`` in a forked child; its JSON result, or how it died."""
    return in_fresh_processes([(stage, out_path)])[0]


def in_fresh_processes(stages):
    """Run each ``(stage, out_path)`` in a forked child of its own, all at once (stages that
    measure no time: the reloads); for each its JSON result, or how it died."""
    pids = [_fork(stage, out_path) for stage, out_path in stages]
    # The parent asks for stacks when a stage stalls: those of the stages, not of this wait.
    signal.signal(signal.SIGUSR1, lambda signum, frame: [_forward(pid, signum) for pid in pids])
    try:
        statuses = [os.waitpid(pid, 0)[1] for pid in pids]
    finally:
        _stacks_on_usr1()
    return [_outcome(out_path, status) for (_, out_path), status in zip(stages, statuses)]


def _fork(stage, out_path):
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    _mgpu_child.die_with_parent(signal.SIGKILL, parent=parent)
    _stacks_on_usr1()
    code = 0
    try:
        result = stage()
    except BaseException as exc:
        result = {"error": _error(exc)}
    try:
        _mgpu_child.write_json_file(out_path, result)
    except BaseException:
        code = 3
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _outcome(out_path, status):
    try:
        with open(out_path) as fh:
            return json.load(fh), None
    except (IOError, OSError, ValueError):
        pass
    if os.WIFSIGNALED(status):
        return None, signal.Signals(os.WTERMSIG(status)).name
    return None, "exit status %s" % (os.WEXITSTATUS(status) if os.WIFEXITED(status) else status)


def _stacks_on_usr1():
    """faulthandler dumps the stacks on SIGUSR1 (unregistered first: it skips a signal it thinks it
    still holds, after signal.signal took it over)."""
    import faulthandler
    faulthandler.unregister(signal.SIGUSR1)
    faulthandler.register(signal.SIGUSR1, all_threads=True, chain=False)


def _forward(pid, signum):
    try:
        os.kill(pid, signum)
    except OSError:
        pass


def _failure(step, how):
    return dict(step, ok=False, error="the process %s" % (
        "died by %s" % how if how.startswith("SIG") else "ended with %s" % how))


def run_checkpoint(api, configure_devices, spec, result, workdir):
    result["framework"] = api.framework
    if _skip_unsupported(api, spec, result):
        return
    directory = os.path.join(workdir, "saved")
    os.makedirs(directory)
    start = time.time()
    saved, how = in_fresh_process(lambda: save_stage(api, configure_devices, spec, directory),
                                  os.path.join(workdir, "save.json"))
    if saved is None or "error" in saved:
        error = saved["error"] if saved else None
        result["checkpoint"] = [dict({"format": "training", "stage": "save", "load_devices": 0},
                                     **(_failure({}, how) if error is None else {"ok": False, "error": error}))]
        result["status"] = "save-failed"
        return
    steps = list(saved["steps"])
    result["replica_state_max_abs_diff"] = saved.get("replica_state_max_abs_diff")
    timings = {"save_s": time.time() - start}
    formats = [s["format"] for s in steps if s["ok"]]
    counts = sorted({1, int(spec["devices"])})
    begin = time.time()
    # the reloads on 1 and on N devices at once: they compare predictions, not times
    loads = in_fresh_processes([
        ((lambda n: lambda: load_stage(api, configure_devices, spec, directory, n, formats,
                                       saved["predictions"]))(devices),
         os.path.join(workdir, "load-%d.json" % devices)) for devices in counts])
    timings["load_s"] = time.time() - begin
    for devices, (loaded, how) in zip(counts, loads):
        if loaded is None or "error" in loaded:
            why = loaded["error"] if loaded else None
            for fmt in formats:
                step = {"format": fmt, "stage": "load", "load_devices": devices}
                steps.append(_failure(step, how) if why is None else dict(step, ok=False, error=why))
        else:
            steps.extend(loaded["steps"])
    if spec["layer"] == _smoke_user_model.USER_MODEL:
        _mark_model_limits(api, configure_devices, spec, directory, workdir, steps)
    result["checkpoint"] = steps
    result["stage_times_s"] = timings
    result["status"] = "ok"  # the parent judges the steps


def _mark_model_limits(api, configure_devices, spec, directory, workdir, steps):
    """The user's formats that failed, tried again on one device without a strategy (a fresh
    process): each failed step of a format that fails there too carries that error as
    ``model_limit``, the format's limit for this model, not a multi-device problem."""
    failed = []
    for step in steps:
        if not step.get("ok") and step["format"] not in failed and step["format"] in _paths("", api.flavor):
            failed.append(step["format"])
    if not failed:
        return
    control, _ = in_fresh_process(lambda: control_stage(api, configure_devices, spec, directory, failed),
                                  os.path.join(workdir, "control.json"))
    limits = (control or {}).get("limits") or {}
    for step in steps:
        if not step.get("ok") and step["format"] in limits:
            step["model_limit"] = limits[step["format"]]


def _skip_unsupported(api, spec, result):
    """A scenario this TensorFlow cannot run (for its layer, or without BackupAndRestore for a
    resume): skipped with the reason; whether it was."""
    reason = api.unsupported(spec["layer"], spec["variant"], spec["device_kind"])
    if not reason and spec["scenario"] == "resume" and api.backup_and_restore() is None:
        reason = "BackupAndRestore needs TensorFlow 2.3 (this is %s)" % api.label
    if not reason and spec.get("user_data") and not api.eager:
        reason = ("the checkpoint round trip on the --data pipeline reads its first batch eagerly: "
                  "TensorFlow 2 (this is %s)" % api.label)
    if reason:
        result.update(status="skipped", skip_reason=reason)
    return bool(reason)


def run_resume(api, configure_devices, spec, result, workdir):
    import numpy as np

    result["framework"] = api.framework
    if _skip_unsupported(api, spec, result):
        return
    forget = parse_fault(spec["layer"]) == "forget"
    reference_w = os.path.join(workdir, "reference.npz")
    resumed_w = os.path.join(workdir, "resumed.npz")
    backup = os.path.join(workdir, "backup")
    step = {"format": "backup_and_restore", "stage": "resume", "load_devices": int(spec["devices"]),
            "ok": False}
    ref, how = in_fresh_process(
        lambda: resume_stage(api, configure_devices, spec, os.path.join(workdir, "backup-ref"), reference_w, False),
        os.path.join(workdir, "reference.json"))
    if ref is None or "error" in ref:
        result.update(checkpoint=[dict(step, stage="reference", error=(ref or {}).get("error") or
                                       _failure({}, how)["error"])], status="resume-failed")
        return
    killed, how = in_fresh_process(
        lambda: resume_stage(api, configure_devices, spec, backup, resumed_w, True),
        os.path.join(workdir, "killed.json"))
    if killed is not None:
        result.update(checkpoint=[dict(step, error="the training was not killed in epoch %d as planned"
                                       % (KILL_EPOCH + 1))], status="resume-failed")
        return
    _mgpu_child.heartbeat("killed, restarting")
    if forget:
        shutil.rmtree(backup, ignore_errors=True)
    again, how = in_fresh_process(
        lambda: resume_stage(api, configure_devices, spec, backup, resumed_w, False),
        os.path.join(workdir, "restarted.json"))
    if again is None or "error" in again:
        result.update(checkpoint=[dict(step, error=(again or {}).get("error") or _failure({}, how)["error"])],
                      status="resume-failed")
        return
    with np.load(reference_w) as a, np.load(resumed_w) as b:
        ours = [a[k] for k in sorted(a.files, key=lambda k: int(k.split("_")[1]))]
        theirs = [b[k] for k in sorted(b.files, key=lambda k: int(k.split("_")[1]))]
    diffs = [float(np.max(np.abs(p - q))) if p.size else 0.0 for p, q in zip(ours, theirs)
             if p.shape == q.shape]
    same_shapes = len(diffs) == len(ours) == len(theirs)
    step.update(ok=True, resumed_at_epoch=(again["epochs_begun"] or [None])[0],
                killed_in_epoch=KILL_EPOCH + 1,
                max_abs_diff=max(diffs or [0.0]) if same_shapes else None,
                max_abs_reference=max(float(np.max(np.abs(p))) if p.size else 0.0 for p in ours))
    if not same_shapes:
        step["error"] = "the resumed model has other weights than the reference"
    result["checkpoint"] = [step]
    result["status"] = "ok"

"""Child script: the smoke trainings, one forked child per run (Python 3.6+, stdlib + TensorFlow).

Usage: smoke_worker.py SPECS_JSON OUT_DIR

The worker imports TensorFlow once and never initialises its runtime; every run is a fork of
it, so each run gets a fresh TensorFlow context (virtual devices, collectives, CUDA) and a
crash, an exception or a poisoned runtime in one run cannot touch the next. Running several
MirroredStrategy models in one process is not safe for this: with TF 2.21, after a model with
synchronized BatchNormalization every later strategy in the process fails with "Shape mismatch
in the collective instance 100" (https://github.com/tensorflow/tensorflow/issues/62790), and
`clear_session()` does not help.

Each finished run appends one JSON line to OUT_DIR/runs.jsonl. A run that hangs stops the
heartbeat; the parent (mgpu_doctor.process.childproc) then sends SIGUSR1, which the worker forwards to
the running child so that faulthandler dumps *its* threads, and kills the process group.

Test-only fault injection: MGPU_DOCTOR_SMOKE_FAULT="LAYER:FAULT[:DEVICES][,...]" with FAULT one of
hang (block forever inside a training step), abort (os.abort() in a step), leak (keep 48 MB
more host memory each epoch), raise (a Python exception in a step), killed (SIGKILL in a step of
the first attempt only, as a kill from outside would), slow_input (the input pipeline sleeps
SLOW_INPUT_S for every batch, as a pipeline that decodes on one thread would). The leak probe
(_smoke_leak.py) reads leak, leak_predict and leak_evaluate its own way.
"""

import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _mgpu_child  # noqa: E402

if __name__ == "__main__":
    _mgpu_child.start()  # first: die with the doctor, stacks on SIGUSR1 even in C code

from _smoke_models import finite_or_none, replica_difference  # noqa: E402
from _tf_api import Api  # noqa: E402
import _input_probe  # noqa: E402
import _smoke_checkpoint  # noqa: E402
import _smoke_leak  # noqa: E402
import _smoke_nonfinite  # noqa: E402
import _smoke_scenarios  # noqa: E402
import _smoke_split  # noqa: E402
import _smoke_user_model  # noqa: E402
from _fork_runs import LEAK_BYTES, leaked, parse_fault, rss_mb, serve, strike  # noqa: E402

CHECKPOINT_SCENARIOS = {"checkpoint": _smoke_checkpoint.run_checkpoint, "resume": _smoke_checkpoint.run_resume}

SLOW_INPUT_S = 0.03


# ----------------------------------------------------------------------------- one run

def configure_devices(api, spec):
    """Make the devices this run uses visible (before the runtime starts); their names."""
    devices = int(spec["devices"])
    if spec["device_kind"] == "gpu":
        gpus = api.physical_devices("GPU")
        api.set_visible_devices(gpus[:devices], "GPU")
        for gpu in gpus[:devices]:
            api.tf.config.experimental.set_memory_growth(gpu, True)
        return ["/gpu:%d" % i for i in range(devices)]
    try:
        api.set_visible_devices([], "GPU")
    except Exception:
        pass
    cpu = api.physical_devices("CPU")[0]
    count = max(int(spec.get("virtual_devices") or devices), devices)
    if count > 1:
        api.split_cpu(cpu, count)
    return ["/cpu:%d" % i for i in range(devices)]


def skip_unsupported(api, spec, result):
    """Mark a run this TensorFlow cannot do as skipped, with the reason; whether it was."""
    reason = api.unsupported(spec["layer"], spec["variant"], spec["device_kind"])
    if reason:
        result.update(status="skipped", skip_reason=reason)
    return bool(reason)


def train(tf, spec, result):
    import numpy as np

    api = Api(tf)
    keras = api.keras
    result["framework"] = api.framework
    if skip_unsupported(api, spec, result):
        return
    way = (_smoke_user_model.UserModel(tf, api, spec) if spec.get("user_model")
           else _smoke_scenarios.way_of_training(tf, api, spec))
    devices = int(spec["devices"])
    names = configure_devices(api, spec) if spec.get("configure_devices", True) else (
        ["/%s:%d" % ("gpu" if spec["device_kind"] == "gpu" else "cpu", i) for i in range(devices)])
    _mgpu_child.heartbeat("devices ready")
    strategy = api.strategy(names)
    api.set_seed(int(spec.get("seed", 7)))
    x, y = way.data(np)
    way.before_build(result)
    with strategy.scope():
        model = way.build()
    fault = parse_fault(spec["layer"], devices)
    dataset = way.dataset(x, y)
    if fault == "slow_input":
        dataset = dataset.map(lambda a, b: slow_batch(tf, a, b))
    steps_per_epoch = -(-int(spec["samples"]) // int(spec["global_batch"]))
    epochs = int(spec["epochs"])
    step_times = []
    epoch_rss = []
    epoch_gpu = []

    class Watch(step_timer(keras, step_times, "step")):
        def on_train_batch_begin(self, batch, logs=None):
            strike(fault, batch)
            super(Watch, self).on_train_batch_begin(batch, logs)

        def on_epoch_end(self, epoch, logs=None):
            if fault == "leak":
                leaked.append(b"\x01" * LEAK_BYTES)
            epoch_rss.append(rss_mb())
            if spec["device_kind"] == "gpu":
                try:  # summed over the GPUs this run uses
                    used = sum(tf.config.experimental.get_memory_info("GPU:%d" % i)["current"]
                               for i in range(devices))
                    epoch_gpu.append(used / 1048576.0)
                except Exception:
                    pass

    _mgpu_child.heartbeat("model built")
    split = int(spec.get("split_replicas") or 0)
    start = _smoke_split.initial_weights(model) if split else None
    nonfinite = _smoke_nonfinite.watch(api, strategy, model)  # after Watch: outside the timed step
    history = way.fit(strategy, model, dataset, epochs, [Watch(), nonfinite])
    # Counted once trained: a subclassed model makes its variables on its first batch (before, Keras
    # 2 raises and Keras 3 counts 0, even after model.build(input_shape) without a build method).
    result["parameters"] = int(model.count_params())
    raw_losses = [float(v) for v in history.get("loss", [])]
    result["losses"] = [finite_or_none(v) for v in raw_losses]
    weights_finite = all(bool(np.all(np.isfinite(np.asarray(w)))) for w in model.get_weights())
    result["weights_finite"] = weights_finite
    if devices > 1:
        diff = replica_difference(np, api, strategy, model.trainable_weights)
        result["replica_max_abs_diff"] = finite_or_none(diff)
        result["replicas_identical"] = diff == 0.0
        result["replica_state_max_abs_diff"] = finite_or_none(
            replica_difference(np, api, strategy, model.non_trainable_weights))
    # Step times after the first epoch: the first one includes tracing and graph building.
    steady = step_times[steps_per_epoch:] or step_times
    result["step_times_s"] = [round(t, 6) for t in steady]
    result["rss_mb"] = [round(v, 2) for v in epoch_rss if v is not None]
    result["gpu_memory_mb"] = [round(v, 2) for v in epoch_gpu]
    if spec.get("input_probe"):
        _input_probe.probe_input(api, model, way.pipeline(dataset), dataset, result)
    if split and weights_finite and None not in result["losses"]:
        _mgpu_child.heartbeat("split training")
        _smoke_split.measure(api, strategy, model, dataset, epochs, split, start, result)
    bad = [i for i, v in enumerate(raw_losses) if finite_or_none(v) is None]
    if bad or not weights_finite:
        result["status"] = "nan"
        result["nonfinite_epoch"] = (bad[0] + 1) if bad else None
        _mgpu_child.heartbeat("locating the non-finite value")
        try:
            result["nonfinite_origin"] = _smoke_nonfinite.origin(api, strategy, model, dataset, spec, nonfinite)
        except Exception as exc:  # the NaN itself is the finding; where it came from is an aid
            result["nonfinite_origin"] = {"error": "%s: %s" % (type(exc).__name__, str(exc)[:300])}
    else:
        result["status"] = "ok"


def step_timer(keras, times, beat):
    """A callback class that appends every training step's seconds to ``times`` and beats."""
    class StepTimer(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self._began = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            times.append(time.perf_counter() - self._began)
            _mgpu_child.heartbeat(beat)

    return StepTimer


def slow_batch(tf, x, y):
    """The slow_input fault: a host-side step per batch that takes SLOW_INPUT_S."""
    def sleep(a):
        time.sleep(SLOW_INPUT_S)
        return a
    slowed = tf.py_function(sleep, [x], x.dtype)
    slowed.set_shape(x.shape)
    return slowed, y


def run_one(tf, spec, result, out_dir, attempt):
    """One run, in its forked child (_fork_runs): train, or the leak probe, or the checkpoint stages."""
    try:
        scenario = CHECKPOINT_SCENARIOS.get(spec["scenario"])
        if spec["scenario"] == _smoke_leak.SCENARIO:
            _smoke_leak.run_leak_probe(tf, configure_devices, spec, result,
                                       parse_fault(spec["layer"], int(spec["devices"])))
        elif scenario is None:
            train(tf, spec, result)
        else:  # stages in fresh processes of their own, in a scratch directory of this run
            workdir = os.path.join(out_dir, "checkpoint-%d-%d" % (spec["index"], attempt))
            try:
                scenario(Api(tf), configure_devices, spec, result, workdir)
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
    except _smoke_scenarios.Skipped as exc:
        result.update(status="skipped", error_message=str(exc))


def main():
    specs_path, out_dir = sys.argv[1], sys.argv[2]
    with open(specs_path) as fh:
        specs = json.load(fh)
    start = time.time()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf  # a hang here still answers SIGUSR1: faulthandler dumps from C level
    import_s = time.time() - start
    serve(specs, out_dir, lambda spec, result, out, attempt: run_one(tf, spec, result, out, attempt))
    _mgpu_child.write_result({"done": len(specs), "import_s": import_s,
                              "tensorflow": getattr(tf, "__version__", "")})


if __name__ == "__main__":
    main()

"""Child script: the smoke trainings on Keras 3's JAX backend (stdlib + NumPy, Keras 3 and JAX).

Usage: smoke_worker_jax.py SPECS_JSON OUT_DIR

The twin of smoke_worker.py for `smoke --backend jax`: the same protocol (specs in, one JSON line
per run in OUT_DIR/runs.jsonl, heartbeats, SIGUSR1 forwarded to the run in flight) and the same
stock models (_smoke_models.py), trained with ``keras.distribution.DataParallel`` over the first N
of ``jax.devices()`` (one device: no distribution). The worker imports Keras and JAX once without
starting JAX's runtime; every run is a fork of it, so each gets a fresh JAX client, and a crash in
one cannot touch the next. The parent sets KERAS_BACKEND=jax, and for simulated devices
JAX_PLATFORMS=cpu with XLA_FLAGS=--xla_force_host_platform_device_count=N; on GPUs
XLA_PYTHON_CLIENT_PREALLOCATE=false, so that the memory a run holds is the memory it uses.

Test-only fault injection, as smoke_worker.py: MGPU_DOCTOR_SMOKE_FAULT="LAYER:FAULT[:DEVICES][,...]"
with FAULT one of hang, abort, raise, leak, killed, nan (the inputs of every batch are NaN).
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _mgpu_child  # noqa: E402

if __name__ == "__main__":
    _mgpu_child.start()  # first: die with the doctor, stacks on SIGUSR1 even in C code

from _smoke_models import build_model, copies_difference, finite_or_none, make_data  # noqa: E402
from _tf_api import Api  # noqa: E402
from _fork_runs import LEAK_BYTES, leaked, parse_fault, rss_mb, serve, strike  # noqa: E402


def use_devices(jax, keras, spec):
    """The first N devices of the run's platform; DataParallel over them when N > 1."""
    devices = int(spec["devices"])
    platform = "gpu" if spec["device_kind"] == "gpu" else "cpu"
    found = jax.devices(platform)
    if len(found) < devices:
        raise RuntimeError("JAX sees %d %s device(s), the run needs %d" % (len(found), platform, devices))
    chosen = found[:devices]
    if devices > 1:
        names = keras.distribution.list_devices(platform)[:devices]  # Keras's own spelling ("gpu:0")
        keras.distribution.set_distribution(keras.distribution.DataParallel(devices=names))
    else:
        keras.distribution.set_distribution(None)
    return chosen


def device_memory_mb(devices):
    """Bytes in use on the run's devices (GPUs); None where JAX keeps no statistics (the CPU)."""
    total = 0
    for d in devices:
        try:
            stats = d.memory_stats()
        except Exception:
            return None
        if not stats or "bytes_in_use" not in stats:
            return None
        total += int(stats["bytes_in_use"])
    return total / 1048576.0


def replica_difference(np, variables):
    """The largest difference between the devices' copies of ``variables`` (inf: NaN in some only)."""
    worst = 0.0
    for v in variables:
        value = getattr(v, "value", v)
        shards = getattr(value, "addressable_shards", None)
        if not shards:
            continue
        worst = max(worst, copies_difference(np, [np.asarray(s.data) for s in shards]))
    return worst


def train(jax, keras, spec, result):
    import numpy as np

    result["framework"] = "keras %s on jax %s" % (keras.__version__, jax.__version__)
    devices = int(spec["devices"])
    chosen = use_devices(jax, keras, spec)
    _mgpu_child.heartbeat("devices ready")
    keras.utils.set_random_seed(int(spec.get("seed", 7)))
    x, y = make_data(np, spec["layer"], int(spec["samples"]))
    fault = parse_fault(spec["layer"], devices)
    if fault == "nan":
        x = np.full_like(x, np.nan) if x.dtype.kind == "f" else x
    model = build_model(Api.keras3_without_tensorflow(keras), spec["layer"], spec["variant"],
                        spec.get("model_size", 1))
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss="mse")
    result["parameters"] = int(model.count_params())
    steps_per_epoch = -(-int(spec["samples"]) // int(spec["global_batch"]))
    step_times = []
    epoch_rss = []
    epoch_device = []

    class Watch(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            strike(fault, batch)
            self._began = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            step_times.append(time.perf_counter() - self._began)
            _mgpu_child.heartbeat("step")

        def on_epoch_end(self, epoch, logs=None):
            if fault == "leak":
                leaked.append(b"\x01" * LEAK_BYTES)
            epoch_rss.append(rss_mb())
            used = device_memory_mb(chosen)
            if used is not None:
                epoch_device.append(used)

    _mgpu_child.heartbeat("model built")
    history = model.fit(x, y, batch_size=int(spec["global_batch"]), epochs=int(spec["epochs"]),
                        verbose=0, shuffle=False, callbacks=[Watch()])
    raw_losses = [float(v) for v in history.history.get("loss", [])]
    result["losses"] = [finite_or_none(v) for v in raw_losses]
    weights_finite = all(bool(np.all(np.isfinite(np.asarray(w)))) for w in model.get_weights())
    result["weights_finite"] = weights_finite
    if devices > 1:
        diff = replica_difference(np, model.trainable_weights)
        result["replica_max_abs_diff"] = finite_or_none(diff)
        result["replicas_identical"] = diff == 0.0
        result["replica_state_max_abs_diff"] = finite_or_none(replica_difference(np, model.non_trainable_weights))
    steady = step_times[steps_per_epoch:] or step_times
    result["step_times_s"] = [round(t, 6) for t in steady]
    result["rss_mb"] = [round(v, 2) for v in epoch_rss if v is not None]
    if spec["device_kind"] == "gpu":
        result["gpu_memory_mb"] = [round(v, 2) for v in epoch_device]
    bad = [i for i, v in enumerate(raw_losses) if finite_or_none(v) is None]
    if bad or not weights_finite:
        result["status"] = "nan"
        result["nonfinite_epoch"] = (bad[0] + 1) if bad else None
    else:
        result["status"] = "ok"
    return model, x


def checkpoint(jax, keras, spec, result, workdir):
    """Train on N devices, save model.keras, load it on 1 and on N devices, compare predictions."""
    import numpy as np

    model, x = train(jax, keras, spec, result)
    steps = result["checkpoint"] = []
    if result["status"] != "ok":
        steps.append({"format": "training", "stage": "save", "ok": False, "error": "the training failed"})
        return
    probe = x[:int(spec["global_batch"])]
    reference = np.asarray(model.predict(probe, verbose=0))
    os.makedirs(workdir)
    path = os.path.join(workdir, "model.keras")
    try:
        model.save(path)
        steps.append({"format": "keras", "stage": "save", "ok": True})
    except Exception as exc:
        steps.append({"format": "keras", "stage": "save", "ok": False, "error": "%s: %s" % (type(exc).__name__, exc)})
        return
    for count in sorted({1, int(spec["devices"])}):
        step = {"format": "keras", "stage": "load", "load_devices": count, "ok": False}
        try:
            use_devices(jax, keras, dict(spec, devices=count))
            loaded = keras.models.load_model(path)
            again = np.asarray(loaded.predict(probe, verbose=0))
            step.update(ok=True, max_abs_diff=finite_or_none(float(np.max(np.abs(again - reference)))),
                        max_abs_reference=finite_or_none(float(np.max(np.abs(reference)))))
        except Exception as exc:
            step["error"] = "%s: %s" % (type(exc).__name__, exc)
        steps.append(step)


def run_one(jax, keras, spec, result, out_dir, attempt):
    """One run, in its forked child (_fork_runs)."""
    if spec["scenario"] == "checkpoint":
        checkpoint(jax, keras, spec, result, os.path.join(out_dir, "checkpoint-%d-%d" % (spec["index"], attempt)))
    elif spec["scenario"] == "resume":
        raise NotImplementedError("the resume scenario (BackupAndRestore) is not run on the JAX backend")
    else:
        train(jax, keras, spec, result)


def main():
    specs_path, out_dir = sys.argv[1], sys.argv[2]
    with open(specs_path) as fh:
        specs = json.load(fh)
    start = time.time()
    os.environ["KERAS_BACKEND"] = "jax"
    import jax  # no device is touched here: each forked run starts JAX's runtime itself
    import keras
    if keras.backend.backend() != "jax":
        raise SystemExit("Keras runs on %s, not jax (a keras.json that names another backend?)"
                         % keras.backend.backend())
    import_s = time.time() - start
    serve(specs, out_dir, lambda spec, result, out, attempt: run_one(jax, keras, spec, result, out, attempt))
    _mgpu_child.write_result({"done": len(specs), "import_s": import_s, "jax": jax.__version__,
                              "keras": keras.__version__})


if __name__ == "__main__":
    main()

"""The smoke worker's leak probe (Python 3.6+, standard library, NumPy and TensorFlow).

Imported by smoke_worker.py, which runs it in the forked child of a "leak_probe" run: one model
under the run's strategy (OneDeviceStrategy or MirroredStrategy), then ``cycles`` calls of
``model.fit`` (one epoch), then as many of ``model.predict``, then of ``model.evaluate``, each
phase on its own so that a growth is told apart by phase. After every call: the host memory the
process holds that no file backs (anonymous RSS: resident minus shared in /proc/self/statm; a
leak is heap memory, while the pages of TensorFlow's libraries a call touches for the first time
are file pages the kernel can drop) and, on GPUs, the memory TensorFlow's allocator holds on the
run's GPUs (``tf.config.experimental.get_memory_info``). The parent fits a line over the cycles
after a warm-up and judges the slope (mgpu_doctor/smoke/leak.py).

A full ``gc.collect()`` before each measurement: a leak is memory still referenced after a
collection. Without it, the reference cycles every fit call leaves behind pile up until Python's
oldest generation is collected, which takes many calls (measured here: 1.3 MiB more after every
``fit`` of the dense model on 2 devices, in a fresh process as in a fork, none with a collection).
``gc.freeze()`` (Python 3.7+) after the model is built keeps the collections short: the objects of
TensorFlow's and Keras' modules are never garbage and are not walked again.

Test-only faults (MGPU_DOCTOR_SMOKE_FAULT, parsed by smoke_worker.py): "leak" keeps LEAK_MB more
host memory (a NumPy array in a growing list) after each fit call, "leak_predict" after each
predict call, "leak_evaluate" after each evaluate call.
"""

import gc
import os
import time

import _mgpu_child
from _smoke_models import build_model, make_data
from _tf_api import Api

SCENARIO = "leak_probe"
PHASES = ("fit", "predict", "evaluate")
FAULT_PHASES = {"leak": "fit", "leak_predict": "predict", "leak_evaluate": "evaluate"}
DEFAULT_CYCLES = 12
LEAK_MB = 8
_held = []  # what the injected leak keeps


def anon_rss_mb():
    """Resident memory no file backs, MiB: statm's resident minus its shared (file and shmem)."""
    try:
        with open("/proc/self/statm") as fh:
            fields = fh.read().split()
        return (int(fields[1]) - int(fields[2])) * os.sysconf("SC_PAGE_SIZE") / 1048576.0
    except (IOError, OSError, ValueError, IndexError):
        return None


def gpu_mb(tf, spec):
    """MiB TensorFlow's allocator holds on the run's GPUs; None where it cannot be measured."""
    if spec["device_kind"] != "gpu":
        return None
    info = getattr(tf.config.experimental, "get_memory_info", None)  # TF 2.5+
    if info is None:
        return None
    try:
        return sum(info("GPU:%d" % i)["current"] for i in range(int(spec["devices"]))) / 1048576.0
    except Exception:
        return None


def _leak(np):
    _held.append(np.ones(LEAK_MB * 1048576 // 8))  # ones, not zeros: the pages are touched


def run_leak_probe(tf, configure_devices, spec, result, fault=""):
    """Fill ``result`` with ``leak_cycles``: one record per call, phase by phase."""
    import numpy as np

    api = Api(tf)
    keras = api.keras
    result["framework"] = api.framework
    names = configure_devices(api, spec)
    _mgpu_child.heartbeat("devices ready")
    strategy = api.strategy(names)
    api.set_seed(int(spec.get("seed", 7)))
    x, y = make_data(np, spec["layer"], int(spec["samples"]))
    with strategy.scope():
        model = build_model(api, spec["layer"], spec["variant"], spec.get("model_size", 1))
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss="mse")
        api.same_start(model, int(spec.get("seed", 7)))
    result["parameters"] = int(model.count_params())
    batch = int(spec["global_batch"])
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch)
    calls = {
        "fit": lambda: model.fit(dataset, epochs=1, verbose=0),
        "predict": lambda: model.predict(x, batch_size=batch, verbose=0),
        "evaluate": lambda: model.evaluate(x, y, batch_size=batch, verbose=0),
    }
    gc.collect()
    if hasattr(gc, "freeze"):  # Python 3.7+: what exists now is never walked again
        gc.freeze()
    leaky = FAULT_PHASES.get(fault, "")
    cycles = int(spec.get("cycles") or DEFAULT_CYCLES)
    records = []
    result["leak_cycles"] = records
    for phase in PHASES:
        for cycle in range(cycles):
            began = time.perf_counter()
            calls[phase]()
            if phase == leaky:
                _leak(np)
            seconds = time.perf_counter() - began
            gc.collect()
            records.append({"phase": phase, "cycle": cycle, "rss_anon_mb": anon_rss_mb(),
                            "gpu_mb": gpu_mb(tf, spec), "seconds": round(seconds, 4)})
            _mgpu_child.heartbeat("%s %d" % (phase, cycle))
    result["status"] = "ok"

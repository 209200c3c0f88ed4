"""The smoke worker's leak probe (Python 3.6+, standard library, NumPy and TensorFlow).

Imported by smoke_worker.py, which runs it in the forked child of a "leak_probe" run: one model
under the run's strategy (OneDeviceStrategy or MirroredStrategy), then ``cycles`` calls of
``model.fit`` (one epoch), then as many of ``model.predict``, then of ``model.evaluate``, each
phase on its own so that a growth is told apart by phase. After every call: the host RSS (from
/proc/self/statm) and, on GPUs, the memory TensorFlow's allocator holds on the run's GPUs
(``tf.config.experimental.get_memory_info``). The parent fits a line over the cycles after a
warm-up and judges the slope (mgpu_doctor/smoke/leak.py).

No ``gc.collect()`` between cycles: it costs about as much as a cycle of the tiny model, and a
leak is memory that stays referenced; garbage Python frees later shows as noise, not as a slope.

Test-only faults (MGPU_DOCTOR_SMOKE_FAULT, parsed by smoke_worker.py): "leak" keeps LEAK_MB more
host memory (a NumPy array in a growing list) after each fit call, "leak_predict" after each
predict call, "leak_evaluate" after each evaluate call.
"""

import os
import time

import _mgpu_child
from _smoke_models import build_model, keras_flavor, make_data

SCENARIO = "leak_probe"
PHASES = ("fit", "predict", "evaluate")
FAULT_PHASES = {"leak": "fit", "leak_predict": "predict", "leak_evaluate": "evaluate"}
DEFAULT_CYCLES = 12
LEAK_MB = 8
_held = []  # what the injected leak keeps


def rss_mb():
    try:
        with open("/proc/self/statm") as fh:
            pages = int(fh.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 1048576.0
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

    keras, flavor, version = keras_flavor(tf)
    result["framework"] = "%s %s" % (flavor, version)
    devices = int(spec["devices"])
    names = configure_devices(tf, spec)
    _mgpu_child.heartbeat("devices ready")
    if devices > 1:
        strategy = tf.distribute.MirroredStrategy(names)
    else:
        strategy = tf.distribute.OneDeviceStrategy(names[0])
    keras.utils.set_random_seed(int(spec.get("seed", 7)))
    x, y = make_data(np, spec["layer"], int(spec["samples"]))
    with strategy.scope():
        model = build_model(keras, flavor, spec["layer"], spec["variant"], spec.get("model_size", 1))
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss="mse")
    result["parameters"] = int(model.count_params())
    batch = int(spec["global_batch"])
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch)
    calls = {
        "fit": lambda: model.fit(dataset, epochs=1, verbose=0),
        "predict": lambda: model.predict(x, batch_size=batch, verbose=0),
        "evaluate": lambda: model.evaluate(x, y, batch_size=batch, verbose=0),
    }
    leaky = FAULT_PHASES.get(fault, "")
    cycles = int(spec.get("cycles") or DEFAULT_CYCLES)
    records = []
    result["leak_cycles"] = records
    result["rss_before_mb"] = rss_mb()
    for phase in PHASES:
        for cycle in range(cycles):
            began = time.perf_counter()
            calls[phase]()
            if phase == leaky:
                _leak(np)
            seconds = time.perf_counter() - began
            records.append({"phase": phase, "cycle": cycle, "rss_mb": rss_mb(),
                            "gpu_mb": gpu_mb(tf, spec), "seconds": round(seconds, 4)})
            _mgpu_child.heartbeat("%s %d" % (phase, cycle))
    result["status"] = "ok"

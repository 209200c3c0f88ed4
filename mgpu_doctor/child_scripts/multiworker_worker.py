"""Child script: one worker of a multi-worker smoke training (MultiWorkerMirroredStrategy).

Usage: multiworker_worker.py [LAYER [VARIANT]] [--backup-dir DIR] [--kill-task I --kill-epoch E]
(default layer: dense)

Reads TF_CONFIG from the environment (the launcher or the scheduler sets it), trains one of the
smoke models (``_smoke_models.py``, shared with smoke_worker.py) on synthetic data with
tf.distribute.MultiWorkerMirroredStrategy, and writes its status, losses and final weights
(flat list) as JSON to $MGPU_DOCTOR_RESULT. After training it also gathers every worker's
weights over the strategy's own collectives (``strategy.gather``) and reports the largest
difference, so a worker started alone under a scheduler can tell whether the others agree.
Uses `tf.keras`, i.e. Keras 3 by default and tf-keras with TF_USE_LEGACY_KERAS=1.

The resume test (mgpu_doctor/multiworker/resume.py) adds ``--backup-dir``: train with
tf.keras.callbacks.BackupAndRestore(DIR), the same DIR in every worker; and ``--kill-task I
--kill-epoch E``: task I SIGKILLs itself at the second step of epoch E (0-based), as a lost
worker. Every worker reports the epochs model.fit began (``epochs_begun``): a restarted job that
found its backup begins after the last epoch backed up.

Test-only fault injection: with MGPU_DOCTOR_TEST_DIE_TASK=<index> and
MGPU_DOCTOR_TEST_DIE_AT_STEP=<step>, that worker kills itself (SIGKILL) at that training step.
"""

import argparse
import json
import math
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _mgpu_child  # noqa: E402

if __name__ == "__main__":
    _mgpu_child.start()  # first: die with the doctor, stacks on SIGUSR1 even in C code

from _smoke_models import build_model, make_data  # noqa: E402
from _tf_api import Api  # noqa: E402

STEPS_PER_EPOCH = 4
EPOCHS = 2
GLOBAL_BATCH = 16


def finite(value):
    return value is not None and not math.isnan(value) and not math.isinf(value)


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="multiworker_worker.py")
    parser.add_argument("layer", nargs="?", default="dense")
    parser.add_argument("variant", nargs="?", default="")
    parser.add_argument("--backup-dir", default="")
    parser.add_argument("--kill-task", type=int, default=-1)
    parser.add_argument("--kill-epoch", type=int, default=-1)
    return parser.parse_args(argv)


def main():
    args = parse_args(sys.argv[1:])
    layer, variant = args.layer, args.variant
    config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    task = config.get("task", {})
    index = int(task.get("index", 0))
    result = {"task_index": index, "status": "starting", "phase": "import", "layer": layer,
              "variant": variant, "global_batch": GLOBAL_BATCH, "epochs": EPOCHS,
              "steps_per_epoch": STEPS_PER_EPOCH}
    timings = {}
    _mgpu_child.heartbeat("import tensorflow")
    started = time.time()
    try:
        import numpy as np
        import tensorflow as tf
    except Exception as exc:  # the parent reports the real error
        result.update(status="failed", error=_mgpu_child.describe_exception(exc))
        _mgpu_child.write_result(result)
        return 1
    timings["import"] = round(time.time() - started, 3)
    result["tensorflow"] = tf.__version__
    die_task = os.environ.get("MGPU_DOCTOR_TEST_DIE_TASK")
    die_step = int(os.environ.get("MGPU_DOCTOR_TEST_DIE_AT_STEP", "-1"))
    try:
        api = Api(tf)
        keras = api.keras
        result["keras_module"] = api.keras_name
        result["keras_version"] = api.keras_version
        result["phase"] = "strategy"
        _mgpu_child.heartbeat("create MultiWorkerMirroredStrategy")
        started = time.time()
        strategy = api.multi_worker_strategy()()
        timings["strategy"] = round(time.time() - started, 3)
        result["replicas"] = strategy.num_replicas_in_sync
        result["local_gpus"] = len(api.logical_devices("GPU"))

        result["phase"] = "model"
        api.set_seed(1234)
        with strategy.scope():
            model = build_model(api, layer, variant)
            model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss="mse")
        x, y = make_data(np, layer, GLOBAL_BATCH * STEPS_PER_EPOCH)
        dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH).repeat()
        policy = getattr(tf.data.experimental, "AutoShardPolicy", None)  # 2.1+; 1.15 shards by data
        if policy is not None:
            options = tf.data.Options()
            options.experimental_distribute.auto_shard_policy = policy.DATA
            dataset = dataset.with_options(options)

        state = {"step": 0}
        begun = []
        result["epochs_begun"] = begun

        class Beat(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                begun.append(int(epoch))

            def on_train_batch_begin(self, batch, logs=None):
                if index == args.kill_task and begun and begun[-1] == args.kill_epoch and batch == 1:
                    os.kill(os.getpid(), signal.SIGKILL)  # the lost worker of the resume test

            def on_train_batch_end(self, batch, logs=None):
                state["step"] += 1
                _mgpu_child.heartbeat("step %d" % state["step"])
                if die_task is not None and int(die_task) == index and state["step"] == die_step:
                    os.kill(os.getpid(), signal.SIGKILL)

        result["phase"] = "fit"
        _mgpu_child.heartbeat("fit")
        started = time.time()
        callbacks = [Beat()]
        if args.backup_dir:
            # Every worker restores from DIR/chief; the chief writes there, the others to temporary
            # DIR/workertemp_N directories (tf_keras worker_training_state.py).
            callbacks.insert(0, api.backup_and_restore()(args.backup_dir))
            result["backup_dir"] = args.backup_dir
        history = model.fit(dataset, epochs=EPOCHS, steps_per_epoch=STEPS_PER_EPOCH, verbose=0,
                            callbacks=callbacks)
        timings["fit"] = round(time.time() - started, 3)
        flat = np.concatenate([np.asarray(w, dtype="float32").reshape(-1) for w in model.get_weights()])
        losses = [float(v) for v in history.history.get("loss", [])]
        result.update(steps=state["step"], loss=[v if finite(v) else None for v in losses],
                      weights=[float(v) for v in flat.tolist()],
                      weights_finite=bool(np.all(np.isfinite(flat))))

        result["phase"] = "compare-weights"
        if hasattr(strategy, "gather") and api.eager:
            _mgpu_child.heartbeat("gather weights")
            started = time.time()
            mine = tf.constant(flat[None, :])
            gathered = strategy.gather(strategy.run(lambda: tf.identity(mine)), axis=0).numpy()
            with np.errstate(invalid="ignore"):
                spread = np.nanmax(gathered, axis=0) - np.nanmin(gathered, axis=0)
            result["gathered_workers"] = int(gathered.shape[0])
            worst = float(spread.max()) if spread.size else 0.0
            result["weight_spread"] = worst if finite(worst) else None
            timings["gather"] = round(time.time() - started, 3)
        else:  # Strategy.gather: TensorFlow 2.3+, eager
            result["gather_skipped"] = ("strategy.gather needs TensorFlow 2.3 (this is %s): the "
                                        "workers' weights were not compared here" % api.label)
        result.update(status="ok", phase="done")
    except Exception as exc:
        result.update(status="failed", error=_mgpu_child.describe_exception(exc))
    result["seconds"] = timings
    _mgpu_child.write_result(result)
    return 0 if result["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())

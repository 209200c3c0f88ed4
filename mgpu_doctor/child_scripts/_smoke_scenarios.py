"""The ways of training of the smoke suite, and the user's own model, for smoke_worker.py's train().

A "way" says how one run builds, feeds and fits its model: the plain one (model.fit on a tf.data
pipeline, float32, no XLA: the even and uneven scenarios) and the usage scenarios, each named by
the matrix's usage word: mixed_precision (the mixed_float16 policy, LossScaleOptimizer),
jit_compile (model.compile(jit_compile=True)), custom_training_loop (strategy.run over
experimental_distribute_dataset, GradientTape, optimizer.apply_gradients) and distribute_dataset
(model.fit on strategy.experimental_distribute_dataset). A TensorFlow or Keras without the API a
way needs raises Skipped with the reason. Python 3.6+, standard library, NumPy and TensorFlow only
(passed in).
"""

import importlib
import os
import sys

from _smoke_models import build_model, make_data

LEARNING_RATE = 0.05
# The custom loop's optimizer keeps state (momentum), as the loops people write do (Adam, SGD with
# momentum): a stateless one would miss the failures of optimizer slots created while tracing.
LOOP_LEARNING_RATE = 0.01
LOOP_MOMENTUM = 0.9


class Skipped(Exception):
    """This TensorFlow / Keras cannot train this way (the message says which API is missing)."""


class Plain(object):
    """model.fit on a tf.data pipeline, float32, no XLA."""

    def __init__(self, tf, api, spec):
        self.tf, self.api, self.spec = tf, api, spec
        self.keras, self.flavor = api.keras, api.flavor

    def data(self, np):
        return make_data(np, self.spec["layer"], int(self.spec["samples"]))

    def dataset(self, x, y):
        return self.tf.data.Dataset.from_tensor_slices((x, y)).batch(int(self.spec["global_batch"]))

    def pipeline(self, dataset):
        """What the input-bound probe measures (_input_probe.py): the run's own pipeline."""
        return dataset

    def before_build(self, result):
        pass

    def build(self):
        """The compiled model; called inside the strategy's scope."""
        spec = self.spec
        model = build_model(self.api, spec["layer"], spec["variant"], spec.get("model_size", 1))
        model.compile(optimizer=self.optimizer(), loss="mse", **self.compile_options())
        self.api.same_start(model, int(spec.get("seed", 7)))
        return model

    def optimizer(self):
        return self.keras.optimizers.SGD(learning_rate=LEARNING_RATE)

    def compile_options(self):
        return {}

    def fit(self, strategy, model, dataset, epochs, callbacks):
        """The losses per epoch (a History's ``history`` dict)."""
        return model.fit(dataset, epochs=epochs, verbose=0, callbacks=callbacks).history


class MixedPrecision(Plain):
    """The mixed_float16 policy; the optimizer wrapped in a LossScaleOptimizer (loss scaling)."""

    def before_build(self, result):
        mp = getattr(self.keras, "mixed_precision", None)
        if mp is not None and hasattr(mp, "set_global_policy"):
            mp.set_global_policy("mixed_float16")
        elif mp is not None and hasattr(getattr(mp, "experimental", None), "set_policy"):
            mp.experimental.set_policy("mixed_float16")
        else:
            raise Skipped("this Keras has no mixed precision policy (keras.mixed_precision)")
        result["policy"] = "mixed_float16"

    def optimizer(self):
        inner = Plain.optimizer(self)
        mp = self.keras.mixed_precision
        wrapper = getattr(mp, "LossScaleOptimizer", None) or getattr(
            getattr(mp, "experimental", None), "LossScaleOptimizer", None)
        if wrapper is None:
            return inner  # model.compile wraps it under the mixed_float16 policy
        try:
            return wrapper(inner)
        except TypeError:  # TensorFlow 2.1-2.3: LossScaleOptimizer(optimizer, loss_scale)
            return wrapper(inner, "dynamic")

    def build(self):
        model = Plain.build(self)
        self.loss_scaled = "LossScale" in type(model.optimizer).__name__
        return model

    def fit(self, strategy, model, dataset, epochs, callbacks):
        if not getattr(self, "loss_scaled", False):
            raise Skipped("the optimizer is %s, not a LossScaleOptimizer" % type(model.optimizer).__name__)
        return Plain.fit(self, strategy, model, dataset, epochs, callbacks)


class JitCompile(Plain):
    """model.compile(jit_compile=True): every training step compiled with XLA."""

    def compile_options(self):
        if not _accepts(self.keras.Model.compile, "jit_compile"):
            raise Skipped("model.compile of this Keras takes no jit_compile")
        return {"jit_compile": True}


class DistributeDataset(Plain):
    """model.fit on the pipeline distributed by hand (strategy.experimental_distribute_dataset)."""

    def fit(self, strategy, model, dataset, epochs, callbacks):
        if not hasattr(strategy, "experimental_distribute_dataset"):
            raise Skipped("this tf.distribute has no experimental_distribute_dataset")
        distributed = strategy.experimental_distribute_dataset(dataset)
        return model.fit(distributed, epochs=epochs, verbose=0, callbacks=callbacks).history


class CustomTrainingLoop(Plain):
    """strategy.run over strategy.experimental_distribute_dataset in a tf.function: GradientTape,
    the loss averaged over the global batch, optimizer.apply_gradients. The callbacks hear of every
    step and epoch as under model.fit (heartbeat, step times, injected faults, memory)."""

    def optimizer(self):
        return self.keras.optimizers.SGD(learning_rate=LOOP_LEARNING_RATE, momentum=LOOP_MOMENTUM)

    def fit(self, strategy, model, dataset, epochs, callbacks):
        tf = self.tf
        if not tf.executing_eagerly():
            raise Skipped("a custom loop over a distributed dataset needs eager execution (TensorFlow 2)")
        if not hasattr(strategy, "experimental_distribute_dataset"):
            raise Skipped("this tf.distribute has no experimental_distribute_dataset")
        run = getattr(strategy, "run", None) or getattr(strategy, "experimental_run_v2")
        global_batch = int(self.spec["global_batch"])
        optimizer = model.optimizer
        per_example = self.keras.losses.MeanSquaredError(reduction="none")
        average = getattr(tf.nn, "compute_average_loss", None)

        def step_fn(x, y):
            with tf.GradientTape() as tape:
                predictions = model(x, training=True)
                losses = tf.reshape(tf.cast(per_example(y, predictions), "float32"), [-1])
                if average is not None:
                    loss = average(losses, global_batch_size=global_batch)
                else:
                    loss = tf.reduce_sum(losses) / global_batch
            variables = model.trainable_variables
            gradients = tape.gradient(loss, variables)
            optimizer.apply_gradients(zip(gradients, variables))
            return loss

        @tf.function
        def train_step(batch):
            per_replica = run(step_fn, args=batch)
            return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

        history = {"loss": []}
        distributed = strategy.experimental_distribute_dataset(dataset)
        for epoch in range(epochs):
            total, steps = 0.0, 0
            for step, batch in enumerate(distributed):
                for cb in callbacks:
                    cb.on_train_batch_begin(step)
                total += float(train_step(batch))
                steps += 1
                for cb in callbacks:
                    cb.on_train_batch_end(step)
            history["loss"].append(total / max(steps, 1))
            for cb in callbacks:
                cb.on_epoch_end(epoch)
        return history


WAYS = {
    "mixed_precision": MixedPrecision,
    "jit_compile": JitCompile,
    "custom_training_loop": CustomTrainingLoop,
    "distribute_dataset": DistributeDataset,
}


def way_of_training(tf, api, spec):
    """How this run trains: its usage scenario's way, else the plain one (the user's model is
    _smoke_user_model.py's UserModel, a Plain the worker chooses: that module imports this one)."""
    return WAYS.get(spec["scenario"], Plain)(tf, api, spec)


def _accepts(function, name):
    try:
        import inspect
        if hasattr(inspect, "signature"):
            return name in inspect.signature(function).parameters
        return name in inspect.getargspec(function).args  # pragma: no cover - Python 2 only
    except (TypeError, ValueError):
        return False


def import_function(text, path=None):
    """``module:function`` -> the function; ImportError / AttributeError from the user's module as
    they are. Looked for in ``path``'s folders, then the working directory (as ``python -m`` does),
    then the interpreter's own sys.path."""
    entries = [p for p in (path or "").split(os.pathsep) if p] + [os.getcwd()]
    for entry in reversed(entries):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    module_name, _, name = text.partition(":")
    module = importlib.import_module(module_name)
    target = module
    for part in name.split("."):
        target = getattr(target, part)
    return target

"""A user's model for the tests of `--model` / `--data`: GRU, Dropout, a custom metric and the
mixed_float16 policy, and model functions that fail in each way a user's can (raise, hang, return
something that is not a model). Imported in the doctor's child with `--model-path tests/user_models`.
"""

import threading

import numpy as np
import tensorflow as tf

keras = tf.keras


class PeakAbsoluteError(keras.metrics.Metric):
    """A custom metric: the largest absolute error seen."""

    def __init__(self, name="peak_absolute_error", **kwargs):
        super().__init__(name=name, **kwargs)
        self.peak = self.add_weight(name="peak", initializer="zeros")

    def update_state(self, y_true, y_pred, sample_weight=None):
        error = tf.reduce_max(tf.abs(tf.cast(y_true, "float32") - tf.cast(y_pred, "float32")))
        self.peak.assign(tf.maximum(self.peak, error))

    def result(self):
        return self.peak

    def reset_state(self):
        self.peak.assign(0.0)


def build():
    keras.mixed_precision.set_global_policy("mixed_float16")
    inputs = keras.Input((6, 4))
    x = keras.layers.GRU(8)(inputs)
    x = keras.layers.Dropout(0.1)(x)
    outputs = keras.layers.Dense(1, dtype="float32")(x)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss="mse",
                  metrics=[PeakAbsoluteError()])
    return model


def data():
    rng = np.random.RandomState(3)
    x = rng.randn(256, 6, 4).astype("float32")
    return x, x[:, :, 0].mean(axis=1, keepdims=True)


def raises():
    raise FileNotFoundError("the training data under /data/corpus is not mounted")


def hangs():
    threading.Event().wait()


def not_a_model():
    return {"layers": ["gru", "dense"]}


def broken_data():
    raise ValueError("no shard matches train-*.tfrecord")


def dataset():
    """The same samples as a batched tf.data pipeline, as a training script builds it."""
    x, y = data()
    return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(64, seed=3).batch(32).prefetch(2)


def slow_dataset():
    """A pipeline that cannot keep up: every sample waits 5 ms for its (simulated) read, about 200
    samples a second where the devices consume thousands."""
    import time

    def read(x, y):
        def wait(value):
            time.sleep(0.005)
            return value
        return tf.numpy_function(wait, [x], tf.float32, stateful=True), y

    x, y = data()
    shapes = ((6, 4), (1,))
    pipeline = tf.data.Dataset.from_tensor_slices((x, y)).map(read)
    return pipeline.map(lambda a, b: (tf.ensure_shape(a, shapes[0]), b)).batch(32)


def divides_by_zero():
    """A custom loss that divides by the replica's batch size: NaN on a replica the last uneven
    batch leaves empty (0 / 0), whatever the layers do."""
    def mean_squared(y_true, y_pred):
        squared = tf.reduce_sum(tf.square(tf.cast(y_true, "float32") - tf.cast(y_pred, "float32")))
        return squared / tf.cast(tf.shape(y_true)[0], "float32")

    inputs = keras.Input((6, 4))
    x = keras.layers.Flatten()(inputs)
    x = keras.layers.BatchNormalization()(x)
    outputs = keras.layers.Dense(1)(x)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss=mean_squared)
    return model


def data_hangs():
    """A data function that waits on a source that never answers (a mount, a queue)."""
    threading.Event().wait()


def leaves_a_thread():
    """A model function that starts a background worker without daemon=True."""
    stop = threading.Event()
    threading.Thread(target=stop.wait, name="prefetch-worker").start()
    return build()

"""A user's model module for `smoke --model`: what legitimately differs between 1 and N devices,
what does not, and where a NaN comes from, as it runs on Keras 3, Keras 2 (TensorFlow 2.15) and
TensorFlow 1.15's tf.keras (Python 3.7).

- ``batchnorm``: plain BatchNormalization, healthy: each replica normalises its own share of the
  batch, so N devices train a little differently from 1, by design.
- ``replica_dependent``: a layer that scales its input by the replica it runs on (a seeded bug:
  what per-replica state or a replica-keyed random draw does): N devices train another model.
- ``log_layer``: a custom layer that takes the log of its input (a linear Dense before it): NaN
  from the first step, in that layer's output.
- ``log_loss``: a custom loss that takes the log of the prediction (a Poisson-style loss on a linear
  output): NaN from the first step, in the loss, while every layer's output is finite.
"""

import numpy as np
import tensorflow as tf

keras = tf.keras
FEATURES = 6


class ReplicaScale(keras.layers.Layer):
    """Multiplies its input by 1 + 0.5 x the replica's id: the same on 1 device, not on N."""

    def call(self, inputs):
        context = tf.distribute.get_replica_context()
        replica = context.replica_id_in_sync_group if context is not None else 0
        return inputs * (1.0 + 0.5 * tf.cast(replica, inputs.dtype))


class Log(keras.layers.Layer):
    """The log of its input, unguarded."""

    def call(self, inputs):
        return tf.math.log(inputs)


def _compiled(model, loss="mse"):
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss=loss)
    return model


def batchnorm():
    inputs = keras.Input((FEATURES,))
    x = keras.layers.Dense(16)(inputs)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.Activation("relu")(x)
    x = keras.layers.BatchNormalization()(keras.layers.Dense(8)(x))
    return _compiled(keras.Model(inputs, keras.layers.Dense(1)(x)))


def replica_dependent():
    inputs = keras.Input((FEATURES,))
    x = keras.layers.Dense(16, activation="tanh")(inputs)
    x = ReplicaScale()(x)
    return _compiled(keras.Model(inputs, keras.layers.Dense(1)(x)))


def poisson_log(y_true, y_pred):
    """The Poisson loss written by hand, without the log's guard: log of a negative prediction."""
    return tf.reduce_mean(y_pred - y_true * tf.math.log(y_pred), axis=-1)


def log_loss():
    inputs = keras.Input((FEATURES,))
    x = keras.layers.Dense(8, activation="tanh")(inputs)
    return _compiled(keras.Model(inputs, keras.layers.Dense(1)(x)), loss=poisson_log)


def log_layer():
    inputs = keras.Input((FEATURES,))
    x = keras.layers.Dense(8, activation="tanh")(inputs)
    x = Log(name="unguarded_log")(keras.layers.Dense(4)(x))
    return _compiled(keras.Model(inputs, keras.layers.Dense(1)(x)))


def data():
    """264 samples with heavy tails (a few large values per feature): a share of the batch
    normalises differently from the whole of it. 264: 4 global batches of 66 (3 replicas x 22)."""
    rng = np.random.RandomState(3)
    x = rng.standard_t(2, size=(264, FEATURES)).astype("float32")
    y = np.tanh(x[:, :3]).sum(axis=1, keepdims=True).astype("float32")
    return x, y

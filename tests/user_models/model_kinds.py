"""A user's model module for `smoke --model`: each kind of Keras model people write, as it runs on
Keras 3, Keras 2 (TensorFlow 2.15) and TensorFlow 1.15's tf.keras (Python 3.7). Imported in the
doctor's child with `--model-path tests/user_models`, or from a project's src/ folder.

- ``subclassed``: a subclassed model that is not built (its variables are made by its first batch)
  and trains with its own ``train_step``; it needs ``--data`` (``data``): nothing says what it eats
  before its first batch. TensorFlow 1.15 refuses a subclassed model under a distribution strategy.
- ``subclassed_built``: the same class, built with ``model.build(input_shape)``: its input shape is
  known, so the smoke's synthetic data fits it.
- ``two_inputs``: a functional model with two inputs and two outputs (a value and a class).
"""

import os

import numpy as np
import tensorflow as tf

keras = tf.keras
FEATURES = 6
# Where the tests learn that the model's own train_step was used: it appends a line to this file
# each time Keras traces it (in every process that trains the model).
TRACED = "MODEL_KINDS_TRACED"


class Regressor(keras.Model):
    """Two Dense layers made in ``__init__``, called in ``call`` (the subclassing API), and a
    training step of its own: the loss averaged over the replica's samples and divided among the
    replicas (their gradients are summed), as the distributed-training guide does."""

    def __init__(self, units=8, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.hidden = keras.layers.Dense(units, activation="tanh")
        self.head = keras.layers.Dense(1)
        self.loss_tracker = keras.metrics.Mean(name="loss")

    def call(self, inputs, training=None):
        return self.head(self.hidden(inputs))

    def get_config(self):
        return {"units": self.units}

    @property
    def metrics(self):
        return [self.loss_tracker]

    def train_step(self, data):
        if os.environ.get(TRACED):
            with open(os.environ[TRACED], "a") as fh:
                fh.write(f"train_step {os.getpid()}\n")
        x, y = data
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        samples = tf.cast(tf.shape(y)[0], "float32")
        with tf.GradientTape() as tape:
            per_sample = tf.reduce_sum(tf.square(y - self(x, training=True)), axis=-1)
            # divide_no_nan: a replica the last uneven batch leaves empty adds 0, not NaN
            loss = tf.math.divide_no_nan(tf.reduce_sum(per_sample), samples)
            scaled = loss / replicas
        variables = self.trainable_variables
        gradients = tape.gradient(scaled, variables)
        self.optimizer.apply_gradients(zip(gradients, variables))  # noqa: B905 (Python 3.7: no strict=)
        self.loss_tracker.update_state(loss, sample_weight=samples)
        return {"loss": self.loss_tracker.result()}


def _compiled(model, loss="mse"):
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss=loss)
    return model


def subclassed():
    return _compiled(Regressor())


def subclassed_built():
    model = Regressor()
    model.build((None, FEATURES))
    return _compiled(model)


def data():
    """320 samples: more than the smoke's 257, so its last batch is uneven on this data too."""
    rng = np.random.RandomState(5)
    x = rng.randn(320, FEATURES).astype("float32")
    return x, x[:, :2].sum(axis=1, keepdims=True).astype("float32")


def two_inputs():
    numbers = keras.Input((FEATURES,))
    extra = keras.Input((3,))
    joined = keras.layers.Dense(8, activation="tanh")(keras.layers.concatenate([numbers, extra]))
    value = keras.layers.Dense(1)(joined)
    label = keras.layers.Dense(3, activation="softmax")(joined)
    return _compiled(keras.Model([numbers, extra], [value, label]), loss=["mse", "sparse_categorical_crossentropy"])

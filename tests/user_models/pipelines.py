"""A user's model and input pipelines for the tests of the input-bound probe (`--data`): a fast
`shuffle(1024)` pipeline over more samples than the smoke trains on, and one whose `map` sleeps.
Imported in the doctor's child with `--model-path tests/user_models`, and by the tests' own
measurement by hand (`python -m tests.user_models.pipelines FUNCTION SECONDS`).
"""

import os
import sys
import time

import numpy as np
import tensorflow as tf

keras = tf.keras
SAMPLES = 200_000  # more than a round of the probe reads: measured as given, never repeated
FEATURES = 16
BATCH = 32
SLEEP_S = 0.02  # per batch of the slow pipeline: at most 1,600 samples/s
HAND_S = 0.5  # as long as each round of the probe, and as many rounds
HAND_ROUNDS = 2


def build():
    inputs = keras.Input((FEATURES,))
    x = keras.layers.Dense(32, activation="relu")(inputs)
    outputs = keras.layers.Dense(1)(x)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.01), loss="mse")
    return model


def _arrays():
    rng = np.random.RandomState(5)
    x = rng.randn(SAMPLES, FEATURES).astype("float32")
    return x, x[:, :1] * 0.5


def shuffled():
    """As a training script writes it: shuffle with a 1,024-sample buffer, then batch."""
    return tf.data.Dataset.from_tensor_slices(_arrays()).shuffle(1024, seed=3).batch(BATCH)


def shuffled_and_timed():
    """shuffled(), its rate measured by hand first where HAND_RATES names a file (a line of rates
    appended): in the doctor's own child, the process and interpreter the probe measures in."""
    dataset = shuffled()
    path = os.environ.get("HAND_RATES")
    if path:
        rates = [rate_by_hand(dataset, HAND_S) for _ in range(HAND_ROUNDS)]
        with open(path, "a") as out:
            out.write(" ".join(str(r) for r in rates) + "\n")
    return dataset


def slow():
    """A pipeline that cannot keep up: every batch waits SLEEP_S in a `map` (a read, a decode)."""
    def wait(x):
        time.sleep(SLEEP_S)
        return x

    def read(x, y):
        slowed = tf.numpy_function(wait, [x], tf.float32, stateful=True)
        return tf.ensure_shape(slowed, (None, FEATURES)), y

    return tf.data.Dataset.from_tensor_slices(_arrays()).batch(BATCH).map(read)


def rate_by_hand(dataset, seconds):
    """Samples per second: every batch for ``seconds`` after the first (which starts the iterator
    and fills the shuffle buffer), the dataset repeated should it end sooner."""
    samples, start = 0, None
    for x, _ in dataset.repeat():
        if start is None:
            start = time.perf_counter()
            continue
        samples += int(x.shape[0])
        if time.perf_counter() - start >= seconds:
            return samples / (time.perf_counter() - start)
    raise AssertionError("the dataset ended")


if __name__ == "__main__":
    print(rate_by_hand(globals()[sys.argv[1]](), float(sys.argv[2])))

"""A job whose tf.data generator blocks forever after a few elements (`mgpu-doctor hang` tests)."""

import sys
import threading

import tensorflow as tf

never = threading.Event()


def generator():
    for i in range(4):
        yield [float(i)]
    print("ready", flush=True)
    never.wait()  # the data source that stops answering (a network file system, a queue)
    yield [0.0]


dataset = tf.data.Dataset.from_generator(generator, output_signature=tf.TensorSpec([1], tf.float32))
for _ in dataset.batch(2):
    pass
sys.exit(1)

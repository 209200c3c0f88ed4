"""One worker of a MultiWorkerMirroredStrategy job that trains until it is stopped
(`mgpu-doctor hang` tests). TF_CONFIG comes from the environment.

Usage: mwms_job.py [step|eager]: ``step`` all-reduces the gradient inside a tf.function
(how Keras and most custom loops train); ``eager`` reduces with strategy.reduce in Python.
"""

import sys

import tensorflow as tf

mode = sys.argv[1] if len(sys.argv) > 1 else "step"
strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    w = tf.Variable(tf.ones([8, 1]))


@tf.function
def step(x):
    def replica(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.matmul(x, w) ** 2)
        gradient = tf.distribute.get_replica_context().all_reduce("SUM", tape.gradient(loss, w))
        w.assign_sub(1e-4 * gradient)
        return loss
    return strategy.run(replica, args=(x,))


@tf.function
def local():
    return tf.ones([4])


for i in range(10**9):
    if mode == "eager":
        strategy.reduce("SUM", strategy.run(local), axis=None)
    else:
        step(tf.random.normal([4, 8]))
    if i == 20:
        print("ready", flush=True)

"""Keras 3 fit fed by a PyDataset with two worker processes whose __getitem__ never returns
(`mgpu-doctor hang` tests): the main process waits for a batch that no worker delivers."""

import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
import keras  # noqa: E402
import numpy as np  # noqa: E402


class Batches(keras.utils.PyDataset):
    def __len__(self):
        return 100

    def __getitem__(self, index):
        if index >= 2:
            print("ready", flush=True)
            time.sleep(10**6)  # a worker stuck in its data source
        return np.ones((4, 8), "float32"), np.ones((4, 1), "float32")


model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
model.compile("sgd", "mse")
model.fit(Batches(workers=2, use_multiprocessing=True, max_queue_size=2), epochs=1, verbose=0)
sys.exit(1)

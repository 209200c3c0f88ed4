"""A process that is merely slow: it computes all the time (`mgpu-doctor hang` tests)."""

import numpy as np

a = np.random.default_rng(0).random((200, 200))
print("ready", flush=True)
while True:
    a = np.tanh(a @ a.T / 200.0)

"""The smoke trainings' tiny models and data, and the comparison of the replicas' copies of their
variables, shared by smoke_worker.py (1 and N devices in one process), _smoke_checkpoint.py and
multiworker_worker.py (MultiWorkerMirroredStrategy). Python 3.6+, standard library,
NumPy and TensorFlow/Keras only (passed in: importing this module imports nothing heavy). How a
variant is spelled in the TensorFlow at hand is asked of `_tf_api.Api`.
"""


# Each smoke layer's model body: (api, variant, input tensor, width) -> features, with
# ``width`` the model size (a multiplier of the layer's units, filters or dimensions). The parent's
# table (mgpu_doctor/smoke/layers.py, SMOKE_LAYERS) lists the same layers with the same data kind;
# a test holds the two equal, since this module cannot import the package.
def _dense(api, variant, inp, width):
    return api.keras.layers.Dense(32 * width, activation="relu")(inp)


def _conv2d(api, variant, inp, width):
    layers = api.keras.layers
    return layers.Flatten()(layers.Conv2D(4 * width, 3, activation="relu")(inp))


def _lstm(api, variant, inp, width):
    return api.recurrent("lstm", variant, 8 * width)(inp)


def _gru(api, variant, inp, width):
    return api.recurrent("gru", variant, 8 * width)(inp)


def _batchnorm(api, variant, inp, width):
    layers = api.keras.layers
    x = api.batch_normalization(variant)(layers.Dense(16 * width)(inp))
    return layers.Activation("relu")(x)


def _embedding(api, variant, inp, width):
    layers = api.keras.layers
    return layers.GlobalAveragePooling1D()(layers.Embedding(50, 8 * width)(inp))


def _attention(api, variant, inp, width):
    layers = api.keras.layers
    x = layers.MultiHeadAttention(num_heads=2, key_dim=4 * width)(inp, inp)
    return layers.GlobalAveragePooling1D()(x)


# layer -> (data kind, model body)
MODELS = {
    "dense": ("vector", _dense),
    "conv2d": ("image", _conv2d),
    "lstm": ("sequence", _lstm),
    "gru": ("sequence", _gru),
    "batchnorm": ("vector", _batchnorm),
    "embedding": ("tokens", _embedding),
    "attention": ("sequence", _attention),
}


def _vector(np, rng, samples):
    x = rng.randn(samples, 16).astype("float32")
    return x, np.tanh(x[:, :4].sum(axis=1))


def _image(np, rng, samples):
    x = rng.randn(samples, 8, 8, 2).astype("float32")
    return x, x.mean(axis=(1, 2, 3))


def _sequence(np, rng, samples):
    x = rng.randn(samples, 6, 4).astype("float32")
    return x, x[:, :, 0].mean(axis=1) - x[:, -1, 1]


def _tokens(np, rng, samples):
    x = rng.randint(0, 50, size=(samples, 6)).astype("int32")
    return x, (x % 7).mean(axis=1).astype("float32") / 7.0


# data kind -> (input shape, dtype, maker)
DATA = {
    "vector": ((16,), "float32", _vector),
    "image": ((8, 8, 2), "float32", _image),
    "sequence": ((6, 4), "float32", _sequence),
    "tokens": ((6,), "int32", _tokens),
}


def build_model(api, layer, variant, width=1):
    if layer not in MODELS:
        raise ValueError("unknown layer %r" % layer)
    kind, body = MODELS[layer]
    shape, dtype, _ = DATA[kind]
    keras = api.keras
    inp = keras.Input(shape, dtype=dtype)
    out = keras.layers.Dense(1)(body(api, variant, inp, max(1, int(width))))
    return keras.Model(inp, out)


def make_data(np, layer, samples):
    shape, dtype, maker = DATA[MODELS[layer][0]]
    x, y = maker(np, np.random.RandomState(1234), samples)
    return x, y.reshape(-1, 1).astype("float32")


def distributed_variable(v):
    """The tf.distribute variable behind a Keras variable (Keras 3 wraps it in `.value`)."""
    if hasattr(v, "_values"):
        return v
    inner = getattr(v, "value", None)
    if inner is not None and not callable(inner) and hasattr(inner, "_values"):
        return inner
    return v


def replica_difference(np, api, strategy, variables):
    """The largest difference between the replicas' copies of ``variables`` (inf: NaN in some
    copies only; 0.0 on one device)."""
    worst = 0.0
    for v in variables:
        worst = max(worst, copies_difference(np, api.values(
            strategy.experimental_local_results(distributed_variable(v)))))
    return worst


def copies_difference(np, copies):
    """The largest difference between the copies of one variable (NumPy arrays): inf where NaN is
    in some copies only; copies of another shape (sharded, not replicated) are not compared."""
    worst = 0.0
    for other in copies[1:]:
        if other.shape != copies[0].shape:
            continue
        with np.errstate(invalid="ignore"):
            diff = np.abs(other - copies[0])
        if not np.all(np.isfinite(diff)):
            if not np.array_equal(np.isnan(other), np.isnan(copies[0])):
                return float("inf")
            diff = np.nan_to_num(diff, nan=0.0, posinf=0.0, neginf=0.0)
        worst = max(worst, float(diff.max()) if diff.size else 0.0)
    return worst


def finite_or_none(value):
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    if value != value or value in (float("inf"), float("-inf")):
        return None
    return value

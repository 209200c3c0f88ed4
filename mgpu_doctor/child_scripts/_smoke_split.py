"""The expected 1-vs-N difference of the user's model, measured on its 1-device run (smoke_worker.py).

Some layers train differently on N replicas by design: plain BatchNormalization normalises each
replica's share of the batch with that share's statistics, Dropout and the noise layers draw
their own random numbers on each replica. After its own training, the 1-device run trains the
same model again from the same initial weights with a fresh optimizer, each global batch split
as N replicas split it (the first ``size % N`` shares one sample larger) and the model called once
per share: what a healthy N-device training differs by. Code that reads the replica
(``replica_id_in_sync_group``) sees replica 0 here, so the difference it makes on N devices is
not in this measure. Python 3.6+, standard library, NumPy and TensorFlow only (passed in).
"""

# Layer classes whose training on N replicas legitimately differs from one device: normalisation
# over the replica's share of the batch, random numbers drawn on each replica.
BATCH_STATISTICS = ("BatchNormalization",)
RANDOM_PER_REPLICA = ("Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D",
                      "GaussianNoise", "GaussianDropout", "AlphaDropout")


def shares(size, replicas):
    """How a batch of ``size`` samples splits over ``replicas``: 64 over 3 is [22, 21, 21]."""
    base, extra = divmod(int(size), int(replicas))
    return [base + (1 if i < extra else 0) for i in range(int(replicas))]


def nested_layers(model):
    """Every layer inside ``model`` (nested models opened), each once."""
    seen, out, todo = set(), [], list(getattr(model, "layers", []) or [])
    while todo:
        layer = todo.pop(0)
        if id(layer) in seen:
            continue
        seen.add(id(layer))
        out.append(layer)
        todo.extend(getattr(layer, "layers", []) or [])
    return out


def differing_layers(model):
    """The model's layers that differ per replica, by class: ["BatchNormalization x2", "Dropout"]."""
    counts = {}
    for layer in nested_layers(model):
        name = type(layer).__name__
        synced = bool(getattr(layer, "synchronized", False)) or name.startswith("SyncBatch")
        if (name in BATCH_STATISTICS and not synced) or name in RANDOM_PER_REPLICA:
            counts[name] = counts.get(name, 0) + 1
    return ["%s x%d" % (k, v) if v > 1 else k for k, v in sorted(counts.items())]


def own_train_step(keras, model):
    """Whether the model's class overrides Model.train_step (the split training would not call it)."""
    mine = getattr(type(model), "train_step", None)
    return mine is not None and mine is not getattr(keras.Model, "train_step", None)


def fresh_optimizer(optimizer):
    return type(optimizer).from_config(optimizer.get_config())


def split_model(tf, keras, model, replicas, eager):
    """A model that calls ``model`` once per replica's share of each batch and joins the outputs."""
    def split_call(inputs, training):
        flat = tf.nest.flatten(inputs)
        size = tf.shape(flat[0])[0]
        base, extra = size // replicas, size % replicas
        sizes = tf.stack([base + tf.cast(i < extra, size.dtype) for i in range(replicas)])
        pieces = [tf.split(t, sizes, num=replicas) for t in flat]
        outputs = [model(tf.nest.pack_sequence_as(inputs, [p[i] for p in pieces]), training=training)
                   for i in range(replicas)]
        return tf.nest.map_structure(lambda *o: tf.concat(list(o), 0), *outputs)

    if eager:
        class ReplicaSplit(keras.Model):
            def call(self, inputs, training=None):
                return split_call(inputs, training)
        wrapper = ReplicaSplit()
        wrapper.inner = model
        return wrapper
    # TensorFlow 1's graph mode: a functional model (a subclassed one cannot train under a strategy)
    # that calls the model itself on each share, so that its weights are the wrapper's
    inputs = [keras.Input(batch_shape=t.shape.as_list(), dtype=t.dtype) for t in model.inputs]
    given = inputs[0] if len(inputs) == 1 else inputs

    def split(t):
        flat = tf.nest.flatten(t)
        size = tf.shape(flat[0])[0]
        base, extra = size // replicas, size % replicas
        sizes = tf.stack([base + tf.cast(i < extra, size.dtype) for i in range(replicas)])
        pieces = [tf.split(x, sizes, num=replicas) for x in flat]
        return [p[i] for i in range(replicas) for p in pieces]

    flat_shares = keras.layers.Lambda(split)(given)
    per = len(inputs)
    outputs = [model(flat_shares[i * per] if per == 1 else flat_shares[i * per:(i + 1) * per])
               for i in range(replicas)]
    joined = keras.layers.Lambda(lambda o: tf.concat(o, 0))(outputs)
    return keras.Model(given, joined)


def initial_weights(model):
    """The weights before training, or None where the model makes them on its first batch."""
    try:
        return model.get_weights() if model.weights else None
    except Exception:
        return None


def measure(api, strategy, model, dataset, epochs, replicas, start, result):
    """Train ``model`` again from ``start`` with each batch split over ``replicas``: its losses per
    epoch in ``result["split_losses"]``, or why not in ``result["split_skipped"]``."""
    from _smoke_models import finite_or_none
    tf, keras = api.tf, api.keras
    result["split_replicas"] = replicas
    result["split_layers"] = differing_layers(model)
    if start is None:
        result["split_skipped"] = "the model makes its weights on its first batch: no start to train again from"
        return
    if own_train_step(keras, model):
        result["split_skipped"] = "the model has its own train_step, which a split training would not call"
        return
    if not api.eager and not getattr(model, "inputs", None):
        result["split_skipped"] = "the model has no known inputs"
        return
    try:
        model.set_weights(start)
        if api.eager:
            with strategy.scope():
                wrapper = split_model(tf, keras, model, replicas, True)
                wrapper.compile(optimizer=fresh_optimizer(model.optimizer), loss=model.loss)
        else:  # TensorFlow 1's Keras clones a model under a strategy, not the one the wrapper calls
            wrapper = split_model(tf, keras, model, replicas, False)
            wrapper.compile(optimizer=fresh_optimizer(model.optimizer), loss=model.loss)
        if len(wrapper.trainable_weights) != len(model.trainable_weights):
            result["split_skipped"] = "the split model would not train the model's own weights"
            return
        history = wrapper.fit(dataset, epochs=epochs, verbose=0).history
        result["split_losses"] = [finite_or_none(v) for v in history.get("loss", [])]
    except Exception as exc:  # the measure is an aid: a model it cannot wrap keeps the plain tolerance
        result["split_skipped"] = "training it split failed: %s: %s" % (type(exc).__name__, str(exc)[:300])

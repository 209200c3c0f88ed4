"""Where a smoke training's first NaN or Inf came from, for smoke_worker.py.

A callback watches every step: the loss the step reports and each replica's copy of the
non-trainable variables (a moving mean or variance turns NaN on a replica without samples while
the loss stays finite). At the first non-finite value it keeps the step, and the weights from before
that step (for models up to KEEP_WEIGHTS_PARAMETERS parameters). After the training
that step is replayed from those weights: the same batch, distributed by the same strategy, each
replica calls the model in training mode with every layer's output checked in the order they run,
then the compiled loss, then the variables. The first of them that is not finite is the origin.
TensorFlow 1's graph mode replays it through Keras' session: each replica's share of the batch fed
in turn, the top-level layers' outputs in the model's order, then the loss (a model of one input
and one output; else the watch says the step, the replica and the variable, or that the loss was
the first value seen non-finite).
Python 3.6+, standard library, NumPy and TensorFlow only (passed in).
"""

import threading

from _smoke_models import distributed_variable, finite_or_none
from _smoke_split import nested_layers, shares

KEEP_WEIGHTS_PARAMETERS = 5000000  # a copy of the weights each step: cheap for smoke-sized models


def _variable_name(v):
    name = getattr(v, "path", None) or getattr(v, "name", "") or "variable"
    return str(name).split(":")[0]


def _what(np, value):
    return "NaN" if bool(np.any(np.isnan(value))) else "Inf"


def nonfinite_variables(np, api, strategy, variables):
    """[(name, [replicas], "NaN"/"Inf")] of the variables with a non-finite value in some copy."""
    found = []
    for v in variables:
        copies = api.values(strategy.experimental_local_results(distributed_variable(v)))
        bad = [i for i, c in enumerate(copies) if c.size and not bool(np.all(np.isfinite(c)))]
        if bad:
            found.append((_variable_name(v), bad, _what(np, copies[bad[0]])))
    return found


def watch(api, strategy, model):
    """The callback that finds the first non-finite step (its ``found`` dict, None while all is finite)."""
    import numpy as np

    class NonfiniteWatch(api.keras.callbacks.Callback):
        found = None
        before = None
        epoch = 0

        def keep(self):
            try:
                if model.weights and model.count_params() <= KEEP_WEIGHTS_PARAMETERS:
                    self.before = model.get_weights()
            except Exception:
                self.before = None

        def on_train_begin(self, logs=None):
            self.keep()

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch

        def on_train_batch_end(self, batch, logs=None):
            if self.found is not None:
                return
            loss = (logs or {}).get("loss")
            loss_bad = loss is not None and finite_or_none(loss) is None
            variables = nonfinite_variables(np, api, strategy, model.non_trainable_weights)
            if loss_bad or variables:
                self.found = {"epoch": self.epoch + 1, "step": batch + 1, "variables": variables,
                              "loss_value": "NaN" if loss_bad and float(loss) != float(loss) else "Inf"}
            else:
                self.keep()

    return NonfiniteWatch()


def _feature_shape(tf, dataset):
    try:
        spec = dataset.element_spec
        shape = tf.nest.flatten(spec)[0].shape
    except AttributeError:  # TensorFlow 1.15
        shape = tf.nest.flatten(tf.compat.v1.data.get_output_shapes(dataset))[0]
    dims = shape.as_list() if hasattr(shape, "as_list") else list(shape)
    return [d for d in dims[1:]]


def _loss_value(api, model, y, pred):
    loss = getattr(model, "loss", None)
    if isinstance(loss, (dict, list, tuple)) or loss is None:
        return None
    value = api.keras.losses.get(loss)(y, pred)
    return api.tf.reduce_mean(api.tf.cast(value, "float32"))


def _all_finite(np, tensors):
    return all(bool(np.all(np.isfinite(np.asarray(t)))) for t in tensors
               if np.asarray(t).dtype.kind in "fc")


def replay(np, api, strategy, model, dataset, found):
    """Each replica's first non-finite value in the step ``found`` names, from the weights before it:
    {replica: (kind, name, class, value)}; None where this cannot be replayed."""
    tf = api.tf
    events = {}
    lock = threading.Lock()

    def replica_id():
        context = tf.distribute.get_replica_context()
        return int(context.replica_id_in_sync_group) if context is not None else 0

    def note(rid, entry):
        with lock:
            if rid not in events:
                events[rid] = entry

    def checked(layer, original):
        def call(*args, **kwargs):
            out = original(*args, **kwargs)
            flat = tf.nest.flatten(out)
            if not _all_finite(np, flat):
                value = "NaN" if any(bool(np.any(np.isnan(np.asarray(t)))) for t in flat) else "Inf"
                note(replica_id(), ("layer", layer.name, type(layer).__name__, value))
            return out
        return call

    patched = [(layer, layer.call) for layer in nested_layers(model)]
    for layer, original in patched:
        layer.call = checked(layer, original)

    def step(x, y):
        pred = model(x, training=True)
        # a replica without samples: Keras adds nothing for its loss (a mean over none would be NaN)
        loss = _loss_value(api, model, y, pred) if int(tf.size(y)) else None
        if loss is not None and not _all_finite(np, [loss]):
            note(replica_id(), ("loss", _loss_name(model.loss), "", _what(np, np.asarray(loss))))
        return tf.constant(0)

    try:
        model.set_weights(found["before"])
        batch = next(iter(strategy.experimental_distribute_dataset(
            dataset.skip(found["step"] - 1).take(1))))
        run = getattr(strategy, "run", None) or strategy.experimental_run_v2
        run(step, args=tuple(batch[:2]))
    finally:
        for layer, original in patched:
            layer.call = original
    for name, replicas, value in nonfinite_variables(np, api, strategy, model.non_trainable_weights):
        for rid in replicas:
            note(rid, ("variable", name, "", value))
    return events


def replay_graph(np, api, model, dataset, found, replicas):
    """TensorFlow 1's graph mode: the step ``found`` names, from the weights before it, each replica's
    share of its batch fed in turn through Keras' session, the top-level layers' outputs checked in
    the model's order, then the compiled loss: {replica: (kind, name, class, value)}."""
    tf, keras = api.tf, api.keras
    backend = keras.backend
    session = backend.get_session()
    model.set_weights(found["before"])
    x, y = session.run(tf.compat.v1.data.make_one_shot_iterator(
        dataset.skip(found["step"] - 1).take(1)).get_next())
    if isinstance(x, (dict, list, tuple)) or isinstance(y, (dict, list, tuple)) or len(model.outputs) != 1:
        return None
    layers = [layer for layer in model.layers if type(layer).__name__ != "InputLayer"]
    output = model.outputs[0]
    target = tf.compat.v1.placeholder(output.dtype, shape=[None] * len(output.shape))
    loss = _loss_value(api, model, target, output)
    tensors = [layer.output for layer in layers] + ([loss] if loss is not None else [])
    function = backend.function(list(model.inputs) + [target, backend.learning_phase()], tensors)
    events, first = {}, 0
    for rid, size in enumerate(shares(len(x), replicas)):
        xs, ys = x[first:first + size], y[first:first + size]
        first += size
        values = function([xs, ys, 1])
        for layer, value in zip(layers, values):  # noqa: B905 (Python 3.6: no strict=)
            if not _all_finite(np, [value]):
                events[rid] = ("layer", layer.name, type(layer).__name__, _what(np, value))
                break
        else:
            if loss is not None and size and not _all_finite(np, [values[-1]]):
                events[rid] = ("loss", _loss_name(model.loss), "", _what(np, values[-1]))
    return events


def _loss_name(loss):
    if isinstance(loss, str):
        return loss
    return getattr(loss, "__name__", None) or getattr(loss, "name", None) or type(loss).__name__


def origin(api, strategy, model, dataset, spec, watcher):
    """The run's ``nonfinite_origin``: what first turned non-finite, where, on which replica's batch."""
    import numpy as np
    found = dict(watcher.found or {})
    replicas = int(spec["devices"])
    out = {"replicas": replicas, "how": "watched"}
    if not found:  # nothing seen during the steps: the weights at the end
        bad = nonfinite_variables(np, api, strategy, model.weights)
        if bad:
            name, ids, value = bad[0]
            out.update(kind="variable", name=name, replica=ids[0], value=value)
        return out
    global_batch, samples = int(spec["global_batch"]), int(spec["samples"])
    size = max(0, min(global_batch, samples - (found["step"] - 1) * global_batch))
    sizes = shares(size, replicas)
    features = _feature_shape(api.tf, dataset)
    out.update(epoch=found["epoch"], step=found["step"], batch_shapes=[[s] + features for s in sizes])
    events = None
    if watcher.before is not None:
        found["before"] = watcher.before
        try:
            if api.eager:
                events = replay(np, api, strategy, model, dataset, found)
            else:
                events = replay_graph(np, api, model, dataset, found, replicas)
            out["how"] = "replayed" if events is not None else "watched"
        except Exception as exc:
            out["replay_error"] = "%s: %s" % (type(exc).__name__, str(exc)[:300])
    if events:
        rid = min(events)
        kind, name, cls, value = events[rid]
        out.update(kind=kind, name=name, layer_class=cls, replica=rid, value=value,
                   on_replicas=sorted(events))
        if kind == "variable":
            out["also"] = [n for n, ids, _ in nonfinite_variables(np, api, strategy, model.non_trainable_weights)
                           if n != name and rid in ids]
    elif found.get("variables"):
        out["how"] = "watched"
        name, ids, value = found["variables"][0]
        out.update(kind="variable", name=name, replica=ids[0], value=value, on_replicas=ids,
                   also=[v[0] for v in found["variables"][1:]])
    else:  # the loss is the first value seen; which layer or loss made it, only a replay tells
        out.update(kind="step", value=found.get("loss_value", "NaN"))
    return out

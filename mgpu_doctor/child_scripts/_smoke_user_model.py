"""The user's own model as a smoke training (``smoke --model MODULE:FUNCTION``), for smoke_worker.py.

Built by the user's function inside the run's strategy scope, trained with the optimizer and loss
it was compiled with, on the user's data (``--data``: a tf.data.Dataset, rebatched to the run's
global batch, or (x, y) arrays) or on synthetic data shaped from the model's inputs and outputs.
Its checkpoint round trip (_smoke_checkpoint.py) builds and feeds it through the same functions.
Python 3.6+, standard library, NumPy and TensorFlow only (passed in).
"""

import sys

from _smoke_scenarios import Plain, import_function

SEED = 1234
USER_MODEL = "model"  # the run's layer word (mgpu_doctor/smoke/plan.py USER_MODEL)
PREDICT_SAMPLES = 8  # a subclassed model's outputs: what it predicts for this many inputs


class UserModel(Plain):
    """The user's model in the run's scope; data from ``--data`` or made to fit its inputs."""

    def data(self, np):
        self.np = np
        return None, None  # made in dataset(), once the model says what it eats

    def build(self):
        self.model = user_model(self.spec)
        # TensorFlow 1's graph mode: 1 and N devices would start from other weights (_tf_api.same_start)
        self.api.same_start(self.model, int(self.spec.get("seed", 7)))
        return self.model

    def dataset(self, x, y):
        given = given_data(self.tf, self.spec) if self.spec.get("user_data") else None
        self.given_pipeline = as_given(self.tf, given, int(self.spec["global_batch"]))
        return user_data(self.tf, self.np, self.model, self.spec, given)[0]

    def pipeline(self, dataset):
        """The input-bound probe measures the user's pipeline as given, not the run's cut of it."""
        return self.given_pipeline if self.given_pipeline is not None else dataset


def user_model(spec):
    """The compiled model the user's function returns (called inside the strategy's scope)."""
    function = import_function(spec["user_model"], spec.get("model_path") or "")
    model = function()
    if not all(hasattr(model, a) for a in ("fit", "compile", "layers")):
        raise TypeError("the model function %s returned a %s, not a Keras model"
                        % (spec["user_model"], type(model).__name__))
    if getattr(model, "optimizer", None) is None:
        raise ValueError("the model function %s returned a model that is not compiled: call "
                         "model.compile(optimizer=..., loss=...) before returning it" % spec["user_model"])
    return model


def given_data(tf, spec):
    """What the user's data function (``--data``) returns: a tf.data.Dataset or (x, y) arrays."""
    given = import_function(spec["user_data"], spec.get("model_path") or "")()
    if isinstance(given, tf.data.Dataset) or (isinstance(given, (tuple, list)) and len(given) >= 2):
        return given
    raise TypeError("the data function %s returned a %s, not a tf.data.Dataset or (x, y)"
                    % (spec["user_data"], type(given).__name__))


def _batched(tf, dataset):
    """Whether the dataset's elements are batches (a leading dimension of unknown size)."""
    shape = getattr(tf.nest.flatten(dataset.element_spec)[0], "shape", None)
    # TensorFlow 1.x gives a Dimension, whose value is None where 2.x gives None itself
    return bool(shape is not None and shape.rank and getattr(shape[0], "value", shape[0]) is None)


def as_given(tf, given, batch):
    """The user's pipeline whole, as their training reads it: a dataset of batches as it came (one
    of single samples batched to the run's global batch), arrays sliced and batched; None without."""
    if given is None:
        return None
    if isinstance(given, tf.data.Dataset):
        return given if _batched(tf, given) else given.batch(batch)
    return tf.data.Dataset.from_tensor_slices(tuple(given[:2])).batch(batch)


def user_data(tf, np, model, spec, given=None):
    """The run's dataset (the first ``samples`` samples, batched to its global batch) and, where the
    inputs are arrays here, the inputs themselves (None for the user's tf.data.Dataset).
    ``given``: what the data function returned, where the caller already called it."""
    batch, samples = int(spec["global_batch"]), int(spec["samples"])
    if spec.get("user_data"):
        given = given_data(tf, spec) if given is None else given
        if isinstance(given, tf.data.Dataset):
            samples_of = given.unbatch() if _batched(tf, given) else given
            return samples_of.take(samples).batch(batch), None
        return tf.data.Dataset.from_tensor_slices(tuple(given[:2])).take(samples).batch(batch), given[0]
    x, y = synthetic(np, model, samples)
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch), x


def custom_objects(spec):
    """The classes the model function's module defines, by name: what the user passes as
    ``custom_objects`` when loading a saved model of theirs (or registers)."""
    module = sys.modules.get(spec["user_model"].partition(":")[0])
    if module is None:
        return {}
    return dict((name, value) for name, value in vars(module).items()
                if isinstance(value, type) and getattr(value, "__module__", "") == module.__name__)


def _shape(tensor, samples):
    shape = getattr(tensor, "shape", None)
    dims = shape.as_list() if hasattr(shape, "as_list") else list(shape or [])
    return [samples] + [8 if d is None else int(d) for d in dims[1:]]


def _dtype(tensor):
    dtype = getattr(tensor, "dtype", "float32")
    return str(getattr(dtype, "name", dtype))


class _Spec(object):
    """An input known only by the shape the model was built with (``model.build(input_shape)``)."""

    def __init__(self, shape):
        self.shape = list(shape)
        self.dtype = "float32"


def _built_shape(model):
    """The input shape ``model.build`` was given: Keras 3 keeps it by argument name, Keras 2 and
    tf.keras 1.15 as it came; None when the model was never built."""
    shapes = getattr(model, "_build_shapes_dict", None)
    if isinstance(shapes, dict) and len(shapes) == 1:
        return list(shapes.values())[0]
    return getattr(model, "_build_input_shape", None)


def _is_shape(value):
    return isinstance(value, (list, tuple)) and all(d is None or isinstance(d, int) for d in value)


def _input_specs(model):
    """What the model eats, as tensors (``model.inputs``) or shapes; a dict where it was built with
    a dict of shapes; None when nothing says (a subclassed model never built or called)."""
    try:
        inputs = model.inputs
    except AttributeError:  # Keras 3: a subclassed model has no inputs
        inputs = None
    if inputs:
        return list(inputs)
    shape = _built_shape(model)
    if hasattr(shape, "as_list"):
        shape = shape.as_list()
    if isinstance(shape, dict):
        return dict((k, _Spec(v.as_list() if hasattr(v, "as_list") else v)) for k, v in shape.items())
    if _is_shape(shape):
        return [_Spec(shape)]
    if isinstance(shape, (list, tuple)) and shape and all(_is_shape(s) or hasattr(s, "as_list") for s in shape):
        return [_Spec(s.as_list() if hasattr(s, "as_list") else s) for s in shape]
    return None


def _array(np, rng, tensor, samples):
    shape, dtype = _shape(tensor, samples), _dtype(tensor)
    if dtype == "string":
        return rng.choice(np.array(["alpha", "beta", "gamma"]), size=shape)
    if dtype == "bool":
        return rng.randint(0, 2, size=shape).astype("bool")
    if dtype.startswith(("int", "uint")):
        return rng.randint(0, 2, size=shape).astype(dtype)
    return rng.randn(*shape).astype("float32")


def _inputs(np, rng, specs, samples):
    if isinstance(specs, dict):
        return dict((k, _array(np, rng, t, samples)) for k, t in specs.items())
    arrays = [_array(np, rng, t, samples) for t in specs]
    return arrays[0] if len(arrays) == 1 else tuple(arrays)


def _outputs(np, model, x):
    """The model's outputs: its output tensors, else (a subclassed model) what it predicts for a
    few of the inputs, which builds it as its first batch would."""
    try:
        outputs = model.outputs
    except AttributeError:
        outputs = None
    if outputs:
        return list(outputs)
    if isinstance(x, dict):
        few = dict((k, v[:PREDICT_SAMPLES]) for k, v in x.items())
    elif isinstance(x, tuple):
        few = tuple(v[:PREDICT_SAMPLES] for v in x)
    else:
        few = x[:PREDICT_SAMPLES]
    got = model.predict(few, batch_size=PREDICT_SAMPLES, verbose=0)
    if isinstance(got, dict):
        return [np.asarray(got[k]) for k in sorted(got)]
    return [np.asarray(g) for g in got] if isinstance(got, (list, tuple)) else [np.asarray(got)]


def _loss_name(loss):
    if isinstance(loss, str):
        return loss.lower()
    return (getattr(loss, "name", None) or getattr(loss, "__name__", None) or type(loss).__name__).lower()


def _target(np, rng, tensor, loss, samples):
    shape = _shape(tensor, samples)
    name = _loss_name(loss)
    classes = max(shape[-1], 2) if len(shape) > 1 else 2
    if "sparse" in name:
        return rng.randint(0, classes, size=shape[:-1] or [samples]).astype("int32")
    if "categorical" in name:
        return np.eye(classes, dtype="float32")[rng.randint(0, classes, size=shape[:-1] or [samples])]
    if "binary" in name or "hinge" in name:
        return rng.randint(0, 2, size=shape).astype("float32")
    return rng.randn(*shape).astype("float32")


def synthetic(np, model, samples):
    """Inputs and targets shaped from the model (one class or value per sample, seeded)."""
    rng = np.random.RandomState(SEED)
    specs = _input_specs(model)
    if not specs:
        raise ValueError("the model has no known inputs (a subclassed model that is not built yet): "
                         "give --data MODULE:FUNCTION, or build it in your function "
                         "(model.build(input_shape), or keras.Input)")
    x = _inputs(np, rng, specs, samples)
    outputs = _outputs(np, model, x)
    loss = getattr(model, "loss", None)
    names = list(getattr(model, "output_names", None) or [])
    if isinstance(loss, dict) and len(names) == len(outputs):
        return x, dict((n, _target(np, rng, t, loss.get(n, "mse"), samples)) for n, t in zip(names, outputs))
    losses = loss if isinstance(loss, (list, tuple)) else [loss] * len(outputs)
    ys = [_target(np, rng, t, l, samples) for t, l in zip(outputs, losses)]
    return x, ys[0] if len(ys) == 1 else tuple(ys)

"""Child script: build the user's model (``--model MODULE:FUNCTION``) inside a distribution
strategy's scope and say what the known-issue matrix conditions on.

Usage: model_probe.py SPEC_JSON   (spec: {"model": "m:f", "data": "m:f" or "", "path": "dir" or ""})

Only names leave this process: layer, optimizer and metric classes, dtype policies, compile
options, input dtypes and shapes; no weights, no data, no code, no names the user gave (layers,
outputs, functions). The user's own exception (import, build, data) is reported with its message
and stack. Python 3.6+, standard library and TensorFlow; writes JSON to $MGPU_DOCTOR_RESULT.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _mgpu_child  # noqa: E402

if __name__ == "__main__":
    _mgpu_child.start()  # first: die with the doctor, stacks on SIGUSR1 even in C code

from _tf_api import keras_flavor  # noqa: E402
from _smoke_scenarios import import_function  # noqa: E402

BUILTIN_MODULES = ("keras", "tf_keras", "tensorflow")
WRAPPED = ("layer", "forward_layer", "backward_layer", "cell")


def builtin(cls):
    return (getattr(cls, "__module__", "") or "").split(".")[0] in BUILTIN_MODULES


def first_builtin_base(cls):
    for base in getattr(cls, "__mro__", ())[1:]:
        if builtin(base):
            return base.__name__
    return ""


def is_model_class(cls):
    return any(c.__name__ in ("Model", "Functional", "Sequential") and builtin(c)
               for c in getattr(cls, "__mro__", ()))


def looks_like_model(obj):
    return is_model_class(type(obj)) and all(hasattr(obj, a) for a in ("fit", "compile", "layers"))


def sublayers(layer):
    found = []
    flatten = getattr(layer, "_flatten_layers", None)
    if flatten is not None:
        try:
            found.extend(flatten(include_self=False, recursive=False))
        except TypeError:
            pass
    if not found and not callable(getattr(layer, "layers", None)):
        found.extend(getattr(layer, "layers", None) or [])
    for attr in WRAPPED:
        inner = getattr(layer, attr, None)
        if inner is not None and hasattr(inner, "__class__") and hasattr(inner, "trainable"):
            found.append(inner)
    for cell in getattr(getattr(layer, "cell", None), "cells", None) or []:
        found.append(cell)
    return found


def walk(model):
    """Every layer, nested models and wrapped layers included, each once."""
    seen, order, stack = set(), [], [model]
    while stack:
        layer = stack.pop()
        if id(layer) in seen:
            continue
        seen.add(id(layer))
        order.append(layer)
        stack.extend(reversed(sublayers(layer)))
    return order


def calls(layer):
    nodes = getattr(layer, "_inbound_nodes", None)
    try:
        return len(nodes) if nodes is not None else 0
    except TypeError:
        return 0


def policy_name(obj):
    for attr in ("dtype_policy", "_dtype_policy"):
        policy = getattr(obj, attr, None)
        name = getattr(policy, "name", None)
        if isinstance(name, str):
            return name
    return None


def layer_facts(model):
    out, shared = [], []
    for layer in walk(model)[1:]:
        cls = type(layer)
        if cls.__name__ == "InputLayer":
            continue
        entry = {"class": cls.__name__, "builtin": builtin(cls), "model": is_model_class(cls)}
        if not entry["builtin"]:
            entry["base"] = first_builtin_base(cls)
        if getattr(layer, "synchronized", False) is True:
            entry["synchronized"] = True
        if entry not in out:
            out.append(entry)
        if calls(layer) > 1 and cls.__name__ not in shared:
            shared.append(cls.__name__ if entry["builtin"] or entry["model"] else "a custom layer")
    return out, shared


def optimizer_facts(model):
    opt = getattr(model, "optimizer", None)
    if opt is None:
        return None
    cls = type(opt)
    inner = getattr(opt, "inner_optimizer", None)
    used = type(inner) if inner is not None else cls
    module = getattr(used, "__module__", "") or ""
    return {"class": cls.__name__, "inner": used.__name__ if inner is not None else "",
            "loss_scale": "LossScale" in cls.__name__,
            "legacy": ".legacy" in module or "optimizer_v1" in module or module.startswith("tensorflow.python.training")}


def flatten(value):
    if isinstance(value, dict):
        for v in value.values():
            for item in flatten(v):
                yield item
    elif isinstance(value, (list, tuple)):
        for v in value:
            for item in flatten(v):
                yield item
    elif value is not None:
        yield value


def compiled_metrics(model):
    """What compile(metrics=...) was given, and whether as a dict keyed by output name."""
    for holder, attr in ((getattr(model, "_compile_metrics", None), "_user_metrics"),
                         (getattr(model, "compiled_metrics", None), "_user_metrics"),
                         (getattr(model, "_compile_metrics", None), "_metrics")):
        raw = getattr(holder, attr, None) if holder is not None else None
        if raw is not None:
            return raw
    return None


def metric_facts(model):
    raw = compiled_metrics(model)
    out = []
    for item in flatten(raw):
        if isinstance(item, str):
            out.append({"class": item, "custom": False})
        else:
            cls = item if isinstance(item, type) else type(item)
            function = callable(item) and not hasattr(item, "update_state") and cls.__name__ == "function"
            out.append({"class": "function" if function else cls.__name__,
                        "custom": not builtin(item if function else cls)})
    return out, isinstance(raw, dict)


def dtype_name(tensor):
    dtype = getattr(tensor, "dtype", None)
    return str(getattr(dtype, "name", dtype))


def shape_list(tensor):
    shape = getattr(tensor, "shape", None)
    try:
        return [None if d is None else int(d) for d in (shape.as_list() if hasattr(shape, "as_list") else shape)]
    except (TypeError, ValueError):
        return None


def input_facts(tf, model):
    try:
        inputs = model.inputs
    except Exception:
        return None
    if not inputs:
        return None
    out = []
    for t in inputs:
        spec = getattr(t, "type_spec", None)
        out.append({"dtype": dtype_name(t), "shape": shape_list(t),
                    "sparse": bool(getattr(t, "sparse", False)) or type(spec).__name__ == "SparseTensorSpec",
                    "ragged": bool(getattr(t, "ragged", False)) or type(spec).__name__ == "RaggedTensorSpec"})
    return out


def model_facts(tf, keras, model):
    layers, shared = layer_facts(model)
    metrics, metrics_dict = metric_facts(model)
    policies = sorted(set(p for p in [policy_name(model)] + [policy_name(l) for l in walk(model)] if p))
    jit = getattr(model, "jit_compile", getattr(model, "_jit_compile", None))
    eager = getattr(model, "run_eagerly", None)
    outputs = getattr(model, "outputs", None)
    return {
        "model_class": type(model).__name__,
        "layers": layers,
        "shared": shared,
        "policies": policies,
        "jit_compile": jit if isinstance(jit, bool) else None,
        "run_eagerly": eager if isinstance(eager, bool) else None,
        "compiled": getattr(model, "optimizer", None) is not None,
        "optimizer": optimizer_facts(model),
        "metrics": metrics,
        "metrics_dict": metrics_dict,
        "loss_dict": isinstance(getattr(model, "loss", None), dict),
        "outputs": len(outputs) if isinstance(outputs, (list, tuple)) else None,
        "inputs": input_facts(tf, model),
    }


def data_facts(tf, data):
    """What the data function returned: a tf.data.Dataset, (x, y) arrays, or something else."""
    if isinstance(data, tf.data.Dataset):
        specs = list(flatten(data.element_spec))
        labels = data.element_spec[1] if isinstance(data.element_spec, tuple) and len(data.element_spec) > 1 else None
        return {"kind": "dataset",
                "string": any(getattr(getattr(s, "dtype", None), "name", "") == "string" for s in specs),
                "sparse": any(type(s).__name__ in ("SparseTensorSpec", "RaggedTensorSpec") for s in specs),
                "dict_labels": isinstance(labels, dict)}
    if isinstance(data, (tuple, list)) and len(data) in (2, 3):
        flat = list(flatten(data[0]))
        return {"kind": "arrays",
                "string": any(getattr(getattr(a, "dtype", None), "kind", "") in ("U", "S", "O") for a in flat),
                "sparse": False, "dict_labels": isinstance(data[1], dict)}
    return {"kind": "other", "type": type(data).__name__}


def users_traceback(exc):
    """The traceback from the first frame outside the doctor's child scripts: the user's own."""
    import traceback
    here = os.path.dirname(os.path.abspath(__file__))
    tb = exc.__traceback__
    while tb is not None and os.path.dirname(os.path.abspath(tb.tb_frame.f_code.co_filename)) == here:
        tb = tb.tb_next
    lines = traceback.format_exception(type(exc), exc, tb) if tb is not None else \
        traceback.format_exception_only(type(exc), exc)
    return "".join(lines)


def failure(stage, exc):
    info = _mgpu_child.describe_exception(exc)
    error = {"type": info["type"], "message": info["message"][-2000:],
             "traceback": users_traceback(exc)[-6000:]}
    missing = getattr(exc, "name", None) if isinstance(exc, ImportError) else None
    if isinstance(missing, str):  # the module Python did not find: the user's own, or one it imports
        error["missing_module"] = missing[:200]
    return {"stage": stage, "error": error}


def main():
    with open(sys.argv[1]) as fh:
        spec = json.load(fh)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    _mgpu_child.heartbeat("importing tensorflow")
    try:
        import tensorflow as tf
    except BaseException as exc:
        _mgpu_child.write_result(failure("tensorflow", exc))
        return
    keras, flavor, version = keras_flavor(tf)
    framework = "%s %s" % (flavor, version)
    _mgpu_child.heartbeat("importing the model function")
    try:
        function = import_function(spec["model"], spec.get("path") or "")
    except BaseException as exc:
        _mgpu_child.write_result(dict(failure("import", exc), framework=framework))
        return
    strategy = tf.distribute.MirroredStrategy()
    _mgpu_child.heartbeat("building the model")
    try:
        with strategy.scope():
            model = function()
    except BaseException as exc:
        _mgpu_child.write_result(dict(failure("build", exc), framework=framework))
        return
    if not looks_like_model(model):
        cls = type(model)
        _mgpu_child.write_result({"stage": "returned", "framework": framework,
                                  "returned": {"class": cls.__name__, "builtin": builtin(cls) or
                                               cls.__module__ == "builtins"}})
        return
    result = {"stage": "done", "framework": framework, "facts": model_facts(tf, keras, model)}
    if spec.get("data"):
        _mgpu_child.heartbeat("calling the data function")
        try:
            result["data"] = data_facts(tf, import_function(spec["data"], spec.get("path") or "")())
        except BaseException as exc:
            result.update(failure("data", exc), stage="data")
    # A thread the user's code started and did not make a daemon keeps a process from exiting
    # (the doctor's child too: it would be called a hang). Named, then this child exits anyway.
    import threading
    left = [t.name for t in threading.enumerate()
            if t is not threading.main_thread() and t.is_alive() and not t.daemon]
    if left:
        result["threads"] = left
    _mgpu_child.write_result(result)
    if left:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()

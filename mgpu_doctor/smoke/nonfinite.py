"""Where a smoke run's first NaN or Inf came from, in words: the evidence of its `nan` finding.

The child finds it (child_scripts/_smoke_nonfinite.py: a step watched, then replayed layer by
layer); this module only says it. Imports the smoke data model only.
"""

from __future__ import annotations

from mgpu_doctor.model.smoke_runs import NonfiniteOrigin


def origin_short(origin: NonfiniteOrigin) -> str:
    names = {"layer": f"layer {origin.name} ({origin.layer_class})", "loss": f"the loss {origin.name}",
             "variable": _variables_short(origin)}
    where = names.get(origin.kind, origin.name)
    if origin.replica is not None and origin.replicas > 1:
        where += f" on replica {origin.replica}"
    return where


def _shape(shape: list[int | None] | None) -> str:
    if shape is None:
        return "?"
    return "(" + ", ".join("None" if d is None else str(d) for d in shape) + ")"


def origin_lines(origin: NonfiniteOrigin | None) -> list[str]:
    """Evidence: where the run's first NaN/Inf came from (child_scripts/_smoke_nonfinite.py)."""
    if origin is None:
        return []
    if not origin.kind:
        why = f" ({origin.error})" if origin.error else ""
        return [f"where the first non-finite value came from: not found{why}"]
    step = f"step {origin.step} of epoch {origin.epoch}" if origin.step else "the end of the training"
    replica = ""
    if origin.replica is not None:
        replica = f" on replica {origin.replica} of {origin.replicas}"
        shape = origin.replica_shape
        if shape is not None:
            empty = " (no samples)" if shape and shape[0] == 0 else ""
            replica += f", whose batch there was {_shape(shape)}{empty}"
    lines = []
    if origin.kind == "step":
        lines.append(f"first non-finite value: the loss of {step}; which layer or loss made it cannot "
                     "be told here (the step could not be replayed layer by layer for this model)")
    else:
        what = {"layer": f"the output of layer {origin.name} ({origin.layer_class}), from finite inputs",
                "loss": f"the loss {origin.name}, while every layer's output was finite",
                "variable": f"the variable {origin.name}"}[origin.kind] if origin.kind in (
                    "layer", "loss", "variable") else origin.name
        lines.append(f"first non-finite value ({origin.value or 'NaN'}): {what}, in {step}{replica}")
    if len(origin.on_replicas) > 1:
        others = ", ".join(str(r) for r in origin.on_replicas if r != origin.replica)
        lines.append(f"also on replicas {others}")
    if origin.also:
        lines.append(f"also non-finite in that step: {', '.join(origin.also)}")
    if origin.batch_shapes and origin.replicas > 1:
        shapes = ", ".join(_shape(s) for s in origin.batch_shapes)
        lines.append(f"the replicas' batches in that step: {shapes}")
    how = {"replayed": "found by replaying that step from the weights before it, layer by layer on "
                       "each replica",
           "watched": "found by checking the loss and each replica's variables after every step"}
    if origin.how in how:
        lines.append(how[origin.how])
    return lines


def _variables_short(origin: NonfiniteOrigin) -> str:
    """"layer batch_normalization's moving_mean, moving_variance": the variable and those of the same
    layer that turned non-finite in the same step."""
    layer, _, own = origin.name.rpartition("/")
    if not layer:
        return f"variable {origin.name}"
    names = [own] + [a.rpartition("/")[2] for a in origin.also if a.rpartition("/")[0] == layer]
    return f"layer {layer}'s {', '.join(names)}"

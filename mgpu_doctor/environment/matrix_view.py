"""The resolved environment as the matrix matches it: versions decided once, usage as declared."""

from __future__ import annotations

from mgpu_doctor.environment.keras_view import KerasFamily
from mgpu_doctor.environment.readings import Origin
from mgpu_doctor.environment.resolve import ResolvedEnvironment
from mgpu_doctor.matrix.environment import Environment


def environment_from_resolved(env: ResolvedEnvironment) -> Environment:
    """What the matrix matches, from the one resolved environment (versions decided there)."""
    versions: dict[str, str] = {}
    ranges: dict[str, str] = {}
    sources: dict[str, str] = {}
    missing: dict[str, str] = dict(env.machine.missing)
    for key, value in env.versions().items():
        if value.known and value.chosen is not None:
            versions[key] = value.text
            if not value.observed:
                colon = ":" if value.chosen.origin is Origin.IMAGE else ""
                sources[key] = f"{value.chosen.origin.value}{colon}" + \
                    (f" {value.chosen.where}" if value.chosen.where else "")
        elif value.range:
            ranges[key] = value.range
            sources[key] = value.range_origin
        else:
            missing[key] = str(value.missing) if value.missing is not None else "not known"
    if env.tf_keras_is is not None and env.tf_keras_is.family is KerasFamily.TF_KERAS and "keras" in versions:
        # the `keras` package is installed but tf.keras is tf-keras: a Keras 3 entry is not known
        # to apply (only if the model imports keras directly), so it is not reported as matching
        missing["keras"] = (f"tf.keras is {env.tf_keras_is.describe()}, not the keras package "
                            f"{versions.pop('keras')}")
        sources.pop("keras", None)
    m, u = env.machine, env.usage
    return Environment(
        versions=versions, gpus=m.gpus, workers=m.workers, compute_capabilities=m.compute_capabilities,
        gpu_names=m.gpu_names, platform=m.platform, cpu_vendor=m.cpu_vendor, cpu_arch=m.cpu_arch,
        interconnect=m.interconnect,
        peer_access=m.peer_access, backend=m.backend, layers=u.layers, usage=u.usage, strategy=u.strategy,
        scenario=u.scenario,
        usage_undecided=u.usage_undecided, missing=missing, ranges=ranges, sources={**u.sources, **sources},
        gpus_of_training=m.gpus_of_training,
    )

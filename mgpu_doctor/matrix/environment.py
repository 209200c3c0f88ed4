"""What is known about one setup, for matching known issues against it.

An :class:`Environment` holds versions and machine facts from a snapshot or a `matrix query`
(both through the one resolved environment), or from an entry's example; usage (layers,
strategy, scenario) from a query or a smoke run. Anything not known is None and never counts as
a match. `matrix query` terms and entry examples are parsed here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mgpu_doctor.matrix import vocabulary as vocab
from mgpu_doctor.matrix.known_issues import (
    ANY_STRATEGY,
    BACKENDS,
    CPU_ARCHS,
    CPU_VENDORS,
    ENV_KEYS,
    INTERCONNECTS,
    LAYERS,
    MPI_KEYS,
    PEER_ACCESS,
    PLATFORMS,
    SCENARIOS,
    STRATEGIES,
    USAGES,
    VERSION_KEYS,
)
from mgpu_doctor.model.versions import parse_version
from mgpu_doctor.process.inputs import shorten
from mgpu_doctor.record import field, record


@record
class Environment:
    """What is known about one setup; None (or a missing version) means not known.

    ``versions`` holds exact versions; ``ranges`` what is only predicted as a range (Keras 3
    with TensorFlow 2.16+ when no Keras was named), used where no exact version is known.
    ``sources`` says where a version came from when that is worth showing (a prediction).
    """

    versions: dict[str, str] = field(default_factory=dict)  # tensorflow -> "2.12.0"
    gpus: int | None = None  # GPUs per worker
    workers: int | None = None
    compute_capabilities: tuple[str, ...] | None = None  # one per GPU: "7.5"
    gpu_names: tuple[str, ...] | None = None
    platform: str | None = None
    cpu_vendor: str | None = None
    cpu_arch: str | None = None  # x86_64, aarch64
    interconnect: str | None = None
    peer_access: str | None = None  # "unsupported": some GPU pair without peer-to-peer access
    backend: str | None = None
    layers: tuple[str, ...] | None = None
    usage: tuple[str, ...] | None = None
    strategy: str | None = None
    scenario: str | None = None
    # Usage words not known although `usage` is (the model observed decides only some of them).
    usage_undecided: tuple[str, ...] = ()
    # Why a fact is missing, for the evidence of "cannot tell": key -> reason.
    missing: dict[str, str] = field(default_factory=dict)
    ranges: dict[str, str] = field(default_factory=dict)  # keras -> ">=3"
    sources: dict[str, str] = field(default_factory=dict)  # cuda -> "TensorFlow 2.12's tested build"
    # ``gpus`` is the training's GPU count, not known (a machine without GPUs describing a training
    # that runs elsewhere): an entry that needs GPUs applies "when training on" them, as with workers.
    gpus_of_training: bool = False


class BadEnvironment(ValueError):
    """A `key==value` or example environment that cannot be understood (the message says why)."""


# --- environments from text: `matrix query` arguments and entry examples --------------------

_CHOICES: dict[str, tuple[str, ...]] = {
    "strategy": tuple(s for s in STRATEGIES if s != ANY_STRATEGY), "scenario": SCENARIOS,
    "platform": PLATFORMS, "cpu_vendor": CPU_VENDORS, "cpu_arch": CPU_ARCHS,
    "interconnect": INTERCONNECTS,
    "peer_access": PEER_ACCESS, "backend": BACKENDS,
}
_LISTS: dict[str, tuple[str, tuple[str, ...] | None]] = {
    # key -> (Environment field, allowed words or None for free text)
    "layers": ("layers", LAYERS), "usage": ("usage", USAGES),
    "compute_capability": ("compute_capabilities", None), "gpu_name": ("gpu_names", None),
}


def environment_from_mapping(values: Mapping[str, Any]) -> Environment:
    """An environment from ``{"tensorflow": "1.12", "gpus": 2, "layers": ["gru"]}``.

    ``workers=K`` means multi-worker training over K workers (strategy multi_worker_mirrored
    unless another strategy is named); no ``backend`` means Keras 3's default, tensorflow.
    Raises :class:`BadEnvironment` naming the key for anything it cannot use.
    """
    versions: dict[str, str] = {}
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        if key not in ENV_KEYS:
            raise BadEnvironment(f"unknown key {key!r}; known: {', '.join(ENV_KEYS)}")
        if key in VERSION_KEYS:
            text = str(value).strip()
            if parse_version(text) is None:
                raise BadEnvironment(f"{key}: {shorten(text)} is not a version")
            versions[key] = text
        elif key in ("gpus", "workers"):
            kwargs[key] = _count(key, value)
        elif key in _LISTS:
            attr, allowed = _LISTS[key]
            items = value if isinstance(value, list) else str(value).split(",")
            words = [str(v).strip() for v in items if str(v).strip()]
            if allowed is not None:
                words = [w.lower() for w in words]
                for word in words:
                    if word not in allowed:
                        raise BadEnvironment(f"{key}: {word!r} is not one of {', '.join(allowed)}")
            if key == "compute_capability":
                for cc in words:
                    if parse_version(cc) is None:
                        raise BadEnvironment(f"compute_capability: {cc!r} is not like 7.5")
            kwargs[attr] = tuple(words)
        else:
            text = str(value).strip().lower()
            if text not in _CHOICES[key]:
                raise BadEnvironment(f"{key}: {text!r} is not one of {', '.join(_CHOICES[key])}")
            kwargs[key] = text
    if "workers" in kwargs and "strategy" not in kwargs:
        kwargs["strategy"] = "multi_worker_mirrored"
    # As on `check` (KERAS_BACKEND unset): Keras 3 runs on TensorFlow unless told otherwise.
    kwargs.setdefault("backend", vocab.DEFAULT_BACKEND)
    return Environment(versions=versions, **kwargs)


def _count(key: str, value: Any) -> int:
    text = str(value).strip()
    if (isinstance(value, bool) or not (isinstance(value, int) or text.isdecimal()) or len(text) > 9
            or int(text) < 1):
        what = "GPUs" if key == "gpus" else "workers"
        raise BadEnvironment(f"{key}: {shorten(value)} is not a number of {what}")
    return int(text)


def parse_query(terms: list[str]) -> tuple[Environment, dict[str, str]]:
    """``tensorflow==1.12 gpus=2 layers=gru,lstm`` -> the environment and the terms as given."""
    values: dict[str, Any] = {}
    given: dict[str, str] = {}
    for term in terms:
        if "=" in term and term.split("=", 1)[0].strip().lower() == "mpi":
            key, value = _mpi_term(term)
        elif "==" in term:
            key, _, value = term.partition("==")
            key = key.strip().lower()
            if key not in VERSION_KEYS:
                hint = f"; use {key}=VALUE" if key in ENV_KEYS else ""
                raise BadEnvironment(f"{term!r}: {key!r} is not a version key "
                                     f"({', '.join(VERSION_KEYS)}){hint}")
        elif "=" in term:
            key, _, value = term.partition("=")
            key = key.strip().lower()
            if key in VERSION_KEYS:
                raise BadEnvironment(f"{term!r}: write versions with '==' ({key}=={value})")
        else:
            raise BadEnvironment(f"{term!r}: expected KEY==VERSION or KEY=VALUE")
        if not value.strip():
            raise BadEnvironment(f"{term!r}: no value after '='")
        if key in values:
            raise BadEnvironment(f"{term!r}: {key} given twice")
        values[key] = value.strip()
        given[key] = value.strip()
    return environment_from_mapping(values), given


def _mpi_term(term: str) -> tuple[str, str]:
    """``mpi=openmpi-4.1.5`` (or ``mpi==mpich-4.1``) -> (``openmpi``, ``4.1.5``). A bare ``mpi=4.1.5``
    cannot be compared: Open MPI and MPICH number their releases independently."""
    value = term.split("=", 1)[1].lstrip("=").strip()
    name, sep, version = value.partition("-")
    name = name.strip().lower().replace(" ", "")
    if name in ("open-mpi", "ompi"):
        name = "openmpi"
    if not sep or name not in MPI_KEYS:
        raise BadEnvironment(f"{term!r}: say which MPI, {MPI_KEYS[0]}==VERSION or {MPI_KEYS[1]}==VERSION "
                             "(Open MPI and MPICH number their releases independently)")
    return name, version

"""`matrix query` terms -> the same resolved environment a machine's snapshot gives.

``tensorflow==2.12.0 cudnn==8.1.0 driver==418.40.04 gpus=2 strategy=mirrored``: versions as
``KEY==VERSION`` (the matrix's version keys, and ``nvidia-*`` wheels such as
``nvidia-cudnn-cu12==9.1.0.70`` for the ``tensorflow[and-cuda]`` pins), conditions as ``KEY=VALUE``.
The distribution names a bug report uses (``tensorflow-gpu``, ``tf-nightly``, ``keras-nightly``)
stand for their package; ``nvidia-tensorflow==1.15.5+nv22.12`` is TensorFlow in NVIDIA's build.
``build=source`` (or ``build=nvidia``) says TensorFlow is not the pip wheel, whose tested build
is then not assumed. ``image=tensorflow/tensorflow:2.18.0-gpu`` or
``image=nvcr.io/nvidia/tensorflow:23.03-tf2-py3`` adds what the image holds (an NGC image is
NVIDIA's build).
"""

from __future__ import annotations

from mgpu_doctor.environment.implied import ImageFacts, NotAnImage, image_facts
from mgpu_doctor.environment.machine import MachineFacts
from mgpu_doctor.environment.resolve import ResolvedEnvironment, UsageFacts, resolve_terms
from mgpu_doctor.environment.tensorflow_build import BUILD_TERMS, NVIDIA_DISTRIBUTION, BuildKind
from mgpu_doctor.matrix.environment import BadEnvironment, Environment, parse_query
from mgpu_doctor.matrix.vocabulary import USAGES
from mgpu_doctor.model.distributions import TF_DISTRIBUTIONS
from mgpu_doctor.model.versions import parse_version
from mgpu_doctor.process.inputs import shorten

NOT_NAMED = "not named in the query"
# What bug reports name, as the matrix's version keys: every TensorFlow distribution is
# `tensorflow` (its package is), the nightlies are their package, `_` spellings are `-`.
KEY_ALIASES = {**{name: "tensorflow" for name in TF_DISTRIBUTIONS}, "keras-nightly": "keras",
               "tf_keras": "tf-keras", "tf-keras-nightly": "tf-keras", "tf_keras-nightly": "tf-keras",
               "nvidia-driver": "driver", "cuda-toolkit": "cuda"}


def canonical_term(term: str) -> str:
    """``tensorflow-gpu==1.15.0`` -> ``tensorflow==1.15.0``; other terms unchanged."""
    key, sep, value = term.partition("==")
    name = key.strip().lower()
    return f"{KEY_ALIASES[name]}=={value}" if sep and name in KEY_ALIASES else term


def resolve_query(terms: list[str]) -> tuple[ResolvedEnvironment, dict[str, str]]:
    """The resolved environment and the terms as given; BadEnvironment names a bad term."""
    wheels: dict[str, str] = {}
    rest = []
    build, build_why, build_given = BuildKind.PIP, "", ""
    image: ImageFacts | None = None
    for raw in terms:
        if raw.partition("=")[0].strip().lower() == "image" and not raw.partition("=")[2].startswith("="):
            if image is not None:
                raise BadEnvironment(f"{raw!r}: image given twice")
            try:
                image = image_facts(raw.partition("=")[2])
            except NotAnImage as exc:
                raise BadEnvironment(str(exc)) from None
            continue
        if raw.partition("==")[0].strip().lower() == NVIDIA_DISTRIBUTION:
            if build_given and BUILD_TERMS[build_given] is not BuildKind.NVIDIA:
                raise BadEnvironment(f"{raw!r}: {NVIDIA_DISTRIBUTION} is NVIDIA's build, "
                                     f"not build={build_given}")
            build, build_why = BuildKind.NVIDIA, f"{NVIDIA_DISTRIBUTION} named in the query"
        term = canonical_term(raw)
        key, sep, value = term.partition("==")
        name = key.strip().lower()
        if not sep and key.partition("=")[0].strip().lower() == "build":
            word = key.partition("=")[2].strip().lower()
            if word not in BUILD_TERMS:
                raise BadEnvironment(f"{term!r}: build is one of {', '.join(BUILD_TERMS)}")
            if build_given:
                raise BadEnvironment(f"{term!r}: build given twice")
            if build is BuildKind.NVIDIA and BUILD_TERMS[word] is not BuildKind.NVIDIA:
                raise BadEnvironment(f"{term!r}: {NVIDIA_DISTRIBUTION} is NVIDIA's build, not build={word}")
            build, build_why, build_given = BUILD_TERMS[word], "named in the query", word
            continue
        if sep and name.startswith("nvidia-"):
            if parse_version(value) is None:
                raise BadEnvironment(f"{term!r}: {shorten(value.strip())} is not a version")
            if name in wheels:
                raise BadEnvironment(f"{term!r}: {name} given twice")
            wheels[name] = value.strip()
        else:
            rest.append(term)
    env, given = parse_query(rest)
    given.update(wheels)
    if build_given:
        given["build"] = build_given
    if image is not None:
        given["image"] = image.image
    return resolve_terms(env.versions, wheels, machine_of(env), usage_of(env), build, build_why, image), given


def machine_of(env: Environment) -> MachineFacts:
    facts = {"gpus": env.gpus, "workers": env.workers, "compute_capability": env.compute_capabilities,
             "gpu_name": env.gpu_names, "platform": env.platform, "cpu_vendor": env.cpu_vendor,
             "cpu_arch": env.cpu_arch, "interconnect": env.interconnect, "peer_access": env.peer_access,
             "backend": env.backend}
    return MachineFacts(
        gpus=env.gpus, workers=env.workers, compute_capabilities=env.compute_capabilities,
        gpu_names=env.gpu_names, platform=env.platform, cpu_vendor=env.cpu_vendor, cpu_arch=env.cpu_arch,
        interconnect=env.interconnect, peer_access=env.peer_access, backend=env.backend,
        missing={key: NOT_NAMED for key, value in facts.items() if value is None},
    )


def usage_of(env: Environment) -> UsageFacts:
    """The training a query names. Its usage list is partial (what the report says is used): the
    words it does not name stay undecided, "applies if you ...", never silently ruled out."""
    undecided = tuple(w for w in USAGES if w not in env.usage) if env.usage is not None else ()
    return UsageFacts(layers=env.layers, usage=env.usage, strategy=env.strategy, scenario=env.scenario,
                      usage_undecided=undecided)

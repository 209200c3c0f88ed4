"""One resolved environment: every version the checks, the matrix, the gates and `fleet` need,
decided once, with where it came from and what the other sources said.

A machine's snapshot and a `matrix query` both resolve into a :class:`ResolvedEnvironment`;
checks read versions only from it, so one report never tells two stories.

Precedence — what was observed running beats what is predicted from metadata:

- TensorFlow, ``keras``, ``tf-keras``: imported by the TensorFlow child > installed package
  metadata > named in a query.
- What ``tf.keras`` is: observed in the child > predicted from TensorFlow's version,
  ``TF_USE_LEGACY_KERAS`` and the installed packages.
- CUDA runtime, cuDNN, NCCL, cuBLAS: the copy TensorFlow mapped > the copy the dynamic loader
  returns for the soname TensorFlow opens > the ``nvidia-*`` wheel's metadata > named in a
  query > (a prediction, never an observation) what TensorFlow was built for.
- What TensorFlow was built for: its build info (cuDNN's minor from the tested-build table
  when the build info gives only the major) > the tested-build table for its major.minor (a
  nightly: by its date, see ``TensorFlowTable.build_config``). The table describes the pip
  wheels only: a source build (``build=source``) or NVIDIA's build (``nvidia-tensorflow``, a
  ``+nv`` local label, an NGC container) is never given the wheel's build.
- Driver: NVML > query. Python: the diagnosed interpreter > query.
- A pasted text (``check --from ISSUE.txt``): what its parts state comes last for each version
  (below what the snapshot made of its nvidia-smi, package list and log lines), as ``pasted``.
- ``jax``, ``jaxlib``: imported by the JAX child > installed package metadata > named in a query.

Versions are parsed here, once, with :func:`mgpu_doctor.model.versions.parse_version`.

This module assembles the environment; each part is decided in its own module: ``readings``
(one version from its sources), ``keras_view`` (what tf.keras is), ``tensorflow_build`` (whose
build, built for what), ``tensorflow_requires`` (its declared pins), ``libraries_in_use`` (the CUDA
library copies in use) and ``machine`` (the facts the matrix matches).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from mgpu_doctor.environment.implied import ImageFacts, NotAnImage, image_facts, implied_tensorflow
from mgpu_doctor.environment.keras_view import (
    LEGACY_KERAS_VALUES,
    KerasView,
    observed_tf_keras,
    predict_tf_keras,
    predicted_keras,
)
from mgpu_doctor.environment.libraries_in_use import (
    LIBRARY_WHEELS,
    LibraryInUse,
    library_version,
    resolve_libraries,
)
from mgpu_doctor.environment.machine import MachineFacts, machine_facts
from mgpu_doctor.environment.readings import Origin, Reading, ResolvedVersion, reading, resolved
from mgpu_doctor.environment.tensorflow_build import (
    NVIDIA_DISTRIBUTION,
    BuildKind,
    build_kind,
    built_for,
    compiled_archs,
    nvidia_local_label,
    tested_build,
)
from mgpu_doctor.environment.tensorflow_requires import (
    and_cuda_pin_lines,
    and_cuda_requirements,
    tensorflow_requires_lines,
)
from mgpu_doctor.model.distributions import TF_COMPANIONS as COMPANIONS
from mgpu_doctor.model.distributions import TF_CPU_ONLY_DISTRIBUTIONS, TF_DISTRIBUTIONS
from mgpu_doctor.model.snapshot import JaxFacts, PackageFacts, Snapshot, TensorFlowFacts
from mgpu_doctor.model.unavailable import Unavailable, absent, failed, skipped
from mgpu_doctor.model.versions import parse_version
from mgpu_doctor.record import field, record

if TYPE_CHECKING:
    from packaging.requirements import Requirement


@record
class UsageFacts:
    """How the model is trained: never seen on a machine; named by a query (or a smoke run), or
    declared and observed in the training profile (``sources``: key -> where it came from)."""

    layers: tuple[str, ...] | None = None
    usage: tuple[str, ...] | None = None
    strategy: str | None = None
    scenario: str | None = None
    usage_undecided: tuple[str, ...] = ()  # usage words still unknown although `usage` is known
    sources: dict[str, str] = field(default_factory=dict)


def _unresolved(name: str) -> Callable[[], ResolvedVersion]:
    """The default of a version an environment was built without (a test's, an older report's)."""
    return lambda: ResolvedVersion(name, missing=skipped("not resolved"))


@record
class ResolvedEnvironment:
    """Every version, decided once; the machine facts the matrix matches; the query's usage.

    ``snapshot`` is the machine this came from, None for a `matrix query`.
    """

    tensorflow: ResolvedVersion
    tensorflow_distribution: str  # "tensorflow", "tf-nightly", ...; "" when none is known
    keras: ResolvedVersion  # the `keras` package
    tf_keras: ResolvedVersion  # the `tf-keras` package
    tf_keras_is: KerasView | None  # what tf.keras is: observed, else predicted
    tf_keras_predicted: KerasView | None  # what the versions alone predict
    legacy_keras: bool | None  # TF_USE_LEGACY_KERAS set; None: not known (a query)
    python: ResolvedVersion
    driver: ResolvedVersion
    driver_cuda: str  # the newest CUDA the driver supports (NVML), "" when not known
    cpu_only_build: bool  # TensorFlow says it is not a CUDA build
    built_cuda: ResolvedVersion  # what TensorFlow was built for, "12.5"
    built_cudnn: ResolvedVersion  # "9.3" ("9" when only the major is known)
    cuda: ResolvedVersion  # the CUDA runtime in use
    cudnn: ResolvedVersion
    nccl: ResolvedVersion
    cublas: ResolvedVersion
    libraries: dict[str, LibraryInUse]  # by library name; empty without library facts
    wheels: dict[str, str]  # nvidia-* distributions -> version (installed, or named in a query)
    and_cuda_requires: tuple[str, ...]  # the requirement lines the [and-cuda] pins come from
    and_cuda_marked: bool  # Requires-Dist lines: only those marked `extra == "and-cuda"` are pins
    and_cuda_source: str
    companions: dict[str, ResolvedVersion]  # by COMPANIONS: installed, or named in a query
    tensorflow_requires: tuple[str, ...]  # TensorFlow's Requires-Dist lines on the companions
    tensorflow_requires_source: str
    compiled_archs: str  # cuda_compute_capabilities, as the build info prints it
    compiled_archs_source: str
    machine: MachineFacts
    usage: UsageFacts = field(default_factory=lambda: UsageFacts())
    snapshot: Snapshot | None = None
    build: BuildKind = BuildKind.PIP  # whose TensorFlow build; only the pip wheel's is in the tables
    build_why: str = ""  # how a build other than the pip wheel was recognised
    jax: ResolvedVersion = field(default_factory=_unresolved("jax"))
    jaxlib: ResolvedVersion = field(default_factory=_unresolved("jaxlib"))
    horovod: ResolvedVersion = field(default_factory=_unresolved("horovod"))
    openmpi: ResolvedVersion = field(default_factory=_unresolved("openmpi"))
    mpich: ResolvedVersion = field(default_factory=_unresolved("mpich"))
    ray: ResolvedVersion = field(default_factory=_unresolved("ray"))

    @property
    def and_cuda_pins(self) -> tuple[Requirement, ...]:
        """The [and-cuda] extra of this TensorFlow, parsed when a check reads it: the parser
        (packaging.requirements) is slow to import, and `check --quick` without a GPU never does."""
        return and_cuda_requirements(self.and_cuda_requires, self.and_cuda_marked)

    def versions(self) -> dict[str, ResolvedVersion]:
        """By the matrix's version keys."""
        return {"tensorflow": self.tensorflow, "keras": self.keras, "tf-keras": self.tf_keras,
                "python": self.python, "cuda": self.cuda, "cudnn": self.cudnn, "nccl": self.nccl,
                "cublas": self.cublas, "driver": self.driver, **self.companions, "jax": self.jax,
                "jaxlib": self.jaxlib, "horovod": self.horovod, "openmpi": self.openmpi, "mpich": self.mpich,
                "ray": self.ray}


def resolve_terms(versions: Mapping[str, str], wheels: Mapping[str, str], machine: MachineFacts,
                  usage: UsageFacts, build: BuildKind = BuildKind.PIP, build_why: str = "",
                  image: ImageFacts | None = None) -> ResolvedEnvironment:
    """The environment a `matrix query` describes: what it names, and what follows from it
    (TensorFlow's tested build, the Keras its version depends on) marked as predicted. A build
    other than the pip wheel (``build=source``, NVIDIA's) has no tested build to predict from.
    An image (``image=...``) adds what it holds after what the query names; without a TensorFlow
    version, the range a keras or tf-keras version implies stands in for it."""
    image_readings = image_versions(image)

    def named(key: str) -> ResolvedVersion:
        if key in versions or key in image_readings:
            given = [reading(versions[key], Origin.QUERY)] if key in versions else []
            return resolved(key, given + image_readings.get(key, []))
        return ResolvedVersion(key, missing=skipped(f"{key} not named in the query", "not-named"))

    if image is not None and image.nvidia_build and build is BuildKind.PIP:
        build, build_why = BuildKind.NVIDIA, f"the NGC image {image.image}"
    keras_named, tf_keras = named("keras"), named("tf-keras")
    tensorflow = with_implied_range(named("tensorflow"), keras_named, tf_keras, image)
    keras = predicted_keras(keras_named, tensorflow)
    predicted = predict_tf_keras(tensorflow, keras, tf_keras, legacy=False)
    if build is BuildKind.PIP and nvidia_local_label(tensorflow):
        build, build_why = BuildKind.NVIDIA, f"the local label of {tensorflow.text}"
    row, why = tested_build(tensorflow, build, build_why)
    built_cuda, built_cudnn = built_for(None, tensorflow, row, cpu_only=False, why=why)
    wheel_map = dict(wheels)

    def library(key: str, name: str, built: ResolvedVersion | None) -> ResolvedVersion:
        readings = [reading(versions[key], Origin.QUERY)] if key in versions else []
        readings += image_readings.get(key, [])
        stem = LIBRARY_WHEELS.get(name)
        readings += [reading(v, Origin.WHEEL, w) for w, v in sorted(wheel_map.items())
                     if stem is not None and w.startswith(stem + "-cu")]
        if built is not None and built.chosen is not None:
            readings.append(built.chosen)
        return resolved(key, readings, skipped(f"{key} not named in the query", "not-named"))

    pip = build is BuildKind.PIP
    pins, marked, pins_source = and_cuda_pin_lines(None, tensorflow) if pip else ((), False, "")
    requires, requires_source = tensorflow_requires_lines(None, tensorflow)
    archs, archs_source = compiled_archs(None, tensorflow, table=pip)
    return ResolvedEnvironment(
        tensorflow=tensorflow, tensorflow_distribution="tensorflow" if tensorflow.known else "",
        keras=keras, tf_keras=tf_keras, tf_keras_is=predicted, tf_keras_predicted=predicted,
        legacy_keras=None,
        python=named("python"), driver=named("driver"), driver_cuda="", cpu_only_build=False,
        built_cuda=built_cuda, built_cudnn=built_cudnn,
        cuda=library("cuda", "cudart", built_cuda), cudnn=library("cudnn", "cudnn", built_cudnn),
        nccl=library("nccl", "nccl", None), cublas=library("cublas", "cublas", None),
        libraries={}, wheels=wheel_map, and_cuda_requires=pins, and_cuda_marked=marked,
        and_cuda_source=pins_source,
        companions={key: named(key) for key in COMPANIONS}, tensorflow_requires=requires,
        tensorflow_requires_source=requires_source, compiled_archs=archs,
        compiled_archs_source=archs_source, machine=machine, usage=usage, snapshot=None,
        build=build, build_why=build_why,
        jax=named("jax"), jaxlib=named("jaxlib"), horovod=named("horovod"),
        openmpi=named("openmpi"), mpich=named("mpich"), ray=named("ray"),
    )


def image_versions(image: ImageFacts | None) -> dict[str, list[Reading]]:
    """What an image holds, as readings (after what the query or the machine states)."""
    if image is None:
        return {}
    return {key: [reading(text, Origin.IMAGE, image.sources.get(key, image.image))]
            for key, text in image.versions.items()}


def with_implied_range(tensorflow: ResolvedVersion, keras: ResolvedVersion, tf_keras: ResolvedVersion,
                       image: ImageFacts | None = None) -> ResolvedVersion:
    """TensorFlow not known: the range a known keras or tf-keras version implies, marked as implied."""
    if tensorflow.known or tensorflow.range:
        return tensorflow
    implied = implied_tensorflow(keras.text if keras.known else "", tf_keras.text if tf_keras.known else "")
    if implied is None:
        if image is not None and image.unknown and tensorflow.missing is not None:
            why = f"{tensorflow.missing.detail}; {image.unknown}"
            return ResolvedVersion("tensorflow", missing=skipped(why))
        return tensorflow
    return ResolvedVersion("tensorflow", missing=tensorflow.missing, range=implied.spec,
                           range_origin=implied.why)


def resolve(snapshot: Snapshot) -> ResolvedEnvironment:
    """The environment of one machine, from its snapshot."""
    packages, tf = snapshot.packages, snapshot.tensorflow
    image = pasted_image(snapshot)
    images = image_versions(image)
    tensorflow, distribution = _tensorflow(packages, tf, pasted_readings(snapshot, "tensorflow")
                                           + images.get("tensorflow", []))
    keras = _package("keras", packages, tf, "keras")
    if not keras.known and pasted_readings(snapshot, "keras"):
        keras = resolved("keras", pasted_readings(snapshot, "keras"))
    tf_keras = _package("tf-keras", packages, tf, "tf_keras")
    tensorflow = with_implied_range(tensorflow, keras, tf_keras, image)
    build, build_why = build_kind(snapshot, tensorflow)
    if image is not None and image.nvidia_build and build is BuildKind.PIP:
        build, build_why = BuildKind.NVIDIA, f"the NGC image {image.image} in the pasted text"
    legacy = snapshot.env.get("TF_USE_LEGACY_KERAS", "").strip().lower() in LEGACY_KERAS_VALUES
    predicted = predict_tf_keras(tensorflow, keras, tf_keras, legacy)
    observed = observed_tf_keras(tf, keras, tf_keras)
    cpu_only = _cpu_only_build(packages, tf)
    row, why = tested_build(tensorflow, build, build_why)
    imported = None if isinstance(tf, Unavailable) else tf
    built_cuda, built_cudnn = built_for(imported, tensorflow, row, cpu_only,
                                        (pasted_readings(snapshot, "built_cuda"),
                                         pasted_readings(snapshot, "built_cudnn")), why=why)
    libs = snapshot.libraries
    libraries = {} if isinstance(libs, Unavailable) else resolve_libraries(libs, tf, built_cuda, built_cudnn)
    wheels = _wheels(packages)
    python = (resolved("python", [reading(snapshot.python.version, Origin.INTERPRETER,
                                          snapshot.python.executable)])
              if not isinstance(snapshot.python, Unavailable)
              else ResolvedVersion("python", missing=snapshot.python))
    nvml = snapshot.nvml
    if isinstance(nvml, Unavailable):
        driver = resolved("driver", pasted_readings(snapshot, "driver"), nvml)
        driver_cuda = ""
    else:
        driver = resolved("driver", [reading(nvml.driver_version, Origin.NVML)])
        driver_cuda = nvml.cuda_driver_version if isinstance(nvml.cuda_driver_version, str) else ""
    requires = None if isinstance(packages, Unavailable) else packages.requires.get(distribution)
    declared = (requires, f"{distribution}'s Requires-Dist") if requires else None
    pins, marked, pins_source = (and_cuda_pin_lines(declared, tensorflow) if build is BuildKind.PIP
                                 else ((), False, ""))
    tf_requires, tf_requires_source = tensorflow_requires_lines(declared, tensorflow)
    # the architectures table was read from the `tensorflow` wheels: no answer for other distributions
    archs, archs_source = compiled_archs(imported.build_info if imported is not None else None, tensorflow,
                                         table=distribution == "tensorflow" and build is BuildKind.PIP)
    return ResolvedEnvironment(
        tensorflow=tensorflow, tensorflow_distribution=distribution, keras=keras, tf_keras=tf_keras,
        tf_keras_is=observed or predicted, tf_keras_predicted=predicted, legacy_keras=legacy,
        python=python, driver=driver, driver_cuda=driver_cuda, cpu_only_build=cpu_only,
        built_cuda=built_cuda, built_cudnn=built_cudnn,
        cuda=library_version("cuda", "cudart", libraries, wheels, built_cuda,
                             pasted_readings(snapshot, "cuda") + images.get("cuda", [])),
        cudnn=library_version("cudnn", "cudnn", libraries, wheels, built_cudnn,
                              pasted_readings(snapshot, "cudnn") + images.get("cudnn", [])),
        nccl=library_version("nccl", "nccl", libraries, wheels, None,
                             pasted_readings(snapshot, "nccl") + images.get("nccl", [])),
        cublas=library_version("cublas", "cublas", libraries, wheels, None),
        libraries=libraries, wheels=wheels, and_cuda_requires=pins, and_cuda_marked=marked,
        and_cuda_source=pins_source,
        companions=_companions(packages), tensorflow_requires=tf_requires,
        tensorflow_requires_source=tf_requires_source,
        compiled_archs=archs, compiled_archs_source=archs_source, machine=machine_facts(snapshot),
        snapshot=snapshot, build=build, build_why=build_why, jax=_jax_version("jax", packages, snapshot.jax),
        jaxlib=_jax_version("jaxlib", packages, snapshot.jax),
        horovod=_installed_or_pasted("horovod", packages, snapshot, images.get("horovod", [])),
        openmpi=_pasted_only("openmpi", snapshot), mpich=_pasted_only("mpich", snapshot),
        ray=_installed_or_pasted("ray", packages, snapshot),
    )


def _jax_version(name: str, packages: PackageFacts | Unavailable, jax: JaxFacts | Unavailable
                 ) -> ResolvedVersion:
    """``jax`` or ``jaxlib``: what the JAX child imported, else the installed metadata."""
    readings = []
    if not isinstance(jax, Unavailable):
        imported = jax.version if name == "jax" else jax.jaxlib_version
        if isinstance(imported, str):
            readings.append(reading(imported, Origin.JAX_IMPORTED, jax.module_path))
    if not isinstance(packages, Unavailable) and name in packages.versions:
        readings.append(reading(packages.versions[name], Origin.INSTALLED,
                                f"{name} in {packages.locations.get(name, '?')}"))
    if isinstance(packages, Unavailable):
        missing: Unavailable = Unavailable(packages.reason, f"installed packages {packages.reason}",
                                           packages.cause)
    else:
        missing = absent(f"{name} is not installed")
    return resolved(name, readings, missing)


def _installed_or_pasted(name: str, packages: PackageFacts | Unavailable,
                         snapshot: Snapshot, implied: list[Reading] | None = None) -> ResolvedVersion:
    """A package the matrix names by version (Horovod): its installed metadata, else what a paste
    states (the bug template's "Horovod version: 0.19.4"), else what a pasted image ships."""
    readings = pasted_readings(snapshot, name) + (implied or [])
    if not isinstance(packages, Unavailable) and name in packages.versions:
        readings.insert(0, reading(packages.versions[name], Origin.INSTALLED,
                                   f"{name} in {packages.locations.get(name, '?')}"))
    missing = packages if isinstance(packages, Unavailable) else absent(f"{name} is not installed")
    return resolved(name, readings, missing)


def _pasted_only(name: str, snapshot: Snapshot) -> ResolvedVersion:
    """An MPI library's version: what a paste states (the Horovod template's "MPI version: Open MPI
    4.1.1"). The doctor runs no ``mpirun --version`` on a machine, so there it is not known."""
    missing = skipped(f"{name}'s version is not read on a machine (a paste's, or {name}==VERSION in a query)")
    return resolved(name, pasted_readings(snapshot, name), missing)


def pasted_image(snapshot: Snapshot) -> ImageFacts | None:
    """The first NVIDIA NGC TensorFlow image a pasted text names (a tensorflow/tensorflow tag already
    gives the paste its TensorFlow version where the paste is read)."""
    images = snapshot.pasted.images if snapshot.pasted is not None else []
    for named in images:
        if named.kind == "ngc":
            try:
                return image_facts(named.image)
            except NotAnImage:  # another NGC image (pytorch, a base image): not TensorFlow's
                continue
    return None


def pasted_readings(snapshot: Snapshot, key: str) -> list[Reading]:
    """What a pasted text states for ``key`` (none for a machine's snapshot)."""
    stated = snapshot.pasted.versions.get(key) if snapshot.pasted is not None else None
    if stated is None:
        return []
    return [reading(stated.text, Origin.PASTED, stated.source.removeprefix("pasted: "))]


def _tensorflow(packages: PackageFacts | Unavailable, tf: TensorFlowFacts | Unavailable,
                pasted: list[Reading] | None = None) -> tuple[ResolvedVersion, str]:
    pasted = pasted or []
    readings = []
    if not isinstance(tf, Unavailable):
        readings.append(reading(tf.version, Origin.IMPORTED, tf.module_path))
    installed = [] if isinstance(packages, Unavailable) else \
        [d for d in TF_DISTRIBUTIONS if d in packages.versions]
    if not isinstance(packages, Unavailable):
        readings += [reading(packages.versions[d], Origin.INSTALLED,
                             f"{d} in {packages.locations.get(d, '?')}") for d in installed]
    readings += pasted
    result = resolved("tensorflow", readings, _why_no_package(packages, tf, "TensorFlow"))
    distribution = ""
    if installed and not isinstance(packages, Unavailable):
        # Twins: the distribution whose version is the one imported, else the first.
        same = [d for d in installed if result.version is not None
                and parse_version(packages.versions[d]) == result.version]
        distribution = (same or installed)[0]
    return result, distribution


def _cpu_only_build(packages: PackageFacts | Unavailable, tf: TensorFlowFacts | Unavailable) -> bool:
    """TensorFlow is built without CUDA: it says so when imported; before (``--quick``), every
    installed TensorFlow distribution is a CPU-only one (``tensorflow-cpu``)."""
    if not isinstance(tf, Unavailable):
        return tf.built_with_cuda is False or tf.build_info.get("is_cuda_build") == "False"
    if isinstance(packages, Unavailable):
        return False
    installed = [d for d in TF_DISTRIBUTIONS if d in packages.versions]
    return bool(installed) and all(d in TF_CPU_ONLY_DISTRIBUTIONS for d in installed)


def _why_no_package(packages: PackageFacts | Unavailable, tf: TensorFlowFacts | Unavailable,
                    what: str) -> Unavailable:
    if isinstance(packages, Unavailable):
        first = packages.detail.strip().splitlines()[0] if packages.detail.strip() else ""
        return Unavailable(packages.reason, f"installed packages {packages.reason}: {first}", packages.cause)
    if isinstance(tf, Unavailable) and tf.reason == "failed":
        return failed(f"{what}: not installed, and the TensorFlow child failed ({tf.detail.splitlines()[0]})"
                      if tf.detail.strip() else f"{what}: not installed")
    return absent(f"{what} is not installed")


def _package(name: str, packages: PackageFacts | Unavailable, tf: TensorFlowFacts | Unavailable,
             module: str) -> ResolvedVersion:
    """A Keras package's version: imported, else installed (its nightly twin, keras-nightly,
    installs the same module and counts as it)."""
    readings = []
    if not isinstance(tf, Unavailable) and tf.keras_module == module and isinstance(tf.keras_version, str):
        readings.append(reading(tf.keras_version, Origin.IMPORTED, f"tf.keras is {module}"))
    if not isinstance(packages, Unavailable):
        readings += [reading(packages.versions[d], Origin.INSTALLED,
                             f"{d} in {packages.locations.get(d, '?')}")
                     for d in (name, f"{name}-nightly") if d in packages.versions]
    if isinstance(packages, Unavailable):
        missing: Unavailable = Unavailable(packages.reason, f"installed packages {packages.reason}",
                                           packages.cause)
    else:
        missing = absent(f"{name} is not installed")
    return resolved(name, readings, missing)


def _wheels(packages: PackageFacts | Unavailable) -> dict[str, str]:
    if isinstance(packages, Unavailable):
        return {}
    return {n: v for n, v in packages.versions.items()
            if n.startswith("nvidia-") and n != NVIDIA_DISTRIBUTION}


def _companions(packages: PackageFacts | Unavailable) -> dict[str, ResolvedVersion]:
    if isinstance(packages, Unavailable):
        return {n: ResolvedVersion(n, missing=packages) for n in COMPANIONS}
    return {n: resolved(n, [reading(packages.versions[n], Origin.INSTALLED,
                                    f"{n} in {packages.locations.get(n, '?')}")]
                        if n in packages.versions else [], absent(f"{n} is not installed"))
            for n in COMPANIONS}

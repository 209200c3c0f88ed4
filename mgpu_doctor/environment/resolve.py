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
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from packaging.version import Version

from mgpu_doctor.environment.library_copies import MAIN_LIBRARIES, best_version, cuda_major_of, soname_major
from mgpu_doctor.environment.tf_config import read_tf_config
from mgpu_doctor.matrix.compat_tables import (
    TfBuild,
    bundled_and_cuda_table,
    bundled_arch_table,
    bundled_tensorflow_requires_table,
    bundled_tensorflow_table,
)
from mgpu_doctor.matrix.vocabulary import DEFAULT_BACKEND
from mgpu_doctor.model.distributions import NVIDIA_TF_DISTRIBUTION, TF_DISTRIBUTIONS
from mgpu_doctor.model.distributions import TF_COMPANIONS as COMPANIONS
from mgpu_doctor.model.snapshot import (
    JaxFacts,
    LibraryCopy,
    LibraryFacts,
    PackageFacts,
    Snapshot,
    TensorFlowFacts,
)
from mgpu_doctor.model.unavailable import Unavailable, absent, failed, skipped
from mgpu_doctor.model.versions import minor_text, parse_version, requirement_name

if TYPE_CHECKING:
    from packaging.requirements import Requirement

LEGACY_KERAS_VALUES = frozenset({"1", "true", "yes"})
# Wheels whose version is the library's own (nvidia-nccl-cu12 2.21.5 is NCCL 2.21.5).
LIBRARY_WHEELS = {"cudart": "nvidia-cuda-runtime", "cudnn": "nvidia-cudnn", "nccl": "nvidia-nccl",
                  "cublas": "nvidia-cublas"}
# Libraries whose soname major is the CUDA major (libcudart.so.12), or their own fixed major.
SONAME_FOLLOWS_CUDA = ("cudart", "cublas", "cublasLt", "nvrtc", "nvJitLink")
FIXED_SONAME_MAJOR = {"nccl": 2, "cuda": 1}
KERAS3_FIRST_TF = Version("2.16.0rc0")
KERAS_PACKAGE_FIRST_TF = Version("2.6.0rc0")  # from 2.6 tf.keras is the separate `keras` 2.x package


class BuildKind(str, enum.Enum):
    """Whose build of TensorFlow this is: only the pip wheels are in the tested build tables."""

    PIP = "the pip wheel"
    SOURCE = "a source build"
    NVIDIA = "NVIDIA's build"


# Where NVIDIA's own TensorFlow shows itself: the `nvidia-tensorflow` wheel (TensorFlow 1.15 built
# for CUDA 11 and newer, https://github.com/NVIDIA/tensorflow), its version's local label
# (1.15.5+nv22.12; NGC containers' 2.x builds too), and the NGC containers' environment.
NVIDIA_DISTRIBUTION = NVIDIA_TF_DISTRIBUTION
NVIDIA_LOCAL_PREFIX = "nv"
NGC_ENV = "NVIDIA_TENSORFLOW_VERSION"
BUILD_TERMS = {"pip": BuildKind.PIP, "source": BuildKind.SOURCE, "nvidia": BuildKind.NVIDIA,
               "ngc": BuildKind.NVIDIA}


class Origin(str, enum.Enum):
    """Where a version was read."""

    IMPORTED = "imported by the TensorFlow child"
    JAX_IMPORTED = "imported by the JAX child"
    INSTALLED = "installed package metadata"
    LOADED = "loaded by TensorFlow"
    LOADER = "the loader's pick for the soname TensorFlow opens"
    WHEEL = "nvidia-* wheel metadata"
    BUILD_INFO = "TensorFlow's build info"
    TESTED_BUILD = "TensorFlow's tested build table"
    NVML = "NVML"
    INTERPRETER = "the diagnosed interpreter"
    QUERY = "named in the query"
    PREDICTED = "predicted from TensorFlow's version"
    PASTED = "stated in the pasted text"

    @property
    def observed(self) -> bool:
        """Seen on the machine (or stated by the user), not inferred from another version."""
        return self not in (Origin.BUILD_INFO, Origin.TESTED_BUILD, Origin.PREDICTED)


@dataclass(frozen=True)
class Reading:
    """One source's value for a version."""

    text: str
    origin: Origin
    where: str = ""  # a path, a distribution, a soname, a table row
    version: Version | None = None

    def source(self) -> str:
        return f"{self.origin.value}{': ' + self.where if self.where else ''}"

    def describe(self) -> str:
        return f"{self.text} ({self.source()})"


def reading(text: str, origin: Origin, where: str = "") -> Reading:
    return Reading(text.strip(), origin, where, parse_version(text))


@dataclass(frozen=True)
class ResolvedVersion:
    """The one value of a version, where it came from, and what the other sources said."""

    key: str
    chosen: Reading | None = None
    others: tuple[Reading, ...] = ()
    missing: Unavailable | None = None  # why nothing is known; "absent": not installed
    range: str = ""  # what is only predicted as a range (">=3") when nothing exact is known
    range_origin: str = ""

    @property
    def known(self) -> bool:
        return self.chosen is not None and self.chosen.version is not None

    @property
    def version(self) -> Version | None:
        return self.chosen.version if self.chosen is not None else None

    @property
    def text(self) -> str:
        return self.chosen.text if self.chosen is not None else ""

    @property
    def origin(self) -> Origin | None:
        return self.chosen.origin if self.chosen is not None else None

    @property
    def observed(self) -> bool:
        return self.chosen is not None and self.chosen.origin.observed

    @property
    def absent(self) -> bool:
        """Known not to be installed (as opposed to not known)."""
        return self.chosen is None and self.missing is not None and self.missing.reason == "absent"

    def describe(self) -> str:
        if self.chosen is not None:
            return self.chosen.describe()
        if self.range:
            return f"{self.range} ({self.range_origin})"
        return str(self.missing) if self.missing is not None else "not known"

    def disagreeing(self) -> tuple[Reading, ...]:
        """Other sources that name a different release (12.5 and 12.5.82 agree; 12.5 and 12.4 do not)."""
        if self.chosen is None or self.chosen.version is None:
            return ()
        return tuple(r for r in self.others if r.version is not None
                     and not same_release(self.chosen.version, r.version))


def same_release(a: Version, b: Version) -> bool:
    """12.5 and 12.5.82 are the same version read from two places; 12.5 and 12.4 are not."""
    n = min(len(a.release), len(b.release))
    return a.release[:n] == b.release[:n] and a.pre == b.pre and a.dev == b.dev


def resolved(key: str, readings: list[Reading], missing: Unavailable | None = None) -> ResolvedVersion:
    """The first reading that parses is the value (callers pass them in precedence order)."""
    usable = [r for r in readings if r.version is not None]
    if not usable:
        return ResolvedVersion(key, None, tuple(readings), missing or absent("not known"))
    return ResolvedVersion(key, usable[0], tuple(r for r in readings if r is not usable[0]))


class KerasFamily(str, enum.Enum):
    KERAS3 = "Keras 3"
    TF_KERAS = "tf-keras"
    KERAS2 = "Keras 2"  # TensorFlow's own Keras 2 (bundled before 2.6, the `keras` 2.x package to 2.15)


@dataclass(frozen=True)
class KerasView:
    """What ``tf.keras`` is, its version when known, and how we know (observed or predicted)."""

    family: KerasFamily
    version: str
    origin: Origin
    why: str = ""

    @property
    def name(self) -> str:
        """"Keras 3.15.1", "tf-keras 2.21.0", "Keras 2" (no version known)."""
        if not self.version:
            return self.family.value
        return f"{'tf-keras' if self.family is KerasFamily.TF_KERAS else 'Keras'} {self.version}"

    def describe(self) -> str:
        return f"{self.name} ({self.origin.value}{': ' + self.why if self.why else ''})"


@dataclass(frozen=True)
class LibraryInUse:
    """The copy of one CUDA library TensorFlow uses: the one it mapped, or the one the loader
    returns for the soname it opens; every other copy found is listed as present, not used."""

    name: str
    soname: str  # what TensorFlow opens ("libcudnn.so.9"); "" when its major is not known
    copy: LibraryCopy | None
    origin: Origin | None
    others: tuple[LibraryCopy, ...] = ()
    why_none: str = ""

    @property
    def version(self) -> str:
        return best_version(self.copy)[0] if self.copy is not None else ""

    @property
    def soname_major(self) -> int | None:
        return int(self.soname.rsplit(".", 1)[1]) if self.soname else None

    def how(self) -> str:
        if self.copy is None or self.origin is None:
            return self.why_none
        if self.origin is Origin.LOADED:
            return "loaded by TensorFlow"
        wanted = f" for {self.soname}" if self.soname else ""
        return f"first on the search path{wanted} ({self.copy.found_by})"


@dataclass(frozen=True)
class UsageFacts:
    """How the model is trained: never seen on a machine; named by a query (or a smoke run), or
    declared and observed in the training profile (``sources``: key -> where it came from)."""

    layers: tuple[str, ...] | None = None
    usage: tuple[str, ...] | None = None
    strategy: str | None = None
    scenario: str | None = None
    usage_undecided: tuple[str, ...] = ()  # usage words still unknown although `usage` is known
    sources: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
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
    jax: ResolvedVersion = field(
        default_factory=lambda: ResolvedVersion("jax", missing=skipped("not resolved")))
    jaxlib: ResolvedVersion = field(
        default_factory=lambda: ResolvedVersion("jaxlib", missing=skipped("not resolved")))
    horovod: ResolvedVersion = field(
        default_factory=lambda: ResolvedVersion("horovod", missing=skipped("not resolved")))

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
                "jaxlib": self.jaxlib, "horovod": self.horovod}


# --- from versions named in a query ----------------------------------------------------------


def resolve_terms(versions: Mapping[str, str], wheels: Mapping[str, str], machine: MachineFacts,
                  usage: UsageFacts, build: BuildKind = BuildKind.PIP, build_why: str = ""
                  ) -> ResolvedEnvironment:
    """The environment a `matrix query` describes: what it names, and what follows from it
    (TensorFlow's tested build, the Keras its version depends on) marked as predicted. A build
    other than the pip wheel (``build=source``, NVIDIA's) has no tested build to predict from."""

    def named(key: str) -> ResolvedVersion:
        if key in versions:
            return resolved(key, [reading(versions[key], Origin.QUERY)])
        return ResolvedVersion(key, missing=skipped(f"{key} not named in the query", "not-named"))

    tensorflow = named("tensorflow")
    keras = _predicted_keras(named("keras"), tensorflow)
    tf_keras = named("tf-keras")
    predicted = predict_tf_keras(tensorflow, keras, tf_keras, legacy=False)
    if build is BuildKind.PIP and _nvidia_local_label(tensorflow):
        build, build_why = BuildKind.NVIDIA, f"the local label of {tensorflow.text}"
    row, why = _tested_build(tensorflow, build, build_why)
    built_cuda, built_cudnn = _built_for(None, tensorflow, row, cpu_only=False, why=why)
    wheel_map = dict(wheels)

    def library(key: str, name: str, built: ResolvedVersion | None) -> ResolvedVersion:
        readings = [reading(versions[key], Origin.QUERY)] if key in versions else []
        stem = LIBRARY_WHEELS.get(name)
        readings += [reading(v, Origin.WHEEL, w) for w, v in sorted(wheel_map.items())
                     if stem is not None and w.startswith(stem + "-cu")]
        if built is not None and built.chosen is not None:
            readings.append(built.chosen)
        return resolved(key, readings, skipped(f"{key} not named in the query", "not-named"))

    pip = build is BuildKind.PIP
    pins, marked, pins_source = _and_cuda_pins(None, tensorflow) if pip else ((), False, "")
    requires, requires_source = _tensorflow_requires(None, tensorflow)
    archs, archs_source = _compiled_archs(None, tensorflow, table=pip)
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
    )


def _tested_build(tensorflow: ResolvedVersion, build: BuildKind, build_why: str
                  ) -> tuple[TfBuild | None, str]:
    """The tested build row a pip wheel of this TensorFlow was built like (None and why when there
    is none, or when this is not the pip wheel)."""
    if not tensorflow.known:
        return None, ""
    if build is not BuildKind.PIP:
        how = f" ({build_why})" if build_why else ""
        return None, (f"TensorFlow {tensorflow.text} is {build.value}{how}: the pip wheels' tested builds "
                      "do not say what it was built for")
    return bundled_tensorflow_table().build_config(tensorflow.text)


def _nvidia_local_label(tensorflow: ResolvedVersion) -> bool:
    """1.15.5+nv22.12: NVIDIA's build (its release 22.12), not the pip wheel."""
    version = tensorflow.version
    return version is not None and (version.local or "").startswith(NVIDIA_LOCAL_PREFIX)


def _predicted_keras(keras: ResolvedVersion, tensorflow: ResolvedVersion) -> ResolvedVersion:
    """Keras not named: the range TensorFlow's own dependency on it allows (2.16+: keras>=3;
    2.6-2.15: keras 2 of the same minor); nothing before 2.6 (tf.keras was built in)."""
    version = tensorflow.version
    if keras.known or version is None:
        return keras
    if version >= KERAS3_FIRST_TF:
        spec = ">=3"
    elif version >= KERAS_PACKAGE_FIRST_TF:
        spec = f"=={version.major}.{version.minor}.*"
    else:
        return keras
    return ResolvedVersion("keras", missing=keras.missing, range=spec,
                           range_origin=f"predicted: TensorFlow {tensorflow.text} depends on keras{spec}")


# --- from a snapshot -------------------------------------------------------------------------


def resolve(snapshot: Snapshot) -> ResolvedEnvironment:
    """The environment of one machine, from its snapshot."""
    packages, tf = snapshot.packages, snapshot.tensorflow
    tensorflow, distribution = _tensorflow(packages, tf, pasted_readings(snapshot, "tensorflow"))
    keras = _package("keras", packages, tf, "keras")
    if not keras.known and pasted_readings(snapshot, "keras"):
        keras = resolved("keras", pasted_readings(snapshot, "keras"))
    tf_keras = _package("tf-keras", packages, tf, "tf_keras")
    build, build_why = _build_kind(snapshot, tensorflow)
    legacy = snapshot.env.get("TF_USE_LEGACY_KERAS", "").strip().lower() in LEGACY_KERAS_VALUES
    predicted = predict_tf_keras(tensorflow, keras, tf_keras, legacy)
    observed = _observed_tf_keras(tf)
    cpu_only = not isinstance(tf, Unavailable) and (
        tf.built_with_cuda is False or tf.build_info.get("is_cuda_build") == "False")
    row, why = _tested_build(tensorflow, build, build_why)
    imported = None if isinstance(tf, Unavailable) else tf
    built_cuda, built_cudnn = _built_for(imported, tensorflow, row, cpu_only,
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
    pins, marked, pins_source = (_and_cuda_pins(declared, tensorflow) if build is BuildKind.PIP
                                 else ((), False, ""))
    tf_requires, tf_requires_source = _tensorflow_requires(declared, tensorflow)
    # the architectures table was read from the `tensorflow` wheels: no answer for other distributions
    archs, archs_source = _compiled_archs(imported.build_info if imported is not None else None, tensorflow,
                                          table=distribution == "tensorflow" and build is BuildKind.PIP)
    return ResolvedEnvironment(
        tensorflow=tensorflow, tensorflow_distribution=distribution, keras=keras, tf_keras=tf_keras,
        tf_keras_is=observed or predicted, tf_keras_predicted=predicted, legacy_keras=legacy,
        python=python, driver=driver, driver_cuda=driver_cuda, cpu_only_build=cpu_only,
        built_cuda=built_cuda, built_cudnn=built_cudnn,
        cuda=_library_version("cuda", "cudart", libraries, wheels, built_cuda,
                              pasted_readings(snapshot, "cuda")),
        cudnn=_library_version("cudnn", "cudnn", libraries, wheels, built_cudnn,
                               pasted_readings(snapshot, "cudnn")),
        nccl=_library_version("nccl", "nccl", libraries, wheels, None, pasted_readings(snapshot, "nccl")),
        cublas=_library_version("cublas", "cublas", libraries, wheels, None),
        libraries=libraries, wheels=wheels, and_cuda_requires=pins, and_cuda_marked=marked,
        and_cuda_source=pins_source,
        companions=_companions(packages), tensorflow_requires=tf_requires,
        tensorflow_requires_source=tf_requires_source,
        compiled_archs=archs, compiled_archs_source=archs_source, machine=machine_facts(snapshot),
        snapshot=snapshot, build=build, build_why=build_why, jax=_jax_version("jax", packages, snapshot.jax),
        jaxlib=_jax_version("jaxlib", packages, snapshot.jax),
        horovod=_installed_or_pasted("horovod", packages, snapshot),
    )


def _build_kind(snapshot: Snapshot, tensorflow: ResolvedVersion) -> tuple[BuildKind, str]:
    """NVIDIA's build when its wheel is installed, the version carries its local label, or the NGC
    container's variable is set; else the pip wheel (a source build does not say so)."""
    packages = snapshot.packages
    if not isinstance(packages, Unavailable) and NVIDIA_DISTRIBUTION in packages.versions:
        return BuildKind.NVIDIA, f"{NVIDIA_DISTRIBUTION} {packages.versions[NVIDIA_DISTRIBUTION]} installed"
    if _nvidia_local_label(tensorflow):
        return BuildKind.NVIDIA, f"the local label of {tensorflow.text}"
    if snapshot.env.get(NGC_ENV):
        return BuildKind.NVIDIA, f"an NGC container ({NGC_ENV}={snapshot.env[NGC_ENV]})"
    return BuildKind.PIP, ""


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
                         snapshot: Snapshot) -> ResolvedVersion:
    """A package the matrix names by version (Horovod): its installed metadata, else what a paste
    states (the bug template's "Horovod version: 0.19.4")."""
    readings = pasted_readings(snapshot, name)
    if not isinstance(packages, Unavailable) and name in packages.versions:
        readings.insert(0, reading(packages.versions[name], Origin.INSTALLED,
                                   f"{name} in {packages.locations.get(name, '?')}"))
    missing = packages if isinstance(packages, Unavailable) else absent(f"{name} is not installed")
    return resolved(name, readings, missing)


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


def predict_tf_keras(tensorflow: ResolvedVersion, keras: ResolvedVersion, tf_keras: ResolvedVersion,
                     legacy: bool) -> KerasView | None:
    """What tf.keras will be, from versions alone (TensorFlow 2.16+ uses Keras 3 unless
    TF_USE_LEGACY_KERAS=1, then tf-keras; before 2.16 TensorFlow's own Keras 2)."""
    version = tensorflow.version
    if version is None:
        return None
    if version < KERAS3_FIRST_TF:
        if version >= KERAS_PACKAGE_FIRST_TF and keras.version is not None and keras.version.major >= 3:
            return KerasView(KerasFamily.KERAS3, keras.text, Origin.PREDICTED,
                             f"TensorFlow {tensorflow.text} (2.6-2.15) loads tf.keras from the installed "
                             "keras package, here Keras 3")
        shown = keras.text if version >= KERAS_PACKAGE_FIRST_TF and keras.known else ""
        return KerasView(KerasFamily.KERAS2, shown, Origin.PREDICTED,
                         f"TensorFlow {tensorflow.text} < 2.16 uses its own Keras 2")
    if legacy:
        return KerasView(KerasFamily.TF_KERAS, tf_keras.text, Origin.PREDICTED,
                         f"TensorFlow {tensorflow.text} with TF_USE_LEGACY_KERAS=1")
    return KerasView(KerasFamily.KERAS3, keras.text, Origin.PREDICTED,
                     f"TensorFlow {tensorflow.text} >= 2.16 uses Keras 3")


def _observed_tf_keras(tf: TensorFlowFacts | Unavailable) -> KerasView | None:
    if isinstance(tf, Unavailable) or not isinstance(tf.keras_module, str):
        return None
    version = tf.keras_version if isinstance(tf.keras_version, str) else ""
    if tf.keras_module == "tf_keras":
        family = KerasFamily.TF_KERAS
    elif tf.keras_module == "keras":
        parsed = parse_version(version)
        family = KerasFamily.KERAS3 if parsed is not None and parsed.major >= 3 else KerasFamily.KERAS2
    else:  # tensorflow.python.keras, tensorflow.keras: TensorFlow's bundled Keras 2
        family = KerasFamily.KERAS2
    return KerasView(family, version, Origin.IMPORTED, f"tf.keras is the module {tf.keras_module}")


def _built_for(tf: TensorFlowFacts | None, tensorflow: ResolvedVersion, row: TfBuild | None,
               cpu_only: bool, pasted: tuple[list[Reading], list[Reading]] = ([], []),
               why: str = "") -> tuple[ResolvedVersion, ResolvedVersion]:
    """What TensorFlow was built for: its build info when it was imported (``tf``), refined or
    replaced by the tested-build table's ``row``."""
    if cpu_only:
        cpu = skipped(f"TensorFlow {tensorflow.text} is a CPU-only build", "cpu-only-build")
        return ResolvedVersion("built_cuda", missing=cpu), ResolvedVersion("built_cudnn", missing=cpu)
    table_where = f"tested build table ({row.package})" if row is not None else ""
    cuda_readings: list[Reading] = []
    cudnn_readings: list[Reading] = []
    if tf is not None:
        info_cuda = tf.build_info.get("cuda_version", "")
        info_cudnn = tf.build_info.get("cudnn_version", "")
        if info_cuda:
            cuda_readings.append(reading(minor_text(info_cuda), Origin.BUILD_INFO,
                                         f"cuda_version {info_cuda}"))
        if info_cudnn and row is not None and _refines(info_cudnn, row.cudnn):
            cudnn_readings.append(reading(row.cudnn, Origin.BUILD_INFO,
                                          f"major {info_cudnn}, minor from the {table_where}"))
        elif info_cudnn:
            cudnn_readings.append(reading(info_cudnn, Origin.BUILD_INFO, f"cudnn_version {info_cudnn}"))
    # A pasted build info or log line ("source was compiled with: 8.1.0") beats the table.
    cuda_readings += pasted[0]
    cudnn_readings += pasted[1]
    if row is not None:
        cuda_readings.append(reading(row.cuda, Origin.TESTED_BUILD, row.package))
        cudnn_readings.append(reading(row.cudnn, Origin.TESTED_BUILD, row.package))
    if not tensorflow.known:
        reason: Unavailable = tensorflow.missing or absent("TensorFlow not known")
    elif tf is None:
        reason = skipped(why or f"TensorFlow {tensorflow.text} is not in the tested build table and was "
                         "not imported", "not-in-table")
    else:
        reason = absent(f"{why + '; it' if why else f'TensorFlow {tensorflow.text}'} reports no CUDA version "
                        "in its build info")
    return resolved("built_cuda", cuda_readings, reason), resolved("built_cudnn", cudnn_readings, reason)


def _refines(build_info_value: str, table_value: str) -> bool:
    """Build info says "9", the table "9.3": the table adds the minor of the same major."""
    return "." not in build_info_value and table_value.split(".")[0] == build_info_value



def wanted_soname_major(name: str, built_cuda: ResolvedVersion, built_cudnn: ResolvedVersion) -> int | None:
    """The soname major TensorFlow opens for a library: CUDA's major for the runtime and cuBLAS,
    cuDNN's major for cuDNN, 2 for NCCL; None when it does not follow from the build."""
    if name in FIXED_SONAME_MAJOR:
        return FIXED_SONAME_MAJOR[name]
    source = built_cuda if name in SONAME_FOLLOWS_CUDA else built_cudnn if name.startswith("cudnn") else None
    if source is None or source.version is None:
        return None
    return source.version.major


def resolve_libraries(facts: LibraryFacts, tf: TensorFlowFacts | Unavailable, built_cuda: ResolvedVersion,
                      built_cudnn: ResolvedVersion) -> dict[str, LibraryInUse]:
    """Each main library's copy in use: what TensorFlow mapped, else the loader's pick by soname."""
    out = {}
    loaded = set() if isinstance(tf, Unavailable) else set(tf.loaded_libraries) | set(tf.loaded_after_import)
    cuda_major = built_cuda.version.major if built_cuda.version is not None else None
    for name in MAIN_LIBRARIES:
        copies = [c for c in facts.copies if c.name == name]
        if not copies:
            continue
        major = wanted_soname_major(name, built_cuda, built_cudnn)
        soname = f"lib{name}.so.{major}" if major is not None else ""
        mapped = next((c for c in copies if c.real_path in loaded or c.path in loaded), None)
        chosen: LibraryCopy | None
        if mapped is not None:
            chosen, origin, why = mapped, Origin.LOADED, ""
        else:
            on_path = [c for c in copies if c.on_search_path]
            if major is not None:
                fitting = [c for c in on_path if soname_major(c) == major]
            elif cuda_major is not None:  # cuFFT and friends: the copy of TensorFlow's CUDA major
                fitting = [c for c in on_path if cuda_major_of(c) in (cuda_major, None)]
                fitting.sort(key=lambda c: cuda_major_of(c) != cuda_major)
            else:
                fitting = on_path
            chosen = fitting[0] if fitting else None
            origin = Origin.LOADER
            if chosen is None:
                present = ", ".join(sorted({c.soname for c in copies}))
                where = "on the library search path" if on_path else "on the search path (only elsewhere)"
                why = (f"no {soname or 'lib' + name} {where}; found: {present}" if soname
                       else f"no lib{name} on the library search path; found: {present}")
            else:
                why = ""
        out[name] = LibraryInUse(name, soname, chosen, origin if chosen is not None else None,
                                 tuple(c for c in copies if c is not chosen), why)
    return out


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


def _library_version(key: str, name: str, libraries: Mapping[str, LibraryInUse], wheels: Mapping[str, str],
                     built: ResolvedVersion | None, pasted: list[Reading] | None = None) -> ResolvedVersion:
    """A library's version: the copy in use, its wheel, what a paste states, or (as a prediction)
    the build's."""
    readings = []
    lib = libraries.get(name)
    if lib is not None and lib.copy is not None and lib.version:
        readings.append(reading(lib.version, lib.origin or Origin.LOADER, lib.copy.path))
    stem = LIBRARY_WHEELS.get(name)
    if stem is not None:
        readings += [reading(v, Origin.WHEEL, w) for w, v in sorted(wheels.items())
                     if w.startswith(stem + "-cu")]
    readings += pasted or []
    if built is not None and built.chosen is not None:
        readings.append(built.chosen)
    if lib is not None and lib.copy is None:
        missing = absent(lib.why_none)
    elif built is not None and built.missing is not None:
        missing = built.missing
    else:
        missing = absent(f"no lib{name} found")
    return resolved(key, readings, missing)


def _and_cuda_pins(declared: tuple[list[str], str] | None, tensorflow: ResolvedVersion
                   ) -> tuple[tuple[str, ...], bool, str]:
    """The lines the [and-cuda] pins come from, whether they are marked, and where from: the
    installed TensorFlow's Requires-Dist (lines, where from), else the pins table's row for its
    version."""
    if declared is not None:
        lines, source = declared
        return tuple(lines), True, source
    if tensorflow.version is None:
        return (), False, ""
    row = bundled_and_cuda_table().pins_for(tensorflow.text)
    if row is None:
        return (), False, ""
    return tuple(row.requires), False, row.source


def _tensorflow_requires(declared: tuple[list[str], str] | None, tensorflow: ResolvedVersion
                         ) -> tuple[tuple[str, ...], str]:
    """TensorFlow's Requires-Dist lines on the companion packages (lines for one Python only stay:
    the check picks those of the diagnosed Python; extras go): the installed TensorFlow's, else
    the table's row for its version; and where they come from."""
    if declared is not None:
        lines, source = declared
    elif tensorflow.version is None:
        return (), ""
    else:
        row = bundled_tensorflow_requires_table().pins_for(tensorflow.text)
        if row is None:
            return (), ""
        lines, source = list(row.requires), row.source
    return tuple(line for line in lines if requirement_name(line) in COMPANIONS
                 and "extra" not in line.partition(";")[2]), source


@functools.cache
def and_cuda_requirements(lines: tuple[str, ...], marker: bool = True) -> tuple[Requirement, ...]:
    """The requirements of the ``and-cuda`` extra; with ``marker``, only lines marked for it."""
    from packaging.requirements import InvalidRequirement, Requirement

    pins = []
    for line in lines:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if marker:
            if req.marker is None or "and-cuda" not in str(req.marker):
                continue
            try:
                if not req.marker.evaluate({"extra": "and-cuda"}):
                    continue
            except Exception:  # an environment marker this interpreter cannot evaluate: keep it
                pass
        pins.append(req)
    return tuple(pins)


def _compiled_archs(build_info: dict[str, str] | None, tensorflow: ResolvedVersion, table: bool = True
                    ) -> tuple[str, str]:
    if build_info and build_info.get("cuda_compute_capabilities"):
        return build_info["cuda_compute_capabilities"], "TensorFlow's build info"
    if tensorflow.version is None or not table:
        return "", ""
    row = bundled_arch_table().archs_for(tensorflow.text)
    return (row.archs, row.source) if row is not None else ("", "")


@dataclass(frozen=True)
class MachineFacts:
    """What the matrix matches about the machine itself (None: not known, with why in ``missing``)."""

    gpus: int | None = None
    workers: int | None = None
    compute_capabilities: tuple[str, ...] | None = None
    gpu_names: tuple[str, ...] | None = None
    platform: str | None = None
    cpu_vendor: str | None = None
    interconnect: str | None = None
    backend: str | None = None
    missing: dict[str, str] = field(default_factory=dict)


def machine_facts(snapshot: Snapshot) -> MachineFacts:
    nvml, tf = snapshot.nvml, snapshot.tensorflow
    missing: dict[str, str] = {"cpu_vendor": "not in the snapshot"}
    workers = _workers(snapshot.env.get("TF_CONFIG"))
    if workers is None:
        missing["workers"] = "TF_CONFIG is not set" if "TF_CONFIG" not in snapshot.env else \
            "TF_CONFIG has no cluster"
    gpus: int | None = None
    ccs: tuple[str, ...] | None = None
    names: tuple[str, ...] | None = None
    interconnect: str | None = None
    if isinstance(nvml, Unavailable) and nvml.reason == "absent":
        gpus = 0  # no NVIDIA driver at all: no GPU to train on (an NVML that failed says nothing)
        for key in ("compute_capability", "gpu_name", "interconnect"):
            missing[key] = "no NVIDIA driver"
    elif isinstance(nvml, Unavailable):
        for key in ("gpus", "compute_capability", "gpu_name", "interconnect"):
            missing[key] = f"NVML {nvml.reason}"
    else:
        gpus = len(nvml.gpus)
        known_ccs = [g.compute_capability for g in nvml.gpus if isinstance(g.compute_capability, str)]
        ccs = tuple(known_ccs) if known_ccs and len(known_ccs) == len(nvml.gpus) else None
        names = tuple(g.name for g in nvml.gpus)
        interconnect = _interconnect(snapshot)
        if interconnect is None:
            missing["interconnect"] = "no GPU-to-GPU link facts" if len(nvml.gpus) > 1 else "one GPU"
    if not isinstance(tf, Unavailable) and not isinstance(tf.physical_devices, Unavailable):
        # What TensorFlow sees is what training gets (CUDA_VISIBLE_DEVICES, MIG applied).
        gpus = sum(1 for d in tf.physical_devices if d.device_type == "GPU")
        if ccs is None or names is None:
            # Without NVML (a pasted log), TensorFlow's own device lines name the GPUs and their
            # compute capabilities ("Found device 0 ... computeCapability: 8.6", "major: 7 minor: 0").
            seen = [d for d in tf.physical_devices if d.device_type == "GPU"]
            from_tf = [_capability(d.details.get("compute_capability", "")) for d in seen]
            if ccs is None and seen and all(from_tf):
                ccs = tuple(from_tf)
                missing.pop("compute_capability", None)
            if names is None and seen and all(d.details.get("device_name") for d in seen):
                names = tuple(d.details["device_name"] for d in seen)
                missing.pop("gpu_name", None)
        if gpus:
            missing.pop("gpus", None)
    return MachineFacts(gpus=gpus, workers=workers, compute_capabilities=ccs, gpu_names=names,
                        platform=_platform(snapshot), interconnect=interconnect, backend=_backend(snapshot),
                        missing=missing)


def _capability(text: str) -> str:
    """"(8, 6)" (TensorFlow's device details) -> "8.6"; "" when it is not a capability."""
    parts = [p.strip() for p in text.strip("() ").split(",")]
    return ".".join(parts) if len(parts) == 2 and all(p.isdecimal() for p in parts) else ""


def _workers(tf_config: str | None) -> int | None:
    return read_tf_config(tf_config).workers if tf_config else None


def _interconnect(snapshot: Snapshot) -> str | None:
    nvml = snapshot.nvml
    if isinstance(nvml, Unavailable) or len(nvml.gpus) < 2 or not nvml.links:
        return None
    counts = [lk.nvlink_links for lk in nvml.links]
    if any(isinstance(n, int) and n > 0 for n in counts):
        return "nvlink"
    if all(isinstance(n, int) for n in counts):
        return "pcie"
    return None


def _platform(snapshot: Snapshot) -> str | None:
    host = snapshot.host
    name = host.os_name.lower()
    if name == "linux":
        return "wsl" if "microsoft" in host.kernel.lower() else "linux"
    if name == "windows":
        return "windows"
    return None


def _backend(snapshot: Snapshot) -> str:
    """Keras 3's backend: KERAS_BACKEND, else its default, TensorFlow."""
    return snapshot.env.get("KERAS_BACKEND", "").strip().lower() or DEFAULT_BACKEND

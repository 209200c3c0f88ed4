"""NumPy, protobuf, ml-dtypes and h5py against the ranges TensorFlow itself pins.

pip enforces TensorFlow's Requires-Dist only while it installs TensorFlow; a later `pip install`
of something else (JAX, a newer NumPy, another framework's protobuf) moves these packages and
`import tensorflow` breaks on the next run. The pins come from the installed TensorFlow's own
metadata, else from the table mined from PyPI (matrices/compat/tensorflow-requires.toml).
"""

from __future__ import annotations

from collections import defaultdict

from packaging.version import Version

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.environment.readings import ResolvedVersion
from mgpu_doctor.environment.resolve import ResolvedEnvironment
from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.model.versions import Pin, Tri, parse_pin, version_in

NAME = "tensorflow-requires"
TITLE = "NumPy, protobuf, ml-dtypes and h5py fit TensorFlow's pins"
CODES = (f"{NAME}.ok", f"{NAME}.out-of-range")

# What a version outside TensorFlow's range on another major line (minor line for 0.x) does, and
# a thread that shows it. Within the same line it is only untested: a warning.
BREAKS = {
    "numpy": ("TensorFlow's compiled modules are built against the NumPy of its range: `import "
              "tensorflow` fails ('A module that was compiled using NumPy 1.x cannot be run in NumPy "
              "2.x', '_ARRAY_API not found') or crashes",
              "https://github.com/tensorflow/tensorflow/issues/102743"),
    "protobuf": ("TensorFlow's generated *_pb2 modules need a protobuf of its range: `import "
                 "tensorflow` fails ('TypeError: Descriptors cannot be created directly')",
                 "https://github.com/tensorflow/tensorflow/issues/56266"),
    "ml-dtypes": ("TensorFlow registers the float8 and bfloat16 types of its ml-dtypes release: `import "
                  "tensorflow` fails (\"module 'ml_dtypes' has no attribute 'float8_e4m3b11'\")",
                  "https://github.com/onnx/tensorflow-onnx/issues/2245"),
}
UNTESTED = "TensorFlow was not built or tested with it, and pip's resolver refuses the pair"
# TensorFlow's release notes: 2.18 is the first release compiled against NumPy 2. Releases up to
# 2.14 do not cap numpy below 2 in their pins, yet their compiled modules refuse NumPy 2.
NUMPY2_FIRST_TF = Version("2.18")
NUMPY2_NOTE = "https://github.com/tensorflow/tensorflow/releases/tag/v2.18.0"
H5PY = "saving and loading HDF5 (.h5) models and weights may fail"


def check_tensorflow_requires(env: ResolvedEnvironment) -> list[Finding]:
    tf = env.tensorflow
    if not tf.known:
        raise CheckSkipped("no TensorFlow version known")
    known = {name: v for name, v in env.companions.items() if v.known}
    if not known:
        raise CheckSkipped(f"none of {', '.join(env.companions)} "
                           + ("named" if env.snapshot is None else "is installed"))
    pins = applicable_pins(env.tensorflow_requires, env.python)
    if not pins:
        raise CheckSkipped(f"no pins of TensorFlow {tf.text} on these packages are known")
    tf_name = env.tensorflow_distribution or "tensorflow"
    source = f" ({env.tensorflow_requires_source})" if env.tensorflow_requires_source else ""
    findings: list[Finding] = []
    fitting: list[tuple[str, str]] = []
    for name, version in known.items():
        reqs = pins.get(name)
        if not reqs:
            continue
        placed = [version_in(version.text, r.specifier) for r in reqs]
        if _numpy2_before_its_build(name, version, tf):
            findings.append(_numpy2(version, f"{tf_name} {tf.text}", reqs, source))
        elif Tri.YES in placed:
            fitting.append((f"{name} {version.text}",
                            f"{name} {version.text}: {' or '.join(str(r.specifier) for r in reqs)}"))
        elif all(p is Tri.NO for p in placed):
            findings.append(_outside(name, version, reqs, f"{tf_name} {tf.text}", source))
    if findings:
        return findings
    if not fitting:
        raise CheckSkipped("the versions could not be placed in TensorFlow's ranges")
    return [Finding(f"{NAME}.ok", Severity.OK,
                    f"{', '.join(short for short, _ in fitting)} (TensorFlow {tf.text})",
                    [line for _, line in fitting]
                    + [f"pins from {env.tensorflow_requires_source or 'TensorFlow metadata'}"])]


def applicable_pins(requires: tuple[str, ...], python: ResolvedVersion) -> dict[str, list[Pin]]:
    """The pins by package; a pin marked for some Pythons only counts for the diagnosed Python
    (all of them count when the Python is not known: any one admitting the version is enough)."""
    by_name: dict[str, list[Pin]] = defaultdict(list)
    for line in requires:
        pin = parse_pin(line)
        if pin is not None and pin.applies(python.version):
            by_name[pin.name].append(pin)
    return dict(by_name)


def _numpy2_before_its_build(name: str, version: ResolvedVersion, tf: ResolvedVersion) -> bool:
    return (name == "numpy" and version.version is not None and version.version.major >= 2
            and tf.version is not None and tf.version < NUMPY2_FIRST_TF)


def _numpy2(version: ResolvedVersion, tf: str, reqs: list[Pin], source: str) -> Finding:
    consequence, link = BREAKS["numpy"]
    return Finding(
        f"{NAME}.out-of-range", Severity.ERROR,
        f"numpy {version.text} with {tf}, which was compiled against NumPy 1: "
        + consequence[consequence.index("`import"):],
        [f"{tf} requires: {r.line}{source}" for r in reqs]
        + [f"numpy {version.describe()}",
           f"TensorFlow {NUMPY2_FIRST_TF} is the first release compiled against NumPy 2 (its release "
           "notes); older pins that allow numpy 2 do so by omission"],
        fix='pip install "numpy<2" (or upgrade to TensorFlow 2.18 or newer, which also runs NumPy 1.26)',
        links=[NUMPY2_NOTE, link],
    )


def same_line_allowed(version: Version, reqs: list[Pin]) -> bool:
    """Does some pin admit a release of the version's own line (its major; major.minor for 0.x)?
    Out of range within the line is untested; on another line it is a different ABI."""
    zero = version.major == 0
    candidates = [Version(f"0.{version.minor}.{p}") for p in range(0, 30)] if zero else \
        [Version(f"{version.major}.{m}.{p}") for m in range(0, 40) for p in (0, 1, 2, 3, 5, 10)]
    return any(r.specifier.contains(c, prereleases=True) for r in reqs for c in candidates)


def _outside(name: str, version: ResolvedVersion, reqs: list[Pin], tf: str, source: str) -> Finding:
    assert version.version is not None
    if name in BREAKS and not same_line_allowed(version.version, reqs):
        severity, (consequence, link) = Severity.ERROR, BREAKS[name]
    else:
        severity, consequence, link = Severity.WARNING, H5PY if name == "h5py" else UNTESTED, ""
    wanted = reqs[0].specifier
    return Finding(
        f"{NAME}.out-of-range", severity,
        f"{name} {version.text} is outside the range {tf} requires ({wanted}): {consequence}",
        [f"{tf} requires: {r.line}{source}" for r in reqs]
        + [f"{name} {version.describe()}"],
        fix=f'pip install "{name}{wanted}" (pip then keeps {tf}\'s range; if another package '
            f"needs {name} {version.text}, give it its own environment or move to a TensorFlow "
            f"release whose Requires-Dist admits {name} {version.text})",
        links=[link] if link else [],
    )

"""Installed distributions that fight each other: TensorFlow twins, Keras mismatches, a Python
TensorFlow was not built for."""

from __future__ import annotations

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.checks.facts_access import need_packages
from mgpu_doctor.environment.keras_view import KERAS3_FIRST_TF, KERAS_PACKAGE_FIRST_TF
from mgpu_doctor.environment.readings import ResolvedVersion
from mgpu_doctor.environment.resolve import ResolvedEnvironment
from mgpu_doctor.matrix.compat_tables import bundled_tensorflow_table
from mgpu_doctor.model.distributions import TF_DISTRIBUTIONS
from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.model.snapshot import Snapshot

LEGACY_WITHOUT_TF_KERAS = "keras.legacy-without-tf-keras"
TF_TESTED_BUILDS = "https://www.tensorflow.org/install/source#gpu"


DISTRIBUTIONS_CODES = ("packages.tensorflow-twins", "packages.shadowed", "packages.pynvml-twins")


def check_tensorflow_distributions(snapshot: Snapshot) -> list[Finding]:
    packages = need_packages(snapshot)
    installed = [(n, packages.versions[n]) for n in TF_DISTRIBUTIONS if n in packages.versions]
    findings = []
    if len(installed) > 1:
        versions = {v for _, v in installed}
        listed = ", ".join(f"{n}=={v}" for n, v in installed)
        names = " ".join(n for n, _ in installed)
        findings.append(Finding(
            "packages.tensorflow-twins",
            Severity.ERROR if len(versions) > 1 else Severity.WARNING,
            f"{len(installed)} TensorFlow distributions are installed together ({listed})",
            [f"{n}=={v} in {packages.locations.get(n, '?')}" for n, v in installed]
            + ["they all write the same `tensorflow/` package: its files are whichever was "
               "installed last, and uninstalling one breaks the other"],
            fix=f"pip uninstall -y {names} && pip install tensorflow=={installed[0][1]} "
            "(choose one distribution). A dependency such as tf-keras can pull `tensorflow` in "
            "on top of `tensorflow-cpu`.",
        ))
    for name, others in sorted(packages.shadowed.items()):
        findings.append(Finding(
            "packages.shadowed", Severity.WARNING,
            f"{name} is installed more than once on sys.path",
            [f"imported: {name}=={packages.versions.get(name, '?')} from "
             f"{packages.locations.get(name, '?')}"] + [f"shadowed: {o}" for o in others],
            fix=f"Remove the copies you do not use (pip uninstall {name}, repeated), and check "
            "PYTHONPATH and user site-packages (~/.local).",
        ))
    if "pynvml" in packages.versions and "nvidia-ml-py" in packages.versions:
        findings.append(Finding(
            "packages.pynvml-twins", Severity.WARNING,
            "Both `pynvml` and `nvidia-ml-py` are installed: both provide the `pynvml` module",
            [f"pynvml=={packages.versions['pynvml']}",
             f"nvidia-ml-py=={packages.versions['nvidia-ml-py']}"],
            fix="pip uninstall -y pynvml && pip install --force-reinstall nvidia-ml-py",
        ))
    if not installed and not findings:
        raise CheckSkipped("no TensorFlow distribution installed")
    return findings


KERAS_CODES = (
    "keras.in-use",
    "keras.missing",
    "keras.tf-keras-mismatch",
    "keras.keras2-with-tf216",
    "keras.keras3-with-tf-before-216",
    "keras.keras2-minor-mismatch",
    "keras.legacy-without-tf-keras",
)


def check_keras(env: ResolvedEnvironment) -> list[Finding]:
    """tf-keras against TensorFlow's minor, Keras 2 with TensorFlow 2.16+, the legacy switch."""
    tf = env.tensorflow
    if tf.version is None:
        raise CheckSkipped("no TensorFlow distribution installed" if tf.absent
                           else f"TensorFlow version not known ({tf.why_unknown()})")
    tf_version = tf.version
    legacy = env.legacy_keras is True
    keras, tf_keras = env.keras, env.tf_keras
    evidence = [f"tensorflow {tf.describe()}", f"keras {keras.describe()}", f"tf-keras {tf_keras.describe()}",
                "TF_USE_LEGACY_KERAS="
                + (_legacy_text(env) if env.legacy_keras is not None else "(not named)")]
    findings = []
    modern = tf_version >= KERAS3_FIRST_TF
    minor_pin = f"tf-keras~={tf_version.major}.{tf_version.minor}.0"
    if modern and legacy and tf_keras.absent:
        findings.append(Finding(
            LEGACY_WITHOUT_TF_KERAS, Severity.ERROR,
            "TF_USE_LEGACY_KERAS=1 is set but tf-keras is not installed: `tf.keras` will fail",
            evidence, fix=f"pip install '{minor_pin}'",
        ))
    have = tf_keras.version
    if have is not None and (have.major, have.minor) != (tf_version.major, tf_version.minor):
        findings.append(Finding(
            "keras.tf-keras-mismatch", Severity.ERROR if legacy else Severity.WARNING,
            f"tf-keras {tf_keras.text} does not match TensorFlow {tf.text} "
            "(they are released in lockstep, minor for minor)",
            evidence, fix=f"pip install '{minor_pin}'",
        ))
    if modern and keras.version is not None and keras.version.major < 3 and not legacy:
        findings.append(Finding(
            "keras.keras2-with-tf216", Severity.ERROR,
            f"Keras {keras.text} is installed with TensorFlow {tf.text}, which needs Keras 3 "
            "(or tf-keras with TF_USE_LEGACY_KERAS=1)",
            evidence,
            fix=f"For Keras 2 code: pip install '{minor_pin}' and export TF_USE_LEGACY_KERAS=1. "
            "Otherwise: pip install -U 'keras>=3'.",
        ))
    if not modern and tf_version >= KERAS_PACKAGE_FIRST_TF and keras.version is not None and not legacy:
        findings += _keras_before_216(tf, keras, evidence)
    if modern and keras.absent and not legacy:
        findings.append(Finding(
            "keras.missing", Severity.ERROR,
            f"TensorFlow {tf.text} needs the `keras` package and it is not installed",
            evidence, fix="pip install 'keras>=3'",
        ))
    if not findings and env.tf_keras_is is not None:
        findings.append(Finding(
            "keras.in-use", Severity.INFO, f"tf.keras is {env.tf_keras_is.describe()}", evidence,
        ))
    if not findings:
        raise CheckSkipped("nothing known about Keras")
    return findings


def _keras_before_216(tf: ResolvedVersion, keras: ResolvedVersion, evidence: list[str]) -> list[Finding]:
    """TensorFlow 2.6-2.15 loads tf.keras from the `keras` package and requires the Keras 2 release
    of its own minor (its Requires-Dist: keras>=2.X,<2.X+1); 2.15 also works with Keras 3
    (keras-team/keras#19069), older releases do not."""
    assert tf.version is not None and keras.version is not None
    want = f"keras~={tf.version.major}.{tf.version.minor}.0"
    same = (keras.version.major, keras.version.minor) == (tf.version.major, tf.version.minor)
    if same:
        return []
    if keras.version.major >= 3:
        works = (tf.version.major, tf.version.minor) == (2, 15)
        return [Finding(
            "keras.keras3-with-tf-before-216", Severity.WARNING if works else Severity.ERROR,
            f"Keras {keras.text} is installed with TensorFlow {tf.text}, whose tf.keras is then Keras 3"
            + (": Keras 2 code (tf.keras.optimizers.legacy, the old saving formats) breaks" if works
               else f", a Keras TensorFlow {tf.text} was not released for (it requires {want})"),
            evidence,
            fix=(f"For Keras 2 code: pip install '{want}'. To move to Keras 3, upgrade TensorFlow "
                 "to 2.16 or newer (pip install -U tensorflow)."),
            links=["https://github.com/keras-team/keras/issues/19069"],
        )]
    return [Finding(
        "keras.keras2-minor-mismatch", Severity.WARNING,
        f"Keras {keras.text} does not match TensorFlow {tf.text}: tf.keras is loaded from the keras "
        "package, released in lockstep with TensorFlow, minor for minor",
        evidence, fix=f"pip install '{want}'",
    )]


PYTHON_CODES = ("python.supported", "python.unsupported-by-tensorflow")


def check_python_for_tensorflow(env: ResolvedEnvironment) -> list[Finding]:
    """The Python version against the Pythons TensorFlow's tested build lists for that release."""
    tf, python = env.tensorflow, env.python
    if tf.version is None:
        raise CheckSkipped("no TensorFlow version known")
    if python.version is None:
        raise CheckSkipped("no Python version named" if env.snapshot is None
                           else f"Python version not known ({python.why_unknown()})")
    build = bundled_tensorflow_table().build_for(tf.text)
    if build is None:
        raise CheckSkipped(f"no tested-build row for TensorFlow {tf.text}")
    evidence = [f"tensorflow {tf.describe()}", f"python {python.describe()}",
                f"TensorFlow {build.tensorflow} was tested with Python {build.python} (tested build table)"]
    if build.python_ok(python.text):
        return [Finding("python.supported", Severity.OK,
                        f"Python {python.text}, TensorFlow {tf.text}", evidence)]
    return [Finding(
        "python.unsupported-by-tensorflow", Severity.WARNING,
        f"Python {python.text} is not among the Pythons TensorFlow {tf.text} is built and tested for "
        f"({build.python}): pip has no wheel of it for this Python",
        evidence,
        fix=f"Use a Python in {build.python} for TensorFlow {tf.text}, or a TensorFlow release built "
        f"for Python {python.version.major}.{python.version.minor} "
        "(https://www.tensorflow.org/install/source#gpu lists them).",
        links=[TF_TESTED_BUILDS],
    )]


def _legacy_text(env: ResolvedEnvironment) -> str:
    snapshot = env.snapshot
    raw = snapshot.env.get("TF_USE_LEGACY_KERAS") if snapshot is not None else None
    return raw if raw is not None else "(not set)"


"""Installed distributions that fight each other: TensorFlow twins, Keras mismatches."""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.checks.facts_access import need_packages
from mgpu_doctor.findings import Finding, Severity
from mgpu_doctor.snapshot import PackageFacts, Snapshot

# Distributions that all install the same top-level `tensorflow` package.
TF_VARIANTS = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel", "tf-nightly",
               "tf-nightly-cpu", "tf-nightly-gpu")
LEGACY_KERAS_VALUES = {"1", "true", "yes"}


def parse_version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def tensorflow_version(packages: PackageFacts) -> tuple[str, Version] | None:
    """The installed TensorFlow (distribution name, version), preferring the plain name."""
    for name in TF_VARIANTS:
        if name in packages.versions:
            version = parse_version(packages.versions[name])
            if version is not None:
                return name, version
    return None


def check_tensorflow_distributions(snapshot: Snapshot) -> list[Finding]:
    packages = need_packages(snapshot)
    installed = [(n, packages.versions[n]) for n in TF_VARIANTS if n in packages.versions]
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


def keras_in_use(packages: PackageFacts, env: dict[str, str]) -> str:
    """Which Keras `tf.keras` will be, from versions alone (the TensorFlow probe confirms it).

    TensorFlow 2.16+ uses Keras 3 unless TF_USE_LEGACY_KERAS=1, then tf-keras.
    Before 2.16, tf.keras was TensorFlow's bundled Keras 2.
    """
    found = tensorflow_version(packages)
    if found is None:
        return "unknown (no TensorFlow)"
    _, tf_version = found
    if tf_version < Version("2.16.0rc0"):
        return "keras 2 (bundled with TensorFlow)"
    if env.get("TF_USE_LEGACY_KERAS", "").strip().lower() in LEGACY_KERAS_VALUES:
        return f"tf-keras {packages.versions.get('tf-keras', '(not installed)')}"
    return f"keras {packages.versions.get('keras', '(not installed)')}"


def check_keras(snapshot: Snapshot) -> list[Finding]:
    packages = need_packages(snapshot)
    found = tensorflow_version(packages)
    if found is None:
        raise CheckSkipped("no TensorFlow distribution installed")
    tf_name, tf_version = found
    legacy = snapshot.env.get("TF_USE_LEGACY_KERAS", "").strip().lower() in LEGACY_KERAS_VALUES
    keras = parse_version(packages.versions.get("keras", ""))
    tf_keras = parse_version(packages.versions.get("tf-keras", ""))
    evidence = [f"{tf_name}=={tf_version}",
                f"keras=={packages.versions.get('keras', 'not installed')}",
                f"tf-keras=={packages.versions.get('tf-keras', 'not installed')}",
                f"TF_USE_LEGACY_KERAS={snapshot.env.get('TF_USE_LEGACY_KERAS', '(not set)')}"]
    findings = []
    modern = tf_version >= Version("2.16.0rc0")
    if modern and legacy and tf_keras is None:
        findings.append(Finding(
            "keras.legacy-without-tf-keras", Severity.ERROR,
            "TF_USE_LEGACY_KERAS=1 is set but tf-keras is not installed: `tf.keras` will fail",
            evidence, fix=f"pip install 'tf-keras~={tf_version.major}.{tf_version.minor}.0'",
        ))
    if tf_keras is not None and (tf_keras.major, tf_keras.minor) != (tf_version.major, tf_version.minor):
        findings.append(Finding(
            "keras.tf-keras-mismatch", Severity.ERROR if legacy else Severity.WARNING,
            f"tf-keras {tf_keras} does not match TensorFlow {tf_version} "
            "(they are released in lockstep, minor for minor)",
            evidence,
            fix=f"pip install 'tf-keras~={tf_version.major}.{tf_version.minor}.0'",
        ))
    if modern and keras is not None and keras.major < 3 and not legacy:
        findings.append(Finding(
            "keras.keras2-with-tf216", Severity.ERROR,
            f"Keras {keras} is installed with TensorFlow {tf_version}, which needs Keras 3 "
            "(or tf-keras with TF_USE_LEGACY_KERAS=1)",
            evidence,
            fix="For Keras 2 code: pip install 'tf-keras~="
            f"{tf_version.major}.{tf_version.minor}.0' and export TF_USE_LEGACY_KERAS=1. "
            "Otherwise: pip install -U 'keras>=3'.",
        ))
    if modern and keras is None and not legacy:
        findings.append(Finding(
            "keras.missing", Severity.ERROR,
            f"TensorFlow {tf_version} needs the `keras` package and it is not installed",
            evidence, fix="pip install 'keras>=3'",
        ))
    if not findings:
        findings.append(Finding(
            "keras.in-use", Severity.INFO,
            f"tf.keras will be {keras_in_use(packages, snapshot.env)}", evidence,
        ))
    return findings

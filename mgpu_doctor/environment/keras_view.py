"""What ``tf.keras`` is: observed in the TensorFlow child, else predicted from TensorFlow's version,
TF_USE_LEGACY_KERAS and the installed Keras packages; the Keras a query implies when it names none."""

from __future__ import annotations

import enum

from packaging.version import Version

from mgpu_doctor.environment.readings import Origin, ResolvedVersion
from mgpu_doctor.model.snapshot import TensorFlowFacts
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.model.versions import parse_version
from mgpu_doctor.record import record

LEGACY_KERAS_VALUES = frozenset({"1", "true", "yes"})
KERAS3_FIRST_TF = Version("2.16.0rc0")

KERAS_PACKAGE_FIRST_TF = Version("2.6.0rc0")  # from 2.6 tf.keras is the separate `keras` 2.x package


class KerasFamily(str, enum.Enum):
    KERAS3 = "Keras 3"
    TF_KERAS = "tf-keras"
    KERAS2 = "Keras 2"  # TensorFlow's own Keras 2 (bundled before 2.6, the `keras` 2.x package to 2.15)


@record
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


def predicted_keras(keras: ResolvedVersion, tensorflow: ResolvedVersion) -> ResolvedVersion:
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


def observed_tf_keras(tf: TensorFlowFacts | Unavailable, keras: ResolvedVersion,
                      tf_keras: ResolvedVersion) -> KerasView | None:
    if isinstance(tf, Unavailable) or not isinstance(tf.keras_module, str):
        return None
    version = tf.keras_version if isinstance(tf.keras_version, str) else ""
    # TensorFlow 2.6-2.15's tf.keras has no __version__: the module `keras` (`tf_keras`) is the
    # installed package of that name, whose version --quick shows as well.
    package = {"keras": keras, "tf_keras": tf_keras}.get(tf.keras_module)
    if not version and package is not None and package.known:
        version = package.text
    if tf.keras_module == "tf_keras":
        family = KerasFamily.TF_KERAS
    elif tf.keras_module == "keras":
        parsed = parse_version(version)
        family = KerasFamily.KERAS3 if parsed is not None and parsed.major >= 3 else KerasFamily.KERAS2
    else:  # tensorflow.python.keras, tensorflow.keras: TensorFlow's bundled Keras 2
        family = KerasFamily.KERAS2
    return KerasView(family, version, Origin.IMPORTED, f"tf.keras is the module {tf.keras_module}")

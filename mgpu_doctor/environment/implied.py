"""What other facts imply about TensorFlow when no TensorFlow version is named: the range a
``keras`` or ``tf-keras`` version implies (their own and TensorFlow's declared requirements), and
what a container image holds (a ``tensorflow/tensorflow`` tag names its release; an NGC tag is
NVIDIA's monthly release, looked up in NVIDIA's release notes). Each answer says what it rests on,
so a finding can say "implied by keras==3.5.0"."""

from __future__ import annotations

import functools
import re

from mgpu_doctor.matrix.implied_tables import bundled_keras_tensorflow_table, bundled_ngc_table
from mgpu_doctor.model.versions import parse_version
from mgpu_doctor.record import field, record

# The image patterns are compiled on first use: only `--image` reads them, `check --quick` never.


@functools.cache
def _tf_image() -> re.Pattern[str]:
    return re.compile(r"(?:docker\.io/)?tensorflow/tensorflow:(?P<tag>[\w][\w.-]{0,127})")


@functools.cache
def _ngc_image() -> re.Pattern[str]:
    return re.compile(r"nvcr\.io/nvidia/tensorflow:(?P<release>\d\d\.\d\d)"
                      r"(?:-(?P<flavour>tf1|tf2))?-py\d(?:[\w.-]{0,64})")


@functools.cache
def _tag_version() -> re.Pattern[str]:
    return re.compile(r"(?P<v>\d{1,2}\.\d{1,3}(?:\.\d{1,3})?(?:rc\d{1,2})?)(?:$|-)")


@record
class ImpliedRange:
    """A TensorFlow range implied by another package's version, and why."""

    spec: str  # ">=2.16.1", "<2.17,>=2.16"
    why: str  # "implied by keras==3.5.0: the keras requirement of TensorFlow 2.16.1 to 2.19.1"


def implied_tensorflow(keras: str, tf_keras: str) -> ImpliedRange | None:
    """The TensorFlow range a known ``tf-keras`` (first: it names one TensorFlow series) or ``keras``
    version implies; None when neither implies one."""
    table = bundled_keras_tensorflow_table()
    for package, text in (("tf-keras", tf_keras), ("keras", keras)):
        version = parse_version(text) if text else None
        if version is None:
            continue
        found = table.tensorflow_for(package, version)
        if found is not None:
            spec, rests_on = found
            return ImpliedRange(spec, f"implied by {package}=={text}: {rests_on}")
    return None


@record
class ImageFacts:
    """What one container image reference says: versions (``tensorflow``, ``cuda``, ``cudnn``,
    ``nccl``, ``horovod``) with where each was read, whether it is NVIDIA's build, and what it
    leaves unknown."""

    image: str
    kind: str  # "tensorflow" (Docker Hub's tensorflow/tensorflow), "ngc" (nvcr.io/nvidia/tensorflow)
    versions: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # key -> "NVIDIA's release notes of 23.03: URL"
    nvidia_build: bool = False
    unknown: str = ""  # why the image names no TensorFlow release, when it does not


class NotAnImage(ValueError):
    """Not a TensorFlow image this reads (the message says which forms are read)."""


def image_facts(reference: str) -> ImageFacts:
    """``tensorflow/tensorflow:2.18.0-gpu`` -> TensorFlow 2.18.0 (the pip wheel; what it was built for
    comes from the tested builds); ``nvcr.io/nvidia/tensorflow:23.03-tf2-py3`` -> NVIDIA's build with
    what the release notes of 23.03 state for it. Raises :class:`NotAnImage` for anything else."""
    text = reference.strip()
    tf = _tf_image().fullmatch(text)
    if tf is not None:
        version = _tag_version().match(tf.group("tag"))
        if version is None or parse_version(version.group("v")) is None:
            return ImageFacts(text, "tensorflow",
                              unknown=f"the tag {tf.group('tag')!r} names no TensorFlow release")
        return ImageFacts(text, "tensorflow", {"tensorflow": version.group("v")},
                          {"tensorflow": f"{text}, its tag"})
    ngc = _ngc_image().fullmatch(text)
    if ngc is None:
        raise NotAnImage(f"{text!r}: an image is tensorflow/tensorflow:TAG or "
                         "nvcr.io/nvidia/tensorflow:YY.MM-tf2-py3")
    row = bundled_ngc_table().release(ngc.group("release"))
    if row is None:
        return ImageFacts(text, "ngc", nvidia_build=True,
                          unknown=f"NVIDIA's release {ngc.group('release')} is not in the NGC table")
    flavour = ngc.group("flavour") or ""
    values = {"tensorflow": row.tensorflow_of(flavour), "cuda": row.cuda, "cudnn": row.cudnn,
              "nccl": row.nccl, "horovod": row.horovod}
    versions = {k: v for k, v in values.items() if v}
    field_of = {"tensorflow": flavour or "tensorflow"}
    sources = {}
    for key in versions:
        secondary = field_of.get(key, key) in row.secondary
        sources[key] = (f"{text}, NGC {row.release} per {'a secondary source' if secondary else 'NVIDIA'}: "
                        f"{row.sources[0]}")
    unknown = "" if "tensorflow" in versions else \
        f"the TensorFlow of NVIDIA's {row.release} {flavour or 'image'} is not in the NGC table"
    return ImageFacts(text, "ngc", versions, sources, nvidia_build=True, unknown=unknown)

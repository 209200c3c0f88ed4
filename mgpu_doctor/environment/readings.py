"""A version as the resolver decides it: each source's reading (what it said, where it was read)
and the one value chosen by precedence, with what the other sources said."""

from __future__ import annotations

import enum

from packaging.version import Version

from mgpu_doctor.model.unavailable import Unavailable, absent
from mgpu_doctor.model.versions import parse_version
from mgpu_doctor.record import record


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
    IMAGE = "implied by the image"  # a tensorflow/tensorflow tag, or an NGC release's notes

    @property
    def observed(self) -> bool:
        """Seen on the machine (or stated by the user), not inferred from another version."""
        return self not in (Origin.BUILD_INFO, Origin.TESTED_BUILD, Origin.PREDICTED, Origin.IMAGE)


@record
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


@record
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

    def why_unknown(self) -> str:
        """What :meth:`describe` says, inside a sentence that already says it is unknown: the
        missing value's detail without its reason ("skipped: ...")."""
        if self.chosen is None and not self.range and self.missing is not None and self.missing.detail:
            return self.missing.detail
        return self.describe()

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

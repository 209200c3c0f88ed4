"""Version parsing and specifier matching, with pre-release, nightly, local and short versions on purpose.

Versions are parsed with `packaging` here, at the edge; a version that does not parse is
unknown (never an exception). `SpecifierSet.contains` is always called with an explicit
`prereleases=True` (its default changed between packaging releases).

Three kinds of version cannot be placed exactly, and are answered "unknown" when the answer
depends on how they are read:

- A nightly (`2.22.0.dev20260301`) or release candidate (`2.16.0rc1`) sits between releases:
  PEP 440 orders it before `2.22.0`, yet it usually carries most of that release's changes.
- A short version says less than it seems: cuDNN `9` (TensorFlow's build info gives only the
  major) is any 9.x, and `tensorflow==1.12` in a query is any 1.12.x. It is placed by every
  completion (``9`` is the range ``==9.*``): inside when every completion is, outside when none
  is, else unknown (`cuda==11` against "11.2 or newer" cannot tell).
- A local label (`2.1.0+cu121`) says how a wheel was built, not which release it is: dropped.
"""

from __future__ import annotations

import re
from enum import Enum

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from mgpu_doctor.record import record

# A number no real release reaches: the end of an unbounded ``.*`` range.
_HIGH = 999999
_LEADING_NUMBERS = re.compile(r"^v?(\d+(?:\.\d+)*)")


class Tri(Enum):
    """A three-valued answer: matches, does not, or cannot tell."""

    YES = "yes"
    NO = "no"
    UNKNOWN = "unknown"


# No real version has a number this long (a nightly's date has 8 digits); Python would refuse
# to convert one of more than 4300 digits, with an exception instead of "not a version".
_TOO_LONG = re.compile(r"\d{33}")


def parse_version(text: str | None) -> Version | None:
    """A `Version`, or None for a text that is not one (never raises).

    Drivers (``555.42.02``) and CUDA (``12.5.1``) parse as they are. A text with trailing
    words (``7.1.4 (from the log)``) keeps its leading numbers.
    """
    if text is None:
        return None
    cleaned = text.strip()
    if not cleaned or _TOO_LONG.search(cleaned):
        return None
    try:
        return Version(cleaned)
    except InvalidVersion:
        match = _LEADING_NUMBERS.match(cleaned)
        if match and match.group(1) != cleaned:
            try:
                return Version(match.group(1))
            except InvalidVersion:  # pragma: no cover - digits and dots always parse
                return None
        return None


def minor_text(text: str) -> str:
    """``"12.5.1"`` -> ``"12.5"``; ``"9"`` stays ``"9"`` (any 9.x, not 9.0); a text that is not a
    version is kept as it is."""
    version = parse_version(text)
    if version is None:
        return text
    return f"{version.major}.{version.minor}" if len(version.release) > 1 else str(version.major)


def major_minor(text: str) -> tuple[int, int] | None:
    """``"12.5.1"`` -> ``(12, 5)``, or None for a text that is not a version."""
    version = parse_version(text)
    return (version.major, version.minor) if version is not None else None


def parse_specifier(text: str) -> SpecifierSet:
    """Raises ValueError with the reason for a specifier that is not PEP 440 or cannot match."""
    if not text.strip():
        raise ValueError("empty specifier (leave the key out to mean any version)")
    try:
        spec = SpecifierSet(text)
    except InvalidSpecifier as exc:
        raise ValueError(f"not a PEP 440 specifier: {text!r} ({exc})") from None
    for one in spec:
        if one.operator == "===":
            raise ValueError(f"{text!r}: '===' compares strings, not versions; use '=='")
        if "+" in one.version:
            raise ValueError(f"{text!r}: local labels (+cu121) say how a wheel was built, not "
                             "which release it is; leave them out")
    return spec


def version_in(version_text: str | None, spec: SpecifierSet) -> Tri:
    """Is the version inside the specifier set? UNKNOWN when it cannot be placed exactly."""
    version = parse_version(version_text)
    if version is None:
        return Tri.UNKNOWN
    plain = Version(version.public)
    readings = {spec.contains(plain, prereleases=True)}
    # A specifier that names pre-releases itself (">=2.12.0.dev0") places them on purpose.
    names_prereleases = any(Version(s.version.rstrip(".*")).is_prerelease for s in spec
                            if not s.version.endswith(".*"))
    if (plain.is_prerelease or plain.is_devrelease) and not names_prereleases:
        readings.add(spec.contains(Version(plain.base_version), prereleases=True))
    if _is_short(version_text or "", plain, spec):
        return range_in(completions(plain), spec)
    if len(readings) > 1:
        return Tri.UNKNOWN
    return Tri.YES if readings.pop() else Tri.NO


def _is_short(text: str, version: Version, spec: SpecifierSet) -> bool:
    """Fewer release parts than the specifier talks about, and no pre/dev/post/local part."""
    if version.pre is not None or version.dev is not None or version.post is not None:
        return False
    if "+" in text:
        return False
    wanted = max((len(s.version.rstrip(".*").split(".")) for s in spec), default=0)
    return len(version.release) < wanted


def completions(version: Version) -> SpecifierSet:
    """Every release a short version may stand for: ``9`` -> ``==9.*``, ``1.12`` -> ``==1.12.*``."""
    prefix = f"{version.epoch}!" if version.epoch else ""
    return SpecifierSet(f"=={prefix}{'.'.join(str(p) for p in version.release)}.*")


def is_short(text: str, parts: int) -> bool:
    """Whether a version is written with fewer than ``parts`` release numbers and nothing else
    (``"11"`` for a CUDA ``X.Y``): it then stands for every completion, not for ``X.0``."""
    version = parse_version(text)
    if version is None or version.pre is not None or version.dev is not None or version.post is not None:
        return False
    return "+" not in text and len(version.release) < parts


def range_in(known: SpecifierSet, spec: SpecifierSet) -> Tri:
    """Is every version in ``known`` (a predicted range such as ``>=3``) inside ``spec``?

    YES when the range lies wholly inside, NO when the two cannot share a version, else UNKNOWN.
    Both are read as intervals; a ``!=`` in ``spec`` only ever makes the answer less sure.
    """
    a, b = _interval(known), _interval(spec)
    if a is None or b is None:
        return Tri.UNKNOWN
    if _empty(_intersect(a, b)):
        return Tri.NO
    holes = any(s.operator == "!=" for s in spec)
    if not holes and _contains(b, a):
        return Tri.YES
    return Tri.UNKNOWN


# An interval of versions: (low, low inclusive, high, high inclusive); None for unbounded.
_Bound = tuple[Version | None, bool, Version | None, bool]


def interval(spec: SpecifierSet) -> _Bound | None:
    """The versions a specifier set admits as one interval (low, low inclusive, high, high
    inclusive; None: unbounded), or None when it is not one (a ``!=`` hole, a bad version)."""
    if any(s.operator == "!=" for s in spec):
        return None
    return _interval(spec)


def _interval(spec: SpecifierSet) -> _Bound | None:
    lo: Version | None = None
    lo_in = True
    hi: Version | None = None
    hi_in = True
    result: _Bound = (lo, lo_in, hi, hi_in)
    for one in spec:
        text = one.version
        try:
            if text.endswith(".*"):
                base = Version(text[:-2])
                parts: _Bound = (base, True, _bump(base.release), False)
            else:
                version = Version(text)
                parts = {
                    ">=": (version, True, None, True),
                    ">": (version, False, None, True),
                    "<=": (None, True, version, True),
                    "<": (None, True, version, False),
                    "==": (version, True, version, True),
                    "~=": (version, True, _bump(version.release[:-1]), False),
                    "!=": (None, True, None, True),
                }.get(one.operator, (None, True, None, True))
        except InvalidVersion:
            return None
        if one.operator == "!=" and text.endswith(".*"):
            parts = (None, True, None, True)
        result = _intersect(result, parts)
    return result


def _bump(release: tuple[int, ...]) -> Version:
    """The first version after every ``release.*``: (2, 12) -> 2.13.dev0 (2.13's first nightly)."""
    if not release:
        return Version(str(_HIGH))
    head = list(release[:-1]) + [release[-1] + 1]
    return Version(".".join(str(p) for p in head) + ".dev0")


def _intersect(a: _Bound, b: _Bound) -> _Bound:
    lo, lo_in = _tighter(a[0], a[1], b[0], b[1], lower=True)
    hi, hi_in = _tighter(a[2], a[3], b[2], b[3], lower=False)
    return lo, lo_in, hi, hi_in


def _tighter(
    x: Version | None, x_in: bool, y: Version | None, y_in: bool, lower: bool
) -> tuple[Version | None, bool]:
    if x is None:
        return y, y_in
    if y is None or x == y:
        return x, x_in and (y_in if y is not None else True)
    if lower:
        return (x, x_in) if x > y else (y, y_in)
    return (x, x_in) if x < y else (y, y_in)


def _empty(b: _Bound) -> bool:
    lo, lo_in, hi, hi_in = b
    if lo is None or hi is None:
        return False
    return lo > hi or (lo == hi and not (lo_in and hi_in))


def _contains(outer: _Bound, inner: _Bound) -> bool:
    o_lo, o_lo_in, o_hi, o_hi_in = outer
    i_lo, i_lo_in, i_hi, i_hi_in = inner
    if o_lo is not None and (i_lo is None or i_lo < o_lo or (i_lo == o_lo and i_lo_in and not o_lo_in)):
        return False
    return o_hi is None or not (i_hi is None or i_hi > o_hi or (i_hi == o_hi and i_hi_in and not o_hi_in))


def below(spec: SpecifierSet, version_text: str) -> bool:
    """Whether every version ``spec`` admits is older than ``version_text`` (a report of older
    releases, seen again on a newer one). False when either cannot be placed."""
    version = parse_version(version_text)
    bounds = _interval(spec)
    if version is None or bounds is None or bounds[2] is None:
        return False
    high, high_in = bounds[2], bounds[3]
    plain = Version(version.public)
    return plain > high or (plain == high and not high_in)


# A Requires-Dist line: name, optional [extras], the specifiers (bare or in parentheses, as older
# METADATA writes them), optional "; marker". packaging.requirements parses the same, but costs
# the quick check tens of milliseconds of imports for lines this simple.
_REQUIREMENT = (r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?"  # compiled on first use (re's cache)
                r"\s*\(?([^;()]*)\)?\s*(?:;(.*))?$")


@record
class Pin:
    """One Requires-Dist line: the canonical name, its specifiers, its marker text ("" if none)."""

    name: str
    specifier: SpecifierSet
    marker: str
    line: str

    def applies(self, python: Version | None) -> bool:
        """Whether the marker holds for the diagnosed Python (unknown Python: it may)."""
        if not self.marker or python is None:
            return True
        from packaging.markers import Marker  # only lines with a marker need it

        try:
            return bool(Marker(self.marker).evaluate({
                "python_version": f"{python.major}.{python.minor}", "python_full_version": str(python),
                "extra": ""}))
        except Exception:  # InvalidMarker, or a marker this interpreter cannot evaluate: keep it
            return True


def requirement_name(line: str) -> str:
    """The canonical project name of a Requires-Dist line ("" when it is not one)."""
    m = re.match(_REQUIREMENT, line)
    return re.sub(r"[-_.]+", "-", m.group(1)).lower() if m else ""


def parse_pin(line: str) -> Pin | None:
    m = re.match(_REQUIREMENT, line)
    if m is None:
        return None
    try:
        spec = SpecifierSet(m.group(2).strip())
    except InvalidSpecifier:
        return None
    return Pin(requirement_name(line), spec, (m.group(3) or "").strip(), line.strip())

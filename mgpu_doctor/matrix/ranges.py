"""An entry's version range read as OSV reads one (``introduced``, ``fixed``, ``last_affected``).

The files keep PEP 440 specifiers; this module says what each bound means:

- a lower bound (``>=2.4.0``, the ``2.10`` of ``==2.10.*``) is where the sources saw it first
  (``introduced``);
- an exclusive upper bound on an entry with ``fixed_in`` (``<2.11``) is the fixing release
  (``fixed``): newer versions are outside;
- an inclusive upper bound (``<=2.15.1``, ``==2.15.1``) or a series end (``<2.16.dev0``,
  ``==2.15.*``) without a fix is the last version a source reported (``last_affected``). For the
  packages whose releases fix bugs (:data:`OPEN_ABOVE_KEYS`), a newer version is neither inside nor
  outside: "reported up to 2.15.1, no fix known". A bound on CUDA, cuDNN or the driver is a
  compatibility limit and stays a plain bound.

A key may hold several ranges (one cause reported on several series), written in the data as a
list and kept as one text joined by :data:`UNION` (``>=2.4.0,<=2.4.1 || ==2.9.*``): a version
between two of them is "reported on 2.4.0-2.4.1 and 2.9.x, not on this series", never a match.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from mgpu_doctor.model.versions import Tri, interval, parse_specifier, parse_version, range_in, version_in
from mgpu_doctor.record import record

# The packages whose releases fix the bugs an entry reports: above the last report of an entry
# without a fix, a version of these is "reported up to X, no fix known".
OPEN_ABOVE_KEYS = ("tensorflow", "keras", "tf-keras", "nccl", "horovod", "openmpi", "mpich", "ray")
UNION = " || "


class Place(enum.Enum):
    """Where a version lies against an entry's range of one key."""

    IN = "in"
    OUT = "out"
    UNKNOWN = "unknown"  # cannot be placed: a short version or a nightly straddling a bound
    NEXT_SERIES = "next-series"  # in the series right after the last report, no fix known
    OLDER_REPORT = "older-report"  # further past the last report, no fix known
    BETWEEN = "between"  # between two reported ranges of one key


PAST = (Place.NEXT_SERIES, Place.OLDER_REPORT)


def union_text(texts: list[str] | tuple[str, ...]) -> str:
    return UNION.join(texts)


def range_texts(text: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in text.split(UNION.strip()) if t.strip())


# A range as an interval: low, low inclusive, high, high inclusive (None: unbounded), and how many
# release parts its specifiers name (a version with fewer is short: placed by its completions).
Bounds = tuple[Version | None, bool, Version | None, bool, int]


@record
class Span:
    """One reported range, parsed once (when the entry is read; the index keeps it so)."""

    text: str
    above: str | None  # the versions past its upper end (``>2.15.1``); None: no upper end
    end: Version | None  # its upper bound, to order ranges
    last: str  # the last reported version or series, as a finding says it ("2.15.1", "2.15.x")
    series: tuple[int, int | None] | None  # the (major, minor) of the last report; minor None: "1.x"
    bounds: Bounds | None  # None: not one interval (a != hole)
    first: str  # the lower bound it names ("" when none)

    @property
    def shown(self) -> str:
        """The range as a finding says it: ``2.4.0-2.4.1``, ``2.9.x``, ``1.12.0``."""
        if self.above is None:
            return self.text
        if not self.first or self.last.startswith(self.first.removesuffix(".*")):
            return self.last
        return f"{self.first}-{self.last}"


@functools.lru_cache(maxsize=4096)
def span(text: str) -> Span:
    """One range's specifier text read: its bounds and upper end (the tightest upper bound it names)."""
    spec = parse_specifier(text)
    best: tuple[Version, str, str, tuple[int, int | None]] | None = None
    for one in spec:
        found = _upper(one.operator, one.version)
        if found is not None and (best is None or found[0] < best[0]):
            best = found
    found_bounds = interval(spec)
    bounds = None if found_bounds is None else (
        *found_bounds, max((len(s.version.removesuffix(".*").split(".")) for s in spec), default=0))
    first = next((one.version for one in spec if one.operator in (">=", ">", "==", "~=")), "")
    if best is None:
        return Span(text, None, None, "", None, bounds, first)
    return Span(text, best[1], best[0], best[2], best[3], bounds, first)


def _upper(operator: str, text: str) -> tuple[Version, str, str, tuple[int, int | None]] | None:
    """(the upper bound, the specifier of versions past the range, the last reported version as
    said, its series) for one upper-bounding specifier, else None."""
    try:
        if operator == "==" and text.endswith(".*"):
            release = Version(text[:-2]).release
            nxt = f"{'.'.join(map(str, release[:-1] + (release[-1] + 1,)))}.dev0"
            minor = release[1] if len(release) > 1 else None
            return Version(nxt), f">={nxt}", f"{text[:-2]}.x", (release[0], minor)
        version = Version(text)
    except InvalidVersion:
        return None
    release = version.release
    if operator in ("<=", "=="):
        return version, f">{text}", text, (release[0], release[1] if len(release) > 1 else None)
    if operator == "<":
        if version.dev == 0 and len(release) >= 2 and version.pre is None:  # a series end: <2.16.dev0
            major, minor = release[0], release[1]
            last = (major, minor - 1) if minor > 0 else (major - 1, None)
            said = f"{last[0]}.{last[1]}.x" if last[1] is not None else f"{last[0]}.x"
            return version, f">={text}", said, last
        return version, f">={text}", text, (release[0], release[1] if len(release) > 1 else None)
    return None


@record
class Reading:
    """The OSV reading of one key of one entry: its ranges, and whether versions past the last
    report are open ("no fix known") or outside (a fix, a closed series, a compatibility limit)."""

    key: str
    text: str  # the ranges as kept (joined by UNION)
    open_above: bool
    spans: tuple[Span, ...]

    @property
    def last_reported(self) -> str:
        tops = [s for s in self.spans if s.above is not None]
        return max(tops, key=lambda s: s.end or Version("0")).last if tops else ""

    def shown(self) -> str:
        """The ranges as a finding says them: ``2.4.0-2.4.1 and 2.9.x``."""
        return " and ".join(s.shown for s in self.spans)

    def place(self, version_text: str) -> Place:
        plain = _plain(version_text)

        def near(series: tuple[int, int | None]) -> bool:
            return _in_series(version_text, series)

        # a release with every part the ranges name: compared with their bounds, no specifier matching
        if plain is not None and all(s.bounds is not None and len(plain.release) >= s.bounds[4]
                                     for s in self.spans):
            return _place(self, lambda sp: _within(plain, sp.bounds), lambda sp: _past(plain, sp), near)
        return _place(self, lambda sp: version_in(version_text, _spec(sp.text)),
                      lambda sp: version_in(version_text, _spec(sp.above)) if sp.above else Tri.NO, near)

    def place_range(self, known: SpecifierSet) -> Place:
        """A predicted range (``>=2.16.1,<=2.19.1``) against the entry's: wholly in one place, or unknown."""
        return _place(self, lambda sp: range_in(known, _spec(sp.text)),
                      lambda sp: range_in(known, _spec(sp.above)) if sp.above else Tri.NO,
                      lambda series: any(range_in(known, _spec(s)) is Tri.YES for s in _series_specs(series)))


def reading(key: str, text: str, fixed: bool) -> Reading:
    """How an entry's range of ``key`` reads: open above its last report when the key is one whose
    releases fix bugs and the entry names no fix (``fixed``: it has ``fixed_in`` or a closed range)."""
    return Reading(key, text, key in OPEN_ABOVE_KEYS and not fixed, tuple(span(t) for t in range_texts(text)))


@functools.lru_cache(maxsize=8192)
def _spec(text: str) -> SpecifierSet:
    return parse_specifier(text)


@functools.lru_cache(maxsize=1024)
def _plain(version_text: str) -> Version | None:
    version = parse_version(version_text)
    if version is None or version.pre or version.dev is not None or version.post is not None or version.local:
        return None
    return version


def _within(version: Version, bounds: Bounds | None) -> Tri:
    if bounds is None:
        return Tri.UNKNOWN
    low, low_in, high, high_in, _ = bounds
    below = low is not None and (version < low or (version == low and not low_in))
    return Tri.NO if below or _over(version, bounds) else Tri.YES


def _past(version: Version, sp: Span) -> Tri:
    return Tri.YES if sp.above is not None and sp.bounds is not None and _over(version, sp.bounds) else Tri.NO


def _over(version: Version, bounds: Bounds) -> bool:
    high, high_in = bounds[2], bounds[3]
    return high is not None and (version > high or (version == high and not high_in))


def _place(r: Reading, contains: Callable[[Span], Tri], past_of: Callable[[Span], Tri],
           near: Callable[[tuple[int, int | None]], bool]) -> Place:
    answers = [contains(s) for s in r.spans]
    if Tri.YES in answers:
        return Place.IN
    if Tri.UNKNOWN in answers:
        return Place.UNKNOWN
    past = [past_of(s) for s in r.spans]
    if Tri.UNKNOWN in past:  # a nightly of the release right after the last report
        return Place.UNKNOWN if r.open_above else Place.OUT
    if Tri.YES not in past:
        return Place.OUT
    if Tri.NO in past:  # past some reported ranges, below others
        return Place.BETWEEN
    if not r.open_above:
        return Place.OUT
    series = max(r.spans, key=lambda s: s.end or Version("0")).series
    return Place.NEXT_SERIES if series is not None and near(series) else Place.OLDER_REPORT


def _series_specs(series: tuple[int, int | None]) -> tuple[str, ...]:
    """The series of the last report and the next minor (2.15 -> the rest of 2.15, or 2.16.x).
    Not a new major (2.0 after 1.x, Keras 3 after 2.x): the change is too large to carry a report
    over, and which minor ends a major is not known here."""
    major, minor = series
    if minor is None:
        return ()
    return (f"=={major}.{minor}.*", f"=={major}.{minor + 1}.*")


def _in_series(version_text: str, series: tuple[int, int | None]) -> bool:
    """Whether a version (placed past the last report already) is in the report's series or the
    next (:func:`_series_specs`); a version without a minor is in none."""
    version = parse_version(version_text)
    major, minor = series
    if version is None or len(version.release) < 2 or minor is None:
        return False
    return (version.release[0], version.release[1]) in ((major, minor), (major, minor + 1))

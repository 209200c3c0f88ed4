"""Compatibility tables: CUDA runtime -> minimum driver, and TensorFlow's tested GPU builds.

Read from ``matrices/compat/cuda-driver.toml`` and ``matrices/compat/tensorflow.toml``
(schema in ``matrices/compat/README.md``). A broken file raises :class:`CompatTableError`
with one line naming the file and the field; the tables are never half-loaded.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from packaging.version import Version

from mgpu_doctor.matrix.paths import bundled_matrix_dir
from mgpu_doctor.matrix.toml_files import DataFileError, read_versioned
from mgpu_doctor.model.versions import parse_version
from mgpu_doctor.record import record

SCHEMA_VERSION = 1
CUDA_DRIVER_FILE = "compat/cuda-driver.toml"
TENSORFLOW_FILE = "compat/tensorflow.toml"
AND_CUDA_FILE = "compat/and-cuda.toml"
TENSORFLOW_REQUIRES_FILE = "compat/tensorflow-requires.toml"
ARCHS_FILE = "compat/tensorflow-archs.toml"
CONFIDENCES = ("primary", "secondary")


class CompatTableError(Exception):
    """A compatibility table is unusable; the message is one line: file, field, problem."""


@record
class ToolkitDriver:
    """The driver one CUDA toolkit release ships with: every feature of that release works."""

    cuda: str  # "12.5"
    release: str  # "CUDA 12.5 Update 1"
    linux_driver: str
    source: str
    confidence: str = "primary"
    note: str = ""


@record
class MinorCompat:
    """The oldest driver that runs any CUDA ``cuda_major``.x under minor-version compatibility."""

    cuda_major: int
    linux_driver: str
    sources: tuple[str, ...]
    note: str = ""


@record
class DriverRequirement:
    """What a CUDA runtime version needs from the driver."""

    cuda: str
    full_driver: str | None  # the toolkit driver (lowest release of that minor); None: not in the table
    full_release: str
    full_source: str
    full_confidence: str
    compat_driver: str | None  # minor-version compatibility minimum; None before CUDA 11
    compat_sources: tuple[str, ...]


@record
class CudaDriverTable:
    toolkit: tuple[ToolkitDriver, ...]
    minor_compat: tuple[MinorCompat, ...]
    origin: str

    def requirement(self, cuda_version: str) -> DriverRequirement | None:
        """The driver needs of a CUDA runtime ``X.Y[.Z]``; None when the version does not parse."""
        version = parse_version(cuda_version)
        if version is None:
            return None
        minor = f"{version.major}.{version.minor}"
        rows = [r for r in self.toolkit if _same_minor(r.cuda, version)]
        # A release candidate's driver is no promise for the release (CUDA 11.0.1 RC: 450.36.06).
        rows = [r for r in rows if " RC" not in r.release] or rows
        full = min(rows, key=lambda r: _driver(r.linux_driver)) if rows else None
        compat = next((c for c in self.minor_compat if c.cuda_major == version.major), None)
        return DriverRequirement(
            cuda=minor,
            full_driver=full.linux_driver if full else None,
            full_release=full.release if full else "",
            full_source=full.source or full.note if full else "",
            full_confidence=full.confidence if full else "",
            compat_driver=compat.linux_driver if compat else None,
            compat_sources=compat.sources if compat else (),
        )

    def minors(self, cuda_major: int) -> list[str]:
        """The CUDA ``X.Y`` minors of one major the toolkit table lists, oldest first."""
        found = {f"{v.major}.{v.minor}" for r in self.toolkit if (v := _version(r.cuda)).major == cuda_major}
        return sorted(found, key=_version)

    def newest_cuda(self, driver_version: str) -> str | None:
        """The newest CUDA minor whose toolkit driver is at most ``driver_version``."""
        driver = parse_version(driver_version)
        if driver is None:
            return None
        fitting = [r for r in self.toolkit if _driver(r.linux_driver) <= driver]
        if not fitting:
            return None
        best = max(fitting, key=lambda r: _version(r.cuda))
        return best.cuda


@record
class TfBuild:
    """One tested Linux GPU build configuration of TensorFlow."""

    tensorflow: str  # "2.16.1"
    package: str
    python: str  # as the source writes it: "3.9-3.12" or "2.7, 3.3-3.7"
    cuda: str
    cudnn: str

    def python_ok(self, python_version: str) -> bool | None:
        """Whether a Python ``X.Y[.Z]`` is in the tested range; None when it does not parse."""
        version = parse_version(python_version)
        if version is None:
            return None
        mine = (version.major, version.minor)
        return any(low <= mine <= high for low, high in _python_ranges(self.python))


@record
class NightlyBuild:
    """What the nightlies of one series (``2.4``: tf-nightly 2.4.0.devYYYYMMDD) were built with
    over a span of dates, as a dated source says (the day a nightly moved to a new CUDA)."""

    series: str  # "2.4"
    first: str  # "2020-08-20" ("" : from the series' start)
    last: str  # "" : to the series' end
    cuda: str
    cudnn: str
    source: str
    note: str = ""

    def covers(self, day: str) -> bool:
        return (not self.first or day >= self.first) and (not self.last or day <= self.last)


@record
class TensorFlowTable:
    builds: tuple[TfBuild, ...]
    source: str
    origin: str
    nightlies: tuple[NightlyBuild, ...] = ()

    def build_for(self, tf_version: str) -> TfBuild | None:
        """The tested configuration of the same major.minor release, if the table has one."""
        version = parse_version(tf_version)
        if version is None:
            return None
        return next((b for b in self.builds if _same_minor(b.tensorflow, version)), None)

    def build_config(self, tf_version: str) -> tuple[TfBuild | None, str]:
        """What a pip wheel of ``tf_version`` was built with (CUDA, cuDNN), or None and why.

        A release or release candidate: its minor's row. A nightly (``2.4.0.dev20200701``) sits
        between the release before it and its own: a dated [[nightly]] row that covers its date
        decides; else the two rows when they agree; else nothing (cannot tell).
        """
        version = parse_version(tf_version)
        if version is None:
            return None, f"{tf_version!r} is not a version"
        same = self.build_for(tf_version)
        if version.dev is None:
            missing = f"TensorFlow {tf_version} is not in the tested build table"
            return same, "" if same is not None else missing
        day = nightly_date(version)
        series = f"{version.major}.{version.minor}"
        dated = [n for n in self.nightlies if n.series == series]
        hit = next((n for n in dated if day and n.covers(day)), None)
        if hit is not None:
            return TfBuild(str(version), f"tf-nightly of {day}: {hit.source}", same.python if same else "",
                           hit.cuda, hit.cudnn), ""
        base = Version(version.base_version)
        before = max((b for b in self.builds if _version(b.tensorflow) < base),
                     key=lambda b: _version(b.tensorflow), default=None)
        if same is not None and before is not None and (same.cuda, same.cudnn) == (before.cuda, before.cudnn):
            return same, ""
        sides = " and ".join(f"{b.package} (CUDA {b.cuda}, cuDNN {b.cudnn})" for b in (before, same)
                             if b is not None)
        when = f"its date {day}" if day else "its version (no date in it)"
        return None, (f"the nightly TensorFlow {tf_version} sits between {sides or 'no tested builds'}, and "
                      f"{when} does not tell which it was built like")


@record
class ReleasePins:
    """What one TensorFlow release requires (its ``[and-cuda]`` extra, or the packages it imports),
    as its wheel metadata says."""

    tensorflow: str  # "2.15.0"
    requires: tuple[str, ...]  # "nvidia-cudnn-cu12==8.9.4.25"
    source: str


@record
class PinsTable:
    releases: tuple[ReleasePins, ...]
    origin: str

    def pins_for(self, tf_version: str) -> ReleasePins | None:
        """The release's pins; for a version the table has no row of (or a short one, "2.15"),
        the pins every listed release of that minor shares, else None."""
        version = parse_version(tf_version)
        if version is None:
            return None
        # "2.15" equals 2.15.0 to PEP 440, but here it means any 2.15 release
        full = len(version.release) > 2
        exact = [r for r in self.releases if full and _version(r.tensorflow) == version]
        if exact:
            return exact[0]
        same = [r for r in self.releases if _same_minor(r.tensorflow, version)]
        if same and all(r.requires == same[0].requires for r in same):
            return same[0]
        return None


@record
class ArchRow:
    """The CUDA architectures one TensorFlow minor release's Linux GPU wheel was compiled for."""

    tensorflow: str  # "2.15"
    archs: str  # as tf.sysconfig.get_build_info()["cuda_compute_capabilities"] prints them
    source: str


@record
class ArchTable:
    releases: tuple[ArchRow, ...]
    origin: str

    def archs_for(self, tf_version: str) -> ArchRow | None:
        version = parse_version(tf_version)
        if version is None:
            return None
        return next((r for r in self.releases if _same_minor(r.tensorflow, version)), None)


def nightly_date(version: Version) -> str:
    """The date a nightly was built, from its dev number (tf-nightly ``dev20200701``, keras-nightly
    ``dev2024061903``): ``"2020-07-01"``, or "" when it carries none."""
    digits = str(version.dev) if version.dev is not None else ""
    match = re.fullmatch(r"(20\d\d)(0[1-9]|1[0-2])([0-3]\d)\d{0,2}", digits)
    return f"{match.group(1)}-{match.group(2)}-{match.group(3)}" if match else ""


def load_pins_table(path: Path) -> PinsTable:
    data = _read(path)
    _no_unknown(path, "", data, ("schema_version", "release"))
    rows = []
    for i, row in enumerate(_tables(path, data, "release")):
        where = f"release[{i}]"
        _no_unknown(path, where, row, ("tensorflow", "requires", "source", "note"))
        source = _text(path, where, row, "source", None)
        _url(path, f"{where}.source", source)
        requires = row.get("requires")
        if not isinstance(requires, list) or not all(isinstance(r, str) and r.strip() for r in requires):
            raise _error(path, f"{where}.requires", "must be a list of requirement strings")
        tensorflow = _version_text(path, where, row, "tensorflow", post=True)
        rows.append(ReleasePins(tensorflow, tuple(requires), source))
    return PinsTable(tuple(rows), str(path))


def load_arch_table(path: Path) -> ArchTable:
    data = _read(path)
    _no_unknown(path, "", data, ("schema_version", "release"))
    rows = []
    for i, row in enumerate(_tables(path, data, "release")):
        where = f"release[{i}]"
        _no_unknown(path, where, row, ("tensorflow", "cuda_compute_capabilities", "source", "note"))
        source = _text(path, where, row, "source", None)
        _url(path, f"{where}.source", source)
        archs = _text(path, where, row, "cuda_compute_capabilities", None)
        if not archs.strip():
            raise _error(path, f"{where}.cuda_compute_capabilities", "must not be empty")
        rows.append(ArchRow(_version_text(path, where, row, "tensorflow"), archs, source))
    return ArchTable(tuple(rows), str(path))


def load_cuda_driver_table(path: Path) -> CudaDriverTable:
    data = _read(path)
    _no_unknown(path, "", data, ("schema_version", "toolkit", "minor_compat"))
    toolkit = []
    for i, row in enumerate(_tables(path, data, "toolkit")):
        where = f"toolkit[{i}]"
        _no_unknown(path, where, row, ("cuda", "release", "linux_driver", "source", "confidence", "note"))
        cuda = _version_text(path, where, row, "cuda")
        driver = _version_text(path, where, row, "linux_driver")
        confidence = _text(path, where, row, "confidence", "primary")
        if confidence not in CONFIDENCES:
            raise _error(path, f"{where}.confidence",
                         f"{confidence!r} is not one of {', '.join(CONFIDENCES)}")
        source = _text(path, where, row, "source", "")
        note = _text(path, where, row, "note", "")
        if source:
            _url(path, f"{where}.source", source)
        elif not note:
            raise _error(path, f"{where}.source",
                         "required (or, for a secondary row, a note saying where from)")
        toolkit.append(ToolkitDriver(cuda, _text(path, where, row, "release", f"CUDA {cuda}"), driver,
                                     source, confidence, note))
    compat = []
    for i, row in enumerate(_tables(path, data, "minor_compat")):
        where = f"minor_compat[{i}]"
        _no_unknown(path, where, row, ("cuda_major", "linux_driver", "sources", "note"))
        major = row.get("cuda_major")
        if not isinstance(major, int) or isinstance(major, bool) or major < 11:
            raise _error(path, f"{where}.cuda_major", "must be an integer >= 11 (no minor-version "
                         "compatibility before CUDA 11)")
        sources = row.get("sources")
        if not isinstance(sources, list) or not sources or not all(isinstance(s, str) for s in sources):
            raise _error(path, f"{where}.sources", "required, a non-empty list of URLs")
        for j, url in enumerate(sources):
            _url(path, f"{where}.sources[{j}]", url)
        compat.append(MinorCompat(major, _version_text(path, where, row, "linux_driver"), tuple(sources),
                                  _text(path, where, row, "note", "")))
    if not toolkit:
        raise _error(path, "toolkit", "at least one [[toolkit]] row is required")
    return CudaDriverTable(tuple(toolkit), tuple(compat), str(path))


def load_tensorflow_table(path: Path) -> TensorFlowTable:
    data = _read(path)
    _no_unknown(path, "", data, ("schema_version", "source", "build", "nightly"))
    source = _text(path, "", data, "source", "")
    if source:
        _url(path, "source", source)
    builds = []
    for i, row in enumerate(_tables(path, data, "build")):
        where = f"build[{i}]"
        _no_unknown(path, where, row, ("tensorflow", "package", "python", "cuda", "cudnn", "source"))
        if not source and not row.get("source"):
            raise _error(path, f"{where}.source", "required when the file has no top-level source")
        if row.get("source"):
            _url(path, f"{where}.source", _text(path, where, row, "source", ""))
        python = _text(path, where, row, "python", None)
        if not _python_ranges(python):
            raise _error(path, f"{where}.python", f"not a Python range such as \"3.9-3.12\": {python!r}")
        builds.append(TfBuild(
            tensorflow=_version_text(path, where, row, "tensorflow"),
            package=_text(path, where, row, "package", ""),
            python=python,
            cuda=_version_text(path, where, row, "cuda"),
            cudnn=_version_text(path, where, row, "cudnn"),
        ))
    if not builds:
        raise _error(path, "build", "at least one [[build]] row is required")
    nightlies = []
    for i, row in enumerate(_tables(path, data, "nightly")):
        where = f"nightly[{i}]"
        _no_unknown(path, where, row, ("series", "first", "last", "cuda", "cudnn", "source", "note"))
        series = _version_text(path, where, row, "series")
        dates = [_text(path, where, row, key, "") for key in ("first", "last")]
        for key, day in zip(("first", "last"), dates, strict=True):
            if day and not re.fullmatch(r"20\d\d-[01]\d-[0-3]\d", day):
                raise _error(path, f"{where}.{key}", f"not a date such as \"2020-08-20\": {day!r}")
        if not any(dates):
            raise _error(path, f"{where}.first", "a [[nightly]] row needs a first or a last date")
        url = _text(path, where, row, "source", None)
        _url(path, f"{where}.source", url)
        nightlies.append(NightlyBuild(series, dates[0], dates[1], _version_text(path, where, row, "cuda"),
                                      _version_text(path, where, row, "cudnn"), url,
                                      _text(path, where, row, "note", "")))
    return TensorFlowTable(tuple(builds), source, str(path), tuple(nightlies))


@lru_cache(maxsize=4)
def bundled_cuda_driver_table(directory: Path | None = None) -> CudaDriverTable:
    return load_cuda_driver_table((directory or bundled_matrix_dir()) / CUDA_DRIVER_FILE)


@lru_cache(maxsize=4)
def bundled_tensorflow_table(directory: Path | None = None) -> TensorFlowTable:
    return load_tensorflow_table((directory or bundled_matrix_dir()) / TENSORFLOW_FILE)


@lru_cache(maxsize=4)
def bundled_and_cuda_table(directory: Path | None = None) -> PinsTable:
    return load_pins_table((directory or bundled_matrix_dir()) / AND_CUDA_FILE)


@lru_cache(maxsize=4)
def bundled_tensorflow_requires_table(directory: Path | None = None) -> PinsTable:
    return load_pins_table((directory or bundled_matrix_dir()) / TENSORFLOW_REQUIRES_FILE)


@lru_cache(maxsize=4)
def bundled_arch_table(directory: Path | None = None) -> ArchTable:
    return load_arch_table((directory or bundled_matrix_dir()) / ARCHS_FILE)


def load_bundled_tables() -> None:
    """Read every bundled compatibility table now: a broken one is bad input (exit 2) up front."""
    bundled_cuda_driver_table()
    bundled_tensorflow_table()
    bundled_and_cuda_table()
    bundled_tensorflow_requires_table()
    bundled_arch_table()


def _read(path: Path) -> dict[str, Any]:
    try:
        return read_versioned(path, SCHEMA_VERSION)
    except DataFileError as exc:
        if exc.field:
            raise _error(path, exc.field, str(exc)) from None
        raise CompatTableError(f"{path}: {exc}") from None


def _error(path: Path, field: str, message: str) -> CompatTableError:
    return CompatTableError(f"{path}: field {field}: {message}")


def _no_unknown(path: Path, where: str, table: dict[str, Any], allowed: tuple[str, ...]) -> None:
    for key in sorted(set(table) - set(allowed)):
        raise _error(path, f"{where}.{key}" if where else key,
                     f"unknown field; allowed: {', '.join(allowed)}")


def _tables(path: Path, data: dict[str, Any], key: str) -> list[dict[str, Any]]:
    rows = data.get(key, [])
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise _error(path, key, f"must be an array of tables ([[{key}]])")
    return rows


def _text(path: Path, where: str, row: dict[str, Any], key: str, default: str | None) -> str:
    value = row.get(key, default)
    name = f"{where}.{key}" if where else key
    if value is None:
        raise _error(path, name, "required")
    if not isinstance(value, str):
        raise _error(path, name, f"must be a string, got {type(value).__name__}")
    return value


def _version_text(path: Path, where: str, row: dict[str, Any], key: str, post: bool = False) -> str:
    value = _text(path, where, row, key, None)
    if not re.fullmatch(r"\d+(\.\d+)*" + (r"(\.post\d+)?" if post else ""), value.strip()):
        raise _error(path, f"{where}.{key}", f"not a version such as \"12.5\": {value!r}")
    return value.strip()


def _url(path: Path, field: str, value: str) -> None:
    if not value.startswith("https://"):
        raise _error(path, field, f"not an https:// address: {value!r}")


def _python_ranges(text: str | None) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    ranges = []
    for part in (text or "").split(","):
        match = re.fullmatch(r"\s*(\d+)\.(\d+)\s*(?:-\s*(\d+)\.(\d+))?\s*", part)
        if not match:
            return []
        low = (int(match.group(1)), int(match.group(2)))
        high = (int(match.group(3)), int(match.group(4))) if match.group(3) else low
        ranges.append((low, high))
    return ranges


def _same_minor(text: str, version: Version) -> bool:
    row = _version(text)
    return (row.major, row.minor) == (version.major, version.minor)


def _version(text: str) -> Version:
    parsed = parse_version(text)
    return parsed if parsed is not None else Version("0")


def _driver(text: str) -> Version:
    return _version(text)

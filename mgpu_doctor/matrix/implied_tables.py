"""Tables that imply a TensorFlow release where none is named: what TensorFlow, tf-keras and keras
declare on each other (``compat/keras-tensorflow.toml``), and what NVIDIA's NGC TensorFlow
containers hold (``compat/ngc-tensorflow.toml``). Schema in ``matrices/compat/README.md``; a broken
file raises :class:`~mgpu_doctor.matrix.compat_tables.CompatTableError` naming the file and field.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from mgpu_doctor.matrix.compat_tables import (
    _error,
    _no_unknown,
    _read,
    _tables,
    _text,
    _url,
    _version_text,
)
from mgpu_doctor.matrix.paths import bundled_matrix_dir
from mgpu_doctor.model.versions import parse_version
from mgpu_doctor.record import record

KERAS_TENSORFLOW_FILE = "compat/keras-tensorflow.toml"
NGC_FILE = "compat/ngc-tensorflow.toml"
# TensorFlow 2.6.0 and 2.6.1 declared `keras ~=2.6` (any 2.x from 2.6); 2.6.2 narrowed it to
# `<2.7,>=2.6.0`. Their open bound is not a pairing: they are left out of what a keras version implies.
LOOSE_KERAS_PINS = ("2.6.0", "2.6.1")


@record
class Declared:
    """One release's Requires-Dist on the other package ("" where it declares none)."""

    package: str  # "tensorflow", "tf-keras", "keras"
    version: str
    requires: str  # a specifier on the other package: ">=3.5.0", "<2.17,>=2.16"
    source: str


@record
class KerasTensorFlowTable:
    rows: tuple[Declared, ...]
    path: str

    def tensorflow_for(self, package: str, version: Version) -> tuple[str, str] | None:
        """The TensorFlow range a ``keras`` or ``tf-keras`` version implies, and what it rests on.

        ``tf-keras`` and ``keras`` 2.4.0 declare their TensorFlow themselves. For ``keras``, the
        range spans the TensorFlow releases whose own requirement admits the version (from the first
        to the last; open above when the newest release listed still admits it). None: nothing
        implied (keras 2.3.1 and older were standalone, multi-backend; a version no row covers)."""
        own = [r for r in self.rows
               if r.package == package and Version(r.version) == version and r.requires]
        if own:
            return own[0].requires, f"its requirement tensorflow{own[0].requires}, {own[0].source}"
        if package != "keras":
            return None
        tensorflow = [r for r in self.rows if r.package == "tensorflow" and r.requires
                      and r.version not in LOOSE_KERAS_PINS]
        # a short version ("3", "3.6") is every release it completes to: its lowest and highest ends
        ends = [version] if len(version.release) >= 3 else \
            [version, Version(".".join(map(str, (*version.release, 9999, 9999)[:3])))]
        admits = [r for r in tensorflow
                  if any(SpecifierSet(r.requires).contains(end, prereleases=True) for end in ends)]
        if not admits:
            return None
        newest = max(tensorflow, key=lambda r: Version(r.version))
        low = min(admits, key=lambda r: Version(r.version))
        high = max(admits, key=lambda r: Version(r.version))
        spec = f">={low.version}" if high is newest else f">={low.version},<={high.version}"
        return spec, f"the keras requirement of TensorFlow {low.version}" + \
            (f" to {high.version}" if high is not low else "")


@record
class NgcRelease:
    """One monthly release of NVIDIA's TensorFlow container (``nvcr.io/nvidia/tensorflow:23.03-tf2-py3``).

    ``tf1``/``tf2``: the TensorFlow each flavour's tag holds; ``tensorflow``: the one of a tag without a
    flavour (``18.11-py3``). "" where the sources read do not say. ``secondary``: fields read only on a
    source that is not NVIDIA's."""

    release: str
    tf1: str
    tf2: str
    tensorflow: str
    cuda: str
    cudnn: str
    nccl: str
    horovod: str
    sources: tuple[str, ...]
    secondary: tuple[str, ...]
    note: str

    def tensorflow_of(self, flavour: str) -> str:
        return {"tf1": self.tf1, "tf2": self.tf2}.get(flavour, self.tensorflow)


@record
class NgcTable:
    releases: tuple[NgcRelease, ...]
    path: str

    def release(self, name: str) -> NgcRelease | None:
        return next((r for r in self.releases if r.release == name), None)


def load_keras_tensorflow_table(path: Path) -> KerasTensorFlowTable:
    data = _read(path)
    _no_unknown(path, "", data, ("schema_version", "tensorflow", "tf_keras", "keras"))
    rows = []
    for table, package, other in (("tensorflow", "tensorflow", "keras"),
                                  ("tf_keras", "tf-keras", "tensorflow"), ("keras", "keras", "tensorflow")):
        for i, row in enumerate(_tables(path, data, table)):
            where = f"{table}[{i}]"
            _no_unknown(path, where, row, (table, other, "source", "note"))
            source = _text(path, where, row, "source", None)
            _url(path, f"{where}.source", source)
            requires = _text(path, where, row, other, None).strip()
            if requires:
                try:
                    SpecifierSet(requires)
                except InvalidSpecifier:
                    raise _error(path, f"{where}.{other}", f"not a version specifier: {requires!r}") from None
            version = _version_text(path, where, row, table, post=True)
            rows.append(Declared(package, version, requires, source))
    return KerasTensorFlowTable(tuple(rows), str(path))


_NGC_VERSIONS = ("tf1", "tf2", "tensorflow", "cuda", "cudnn", "nccl", "horovod")


def load_ngc_table(path: Path) -> NgcTable:
    data = _read(path)
    _no_unknown(path, "", data, ("schema_version", "release"))
    releases = []
    for i, row in enumerate(_tables(path, data, "release")):
        where = f"release[{i}]"
        _no_unknown(path, where, row, ("release", *_NGC_VERSIONS, "sources", "secondary", "note"))
        name = _text(path, where, row, "release", None)
        if not (len(name) == 5 and name[2] == "." and name.replace(".", "").isdigit()):
            raise _error(path, f"{where}.release", f"not NVIDIA's YY.MM release: {name!r}")
        values = {}
        for key in _NGC_VERSIONS:
            values[key] = _text(path, where, row, key, "").strip()
            if values[key] and parse_version(values[key]) is None:
                raise _error(path, f"{where}.{key}", f"not a version: {values[key]!r}")
        sources = row.get("sources")
        if not isinstance(sources, list) or not sources or not all(isinstance(s, str) for s in sources):
            raise _error(path, f"{where}.sources", "must be a non-empty list of addresses")
        for j, source in enumerate(sources):
            _url(path, f"{where}.sources[{j}]", source)
        secondary = row.get("secondary", [])
        if not isinstance(secondary, list) or not all(s in _NGC_VERSIONS and values[s] for s in secondary):
            raise _error(path, f"{where}.secondary",
                         f"must list fields this row gives, of {', '.join(_NGC_VERSIONS)}")
        note = _text(path, where, row, "note", "")
        if secondary and not note:
            raise _error(path, f"{where}.note", "required where a field is secondary: say where it was read")
        releases.append(NgcRelease(name, **values, sources=tuple(sources), secondary=tuple(secondary),
                                   note=note))
    return NgcTable(tuple(releases), str(path))


@lru_cache(maxsize=4)
def bundled_keras_tensorflow_table(directory: Path | None = None) -> KerasTensorFlowTable:
    return load_keras_tensorflow_table((directory or bundled_matrix_dir()) / KERAS_TENSORFLOW_FILE)


@lru_cache(maxsize=4)
def bundled_ngc_table(directory: Path | None = None) -> NgcTable:
    return load_ngc_table((directory or bundled_matrix_dir()) / NGC_FILE)


def load_implied_tables() -> None:
    """Read both tables now: a broken one is bad input (exit 2) up front, not a crash later."""
    bundled_keras_tensorflow_table()
    bundled_ngc_table()

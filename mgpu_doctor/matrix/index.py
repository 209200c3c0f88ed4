"""The known issues compiled once per matrix version, so that a check's cost does not grow with
the matrix.

Loading the matrix validates every entry and matching assesses every entry: a third of
`check --quick` with 400 entries, growing with each entry added. The index is built from
:func:`~mgpu_doctor.matrix.known_issues.load_matrix`'s result the first time a set of matrix
files is seen, and kept beside the parse cache (:func:`~mgpu_doctor.matrix.parse_cache.cache_dir`)
under a key made of every file's SHA-256, the directories read, and the SHA-256 of the code that
validates them: an edited, added or removed file (or an upgrade) is another key, never a stale hit.

An index holds each entry pickled on its own, bucketed by the version keys its ``affects`` names
and, within a key, by its specifier text (an entry whose ``affects`` lists alternatives once per
alternative: a slot each). :meth:`MatrixIndex.candidates` unpickles only the
entries that could be reported for an environment (see there), so a run reads a few dozen
entries whatever the size of the matrix. The file is a small header (the buckets, where each
entry lies, its CRC-32) checked by its SHA-256, then the entries one after another, mapped and
never read whole: a run reads the header and its candidates (with 5,000 entries more, reading,
checking and unpickling the whole file had cost 28 ms a run). An entry whose bytes do not match
its CRC-32 is a damaged file: the index is rebuilt from the matrix, never an error.

Deciding which entries are candidates costs one specifier test per distinct range of a known
version's key, which grows with the matrix: the answer, a pure function of the index and the
known versions, is kept too (``candidates-*.json``), so the next run on the same versions
reads it. Best effort like the parse cache: an index that cannot be read or written
costs the full load, never an error.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import mmap
import pickle
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from mgpu_doctor.matrix import known_issues, parse_cache, ranges, toml_files, vocabulary
from mgpu_doctor.matrix.environment import Environment
from mgpu_doctor.matrix.known_issues import KnownIssue, Matrix, Problem, known_issue_paths, load_matrix
from mgpu_doctor.model import distributions, evidence, versions
from mgpu_doctor.process import inputs
from mgpu_doctor.process.cache_home import keep_file
from mgpu_doctor.record import field, record, replace

_T = TypeVar("_T")

FORMAT = 7  # bump when what an index holds changes (7: a header, then the entries mapped)
MAX_INDEXES = 8  # a few versions of the bundled matrix, with and without a team's own
MAX_CANDIDATE_LISTS = 32  # a few environments (interpreters, queries) per index
# The modules whose code decides what a matrix file yields (validation, vocabulary, limits): their
# text is part of the key, so a changed rule rebuilds the index even when no file changed.
_DECIDING_CODE = (known_issues, ranges, vocabulary, toml_files, versions, evidence, distributions, inputs)
# An entry naming TensorFlow can be "undecided" without a TensorFlow version (needs_tensorflow).
_UNDECIDED_KEY = "tensorflow"
_OPEN = "\0"  # a bucket's text, then this and "open" for a range open above its last report


@record(frozen=False)
class MatrixIndex:
    """The known issues of one matrix version, each entry unpickled only when asked for."""

    key: str  # what the index was built from (see _key); "" for one that is not kept
    sources: tuple[str, ...]
    problems: tuple[Problem, ...]
    spans: tuple[tuple[int, int, int], ...]  # each entry's (start, length, CRC-32) in data, in order
    # version key -> a range as read (its specifier text, OPEN when open above its last report)
    # -> the slots whose affects reads so
    by_key: dict[str, dict[str, tuple[int, ...]]]
    # slot -> the position of its entry: one slot per entry, one per alternative of an entry whose
    # affects lists alternatives
    slots: tuple[int, ...] = ()
    # the ids merged into another entry -> the entry each became (an acknowledgement naming one)
    replaced: dict[str, str] = field(default_factory=dict)
    # the entries pickled one after another (in memory, or the kept file mapped past its header)
    data: bytes | memoryview = field(default=b"", repr=False)
    _entries: dict[int, KnownIssue] = field(default_factory=dict, repr=False)
    # builds the index again from the matrix, for a kept file found damaged while it is read
    _rebuild: Callable[[], MatrixIndex] | None = field(default=None, repr=False)

    @property
    def count(self) -> int:
        return len(self.spans)

    def entry(self, position: int) -> KnownIssue:
        found = self._entries.get(position)
        if found is None:
            start, length, crc = self.spans[position]
            blob = self.data[start:start + length]
            try:
                intact = len(blob) == length and zlib.crc32(blob) == crc
                found = pickle.loads(blob) if intact else None
            except Exception:  # noqa: BLE001 - a damaged entry of a kept file: rebuilt below
                found = None
            if not isinstance(found, KnownIssue):
                self._recover()
                return self.entry(position)
            self._entries[position] = found
        return found

    def _recover(self) -> None:
        """The entries again from the matrix: the kept file was damaged after its header."""
        if self._rebuild is None:
            raise RuntimeError("an index built in memory holds an entry it cannot read")
        fresh, self._rebuild = self._rebuild(), None
        self.data, self.spans = fresh.data, fresh.spans

    def _read(self, positions: list[int]) -> tuple[KnownIssue, ...]:
        """The entries at ``positions``, in the matrix's order (``~i``: entry ``i``, only counted)."""
        return tuple(self.entry(i if i >= 0 else ~i) for i in positions)

    def matrix(self) -> Matrix:
        """Every entry: what :func:`load_matrix` gives."""
        return Matrix(tuple(self.entry(i) for i in range(self.count)), self.problems, self.sources)

    def candidates(self, env: Environment) -> tuple[KnownIssue, ...]:
        """The entries that may be reported for ``env``, in the matrix's order; the others cannot be.

        Every entry names at least one version range, and one is reported (matches, or cannot
        tell while a named version agrees or straddles) only when some version key it names is
        known (``env.versions`` or ``env.ranges``); an entry naming TensorFlow may also be listed
        as waiting on a TensorFlow version when none is known. Neither holds when a known version
        is outside one of its ranges. So: the entries naming a known key (and TensorFlow's when
        TensorFlow is not known), less those a known version rules out, each specifier text
        decided once. An entry that a known version places further past its last report than the
        next series (no fix known) can only be counted in one line (:meth:`split_candidates` keeps
        those apart, so that a kept count spares reading them).
        """
        return self._read(self._positions(env))

    def split_candidates(self, env: Environment) -> tuple[tuple[KnownIssue, ...], tuple[int, ...]]:
        """The candidates that may be shown for ``env`` (read whole), and the positions of those a
        known version places further past their last report, which can only be counted (read them
        with :meth:`counted_entries` only when the count is not kept already)."""
        positions = self._positions(env)
        return self._read([i for i in positions if i >= 0]), tuple(~i for i in positions if i < 0)

    def counted_entries(self, positions: tuple[int, ...]) -> tuple[KnownIssue, ...]:
        return tuple(self.entry(i) for i in positions)

    def kept_lines(self, name: str, asked: str, compute: Callable[[], list[str]]) -> list[str]:
        """``compute()``, kept beside the index for this matrix version and ``asked`` (everything
        else the lines depend on): the same question on the next run reads the answer."""
        return self._kept(name, asked, lambda kept: all(isinstance(line, str) for line in kept), compute)

    def _positions(self, env: Environment) -> list[int]:
        count = self.count

        def positions(kept: list[Any]) -> bool:
            return all(type(i) is int and -count <= i < count for i in kept)

        asked = [sorted(env.versions.items()), sorted(env.ranges.items())]
        return self._kept("candidates", asked, positions, lambda: self._candidate_positions(env))

    def _kept(self, name: str, asked: object, valid: Callable[[list[Any]], bool],
              compute: Callable[[], list[_T]]) -> list[_T]:
        """``compute()``, or the list kept as ``name`` for this index and ``asked`` when ``valid``."""
        directory = parse_cache.cache_dir()
        if not self.key or directory is None:
            return compute()
        digest = hashlib.sha256(json.dumps([self.key, asked]).encode()).hexdigest()
        path = directory / f"{name}-{digest}.json"
        try:
            kept = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(kept, list) and valid(kept):
                return kept
        except (OSError, ValueError):
            pass
        value = compute()
        keep_file(path, json.dumps(value).encode(), f"{name}-*.json", MAX_CANDIDATE_LISTS)
        return value

    def _candidate_positions(self, env: Environment) -> list[int]:
        """Decided per slot (an alternative of an entry), then per entry: a candidate where one of
        its slots is, only counted where every such slot is."""
        known = set(env.versions) | set(env.ranges)
        wanted: set[int] = set()
        for key in known | {_UNDECIDED_KEY}:  # TensorFlow's entries: not known, they may wait on it
            for slots in self.by_key.get(key, {}).values():
                wanted.update(slots)
        counted: set[int] = set()
        for key, version in env.versions.items():
            for bucket, slots in self.by_key.get(key, {}).items():
                text, _, open_above = bucket.partition(_OPEN)
                place = ranges.reading(key, text, fixed=not open_above).place(version)
                if place is ranges.Place.OUT:
                    wanted.difference_update(slots)
                elif place is ranges.Place.OLDER_REPORT:
                    counted.update(slots)
        shown = {self.slots[s] for s in wanted - counted}
        entries = {self.slots[s] for s in wanted}
        return sorted((i if i in shown else ~i for i in entries), key=lambda i: i if i >= 0 else ~i)


def compile_index(matrix: Matrix) -> MatrixIndex:
    """The index of a loaded matrix."""
    by_key: dict[str, dict[str, list[int]]] = {}
    slots: list[int] = []
    for position, issue in enumerate(matrix.issues):
        for view in issue.views():
            for key, text in view.affects.items():
                bucket = text + (_OPEN + "open" if view.reading(key).open_above else "")
                by_key.setdefault(key, {}).setdefault(bucket, []).append(len(slots))
            slots.append(position)
    dump = functools.partial(pickle.dumps, protocol=pickle.HIGHEST_PROTOCOL)
    blobs = [dump(i) for i in matrix.issues]
    starts = [0]
    for blob in blobs:
        starts.append(starts[-1] + len(blob))
    spans = tuple((start, len(blob), zlib.crc32(blob)) for start, blob in zip(starts, blobs, strict=False))
    return MatrixIndex("", matrix.sources, matrix.problems, spans,
                       {k: {t: tuple(p) for t, p in texts.items()} for k, texts in by_key.items()},
                       replaced=matrix.replaced, slots=tuple(slots), data=b"".join(blobs))


# One process reads one matrix version many times (tests, `fleet`): the index is kept per key.
_LOADED: dict[str, MatrixIndex] = {}


def load_index(bundled: Path, extra: Sequence[Path] = ()) -> MatrixIndex:
    """The index of the bundled matrix plus a team's own directories (``--matrix DIR``): from the
    cache when these exact files were indexed before, else loaded, compiled and kept."""
    key = _key(bundled, extra)
    if key is None:  # a file that cannot be read: load_matrix says which, as a problem
        return compile_index(load_matrix(bundled, tuple(extra)))
    if key in _LOADED:
        return _LOADED[key]
    directory = parse_cache.cache_dir()
    path = directory / f"index-{key}.pickle" if directory is not None else None
    index = _read(path) if path is not None else None
    if index is None:
        index = replace(compile_index(load_matrix(bundled, tuple(extra))), key=key)
        if path is not None and _key(bundled, extra) == key:  # no file changed while it was read
            _write(path, index)
    elif path is not None:
        index._rebuild = functools.partial(_rebuilt, path, bundled, tuple(extra), key)
    _LOADED[key] = index
    return index


def _rebuilt(path: Path, bundled: Path, extra: tuple[Path, ...], key: str) -> MatrixIndex:
    """The index compiled again, written over the damaged file ``path``."""
    index = replace(compile_index(load_matrix(bundled, extra)), key=key)
    if _key(bundled, extra) == key:
        _write(path, index)
    else:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)
    return index


def _key(bundled: Path, extra: Sequence[Path]) -> str | None:
    """The SHA-256 of what decides the index: every file's text with its path, the directories,
    and the deciding code; None when a file cannot be read."""
    digest = hashlib.sha256(f"{FORMAT}\0{bundled}\0{[str(d) for d in extra]}".encode())
    try:
        for module in _DECIDING_CODE:
            digest.update(Path(module.__file__ or "").read_bytes())
        for directory in (bundled, *extra):
            for path in known_issue_paths(directory):
                digest.update(f"\0{path}\0".encode())
                digest.update(hashlib.sha256(path.read_bytes()).digest())
            digest.update(b"\0/")
    except OSError:
        return None
    return digest.hexdigest()


_HEAD = 40  # the header's SHA-256 (32 bytes), then its length (8 bytes, little-endian)


def _read(path: Path) -> MatrixIndex | None:
    """The index kept at ``path``; None (and the file dropped) for anything but an intact header
    and a file as long as the header says.

    The file is the header's SHA-256 and length, the header (the index without its entries),
    then the entries, each checked by its CRC-32 when it is read (:meth:`MatrixIndex.entry`):
    damage is found before anything damaged is unpickled. It is written by this user into their
    own cache directory (0700).
    """
    index = None
    try:
        with open(path, "rb") as kept:
            mapped = mmap.mmap(kept.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # absent, unreadable, empty
        mapped = None
    if mapped is not None and len(mapped) >= _HEAD:
        length = int.from_bytes(mapped[32:_HEAD], "little")
        header = mapped[_HEAD:_HEAD + length]
        if len(header) == length and hashlib.sha256(header).digest() == mapped[:32]:
            with contextlib.suppress(Exception):  # an index of another build: rebuilt, never an error
                index = pickle.loads(header)
        data = memoryview(mapped)[_HEAD + length:]
        if isinstance(index, MatrixIndex) and len(data) == sum(span[1] for span in index.spans):
            index.data = data
        else:
            index = None
    if not isinstance(index, MatrixIndex) or f"index-{index.key}.pickle" != path.name:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)
        return None
    return index


def _write(path: Path, index: MatrixIndex) -> None:
    header = pickle.dumps(replace(index, data=b"", _entries={}, _rebuild=None), pickle.HIGHEST_PROTOCOL)
    data = bytes(index.data)
    head = hashlib.sha256(header).digest() + len(header).to_bytes(8, "little")
    keep_file(path, head + header + data, "index-*.pickle", MAX_INDEXES)



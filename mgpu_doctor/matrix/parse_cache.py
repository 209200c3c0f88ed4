"""Parsed matrix files kept between runs.

`tomllib` is pure Python: parsing the bundled matrices (a third of a megabyte) cost
`check --quick` about 60 ms, a sixth of its run, every run, for files that change only with an
upgrade. An entry is one file's parsed content as JSON, named by the SHA-256 of the file's
text, so an edited or upgraded file is a miss, never a stale hit. Everything here is best
effort: a cache that cannot be read or written costs the parse, never an error.

Kept in the ``matrix`` folder of the doctor's cache (:mod:`mgpu_doctor.process.cache_home`: where
it is, and how to move it or turn it off).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mgpu_doctor.process.cache_home import cache_home, keep_file

FORMAT = 2  # bump when what an entry holds changes (2: the value's own SHA-256)
MAX_ENTRIES = 64  # the bundled files of a few versions and a team's own; the oldest go first

Parse = Callable[[str], dict[str, Any]]


def cache_dir() -> Path | None:
    """Where parsed files are kept; None: nowhere (turned off, or no home directory)."""
    return cache_home("matrix")


def cached_parse(text: str, parse: Parse) -> dict[str, Any]:
    """``parse(text)``, from the cache when this exact text was parsed before."""
    directory = cache_dir()
    if directory is None:
        return parse(text)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    entry = directory / f"{digest}.json"
    found = _read(entry, digest)
    if found is not None:
        return found
    value = parse(text)
    _write(entry, digest, value)
    return value


def _read(entry: Path, digest: str) -> dict[str, Any] | None:
    """The entry's value; None (and the entry dropped) for anything but an intact entry of this text:
    a damaged value would otherwise be blamed on the matrix file it stands for."""
    try:
        text = entry.read_text(encoding="utf-8")
    except (OSError, ValueError):  # absent, unreadable, not UTF-8
        _drop(entry)
        return None
    head, marker, tail = text.partition(_VALUE_KEY)
    value_text = tail.removesuffix("}")
    try:
        header = json.loads(head + '"": null}') if marker else None
        value = json.loads(value_text) if (
            isinstance(header, dict) and header.get("format") == FORMAT and header.get("sha256") == digest
            and header.get("value_sha256") == _sha256(value_text)) else None
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        _drop(entry)
        return None
    return value


_VALUE_KEY = '"value": '


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _drop(entry: Path) -> None:
    with contextlib.suppress(OSError):
        entry.unlink(missing_ok=True)


def _write(entry: Path, digest: str, value: dict[str, Any]) -> None:
    try:  # TOML's inf and nan are written as JSON's Infinity and NaN, which json reads back
        value_text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):  # a TOML date or time: not JSON, so not kept
        return
    # One JSON object, the value last, after its own checksum: damage anywhere in it is found.
    header = json.dumps({"format": FORMAT, "sha256": digest, "value_sha256": _sha256(value_text)})
    text = f"{header[:-1]}, {_VALUE_KEY}{value_text}}}"
    keep_file(entry, text.encode("utf-8"), "*.json", MAX_ENTRIES)



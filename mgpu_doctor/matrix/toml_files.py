"""Reading TOML data files (matrices, acknowledge files) within the input limits, and checking
their ``schema_version``: `tomllib` on Python 3.11+, the `tomli` backport (same API) on 3.10."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mgpu_doctor.matrix.parse_cache import cached_parse
from mgpu_doctor.process.inputs import InputError, read_text


class TOMLDecodeError(ValueError):
    """Not valid TOML; the message is the parser's."""


def _loads(text: str) -> dict[str, Any]:
    # The parser is imported on first use: a file the parse cache knows needs none.
    if sys.version_info >= (3, 11):
        import tomllib as toml
    else:  # pragma: no cover - exercised only on Python 3.10
        import tomli as toml
    try:
        return toml.loads(text)
    except toml.TOMLDecodeError as exc:
        raise TOMLDecodeError(str(exc)) from None


def load_toml(path: Path, cached: bool = False) -> dict[str, Any]:
    """Parse one TOML file within the input limits (:mod:`mgpu_doctor.process.inputs`); ``cached``: a
    text parsed before comes from :mod:`~mgpu_doctor.matrix.parse_cache`.

    Raises OSError, TOMLDecodeError, or :class:`~mgpu_doctor.process.inputs.InputError` (not UTF-8,
    too large, nested too deeply, an integer too long to convert).
    """
    text = read_text(path, "a TOML file")
    try:
        return cached_parse(text, _loads) if cached else _loads(text)
    except RecursionError:
        raise InputError(f"{path}: nested too deeply to read (edited or corrupted?)") from None
    except TOMLDecodeError:
        raise
    except ValueError as exc:  # int() of a number with more than 4300 digits
        raise InputError(f"{path}: holds a number too long to read ({exc.__class__.__name__}: "
                         "more digits than any value needs)") from None


class DataFileError(Exception):
    """A data file unusable as a whole; ``field`` is "" or the top-level key at fault."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


def read_versioned(path: Path, schema_version: int) -> dict[str, Any]:
    """A TOML data file whose ``schema_version`` must be the one this mgpu-doctor reads."""
    try:
        data = load_toml(path, cached=True)
    except FileNotFoundError:
        raise DataFileError("no such file") from None
    except TOMLDecodeError as exc:
        raise DataFileError(f"not valid TOML: {exc}") from None
    except InputError as exc:
        raise DataFileError(str(exc).removeprefix(f"{path}: ")) from None
    except OSError as exc:
        raise DataFileError(f"cannot read: {exc.strerror or exc}") from None
    version = data.get("schema_version")
    if version != schema_version:
        raise DataFileError(f"is {version!r}; this mgpu-doctor reads {schema_version}", "schema_version")
    return data

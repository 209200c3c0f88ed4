"""How a check names a library copy in its evidence: its path, version, and how it was found."""

from __future__ import annotations

from mgpu_doctor.environment.libraries_in_use import LibraryInUse
from mgpu_doctor.environment.library_copies import best_version
from mgpu_doctor.environment.readings import ResolvedVersion
from mgpu_doctor.model.snapshot import LibraryCopy


def where_found(copy: LibraryCopy, how: str) -> str:
    version, source = best_version(copy)
    return f"{copy.path} ({version or 'version unknown'}{' from ' + source if source else ''}; {how})"


def in_use_text(lib: LibraryInUse | None, value: ResolvedVersion) -> str:
    if lib is not None and lib.copy is not None:
        return where_found(lib.copy, lib.how())
    return value.describe()

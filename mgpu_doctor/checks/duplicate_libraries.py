"""Several versions of one CUDA library on the search path (which one wins), and copies that fail to load."""

from __future__ import annotations

import shlex

from packaging.version import Version

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.checks.facts_access import need_libraries
from mgpu_doctor.checks.library_evidence import where_found
from mgpu_doctor.environment.library_copies import MAIN_LIBRARIES, best_version, copies_of, major_of
from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.model.snapshot import LibraryCopy, Snapshot
from mgpu_doctor.model.versions import parse_version

CODES = (
    "libraries.one-copy",
    "libraries.several-majors",
    "libraries.shadowed",
    "libraries.load-failed",
)


def check_library_copies(snapshot: Snapshot) -> list[Finding]:
    """Several different versions of one library on the search path, and which one wins."""
    libs = need_libraries(snapshot)
    findings = []
    for name in MAIN_LIBRARIES:
        on_path = [c for c in copies_of(libs, name) if c.on_search_path]
        by_soname: dict[str, list[LibraryCopy]] = {}
        for copy in on_path:
            by_soname.setdefault(copy.soname, []).append(copy)
        for soname, copies in by_soname.items():
            if len(copies) < 2 or not _differ(copies):
                continue
            win, rest = copies[0], copies[1:]
            findings.append(Finding(
                "libraries.shadowed", Severity.WARNING,
                f"{len(copies)} different {soname} on the library search path; "
                f"{best_version(win)[0] or 'the first'} from {win.found_by} wins",
                [f"wins: {where_found(win, win.found_by + ', first in search order')}"]
                + [f"shadowed: {where_found(c, c.found_by)}" for c in rest],
                fix=f"Keep one {soname}: remove the others from LD_LIBRARY_PATH / uninstall them, "
                "so what loads does not depend on the order of the search path.",
            ))
        majors = sorted({m for m in (major_of(c) for c in on_path) if m is not None})
        if name == "cudnn" and len(majors) > 1:
            findings.append(Finding(
                "libraries.several-majors", Severity.INFO,
                f"cuDNN {' and '.join(map(str, majors))} are both on the search path",
                [where_found(c, c.found_by) for c in on_path],
                fix="Fine when different programs need them; TensorFlow takes the major it was built for.",
            ))
    for copy in libs.copies:
        if copy.load_error:
            findings.append(Finding(
                "libraries.load-failed", Severity.ERROR if copy.on_search_path else Severity.WARNING,
                f"{copy.path} fails to load",
                [f"loader: {copy.load_error}", f"found by: {copy.found_by}"],
                fix="Reinstall the package that owns it (a truncated or wrong-architecture file, or a "
                "dependency missing from the search path: `ldd " + shlex.quote(copy.real_path) + "`).",
            ))
    if not findings:
        found = [n for n in MAIN_LIBRARIES if copies_of(libs, n)]
        if not found:
            raise CheckSkipped("no CUDA library found on this machine")
        findings.append(Finding(
            "libraries.one-copy", Severity.OK,
            f"{len(found)} {'library' if len(found) == 1 else 'libraries'}",
            [f"{n}: {len([c for c in copies_of(libs, n) if c.on_search_path])} on path, "
             f"{len(copies_of(libs, n))} found" for n in found],
        ))
    return findings


def _differ(copies: list[LibraryCopy]) -> bool:
    versions = [best_version(c)[0] for c in copies]
    known = [parse_version(v) for v in versions if v]
    if len(known) < len(copies):
        return len({c.real_path for c in copies}) > 1 and len(set(versions)) > 1
    base = known[0]
    return any(not _same_prefix(base, other) for other in known[1:] if base is not None and other is not None)


def _same_prefix(a: Version, b: Version) -> bool:
    """12.5 and 12.5.82 are the same version read from two places; 12.5 and 12.4 are not."""
    n = min(len(a.release), len(b.release))
    return a.release[:n] == b.release[:n]

"""LD_LIBRARY_PATH, CUDA_HOME and CUDA_PATH against the directories and the CUDA in use."""

from __future__ import annotations

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.checks.facts_access import need_libraries, need_machine
from mgpu_doctor.checks.library_evidence import where_found
from mgpu_doctor.environment.library_copies import best_version
from mgpu_doctor.environment.resolve import ResolvedEnvironment
from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.model.snapshot import DirKind
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.model.versions import major_minor

CODES = (
    "cuda-env.ok",
    "cuda-env.ld-library-path-missing",
    "cuda-env.cuda-home-missing",
    "cuda-env.cuda-home-mismatch",
)


def check_cuda_environment(env: ResolvedEnvironment) -> list[Finding]:
    """LD_LIBRARY_PATH entries that do not exist; CUDA_HOME pointing at another CUDA than is loaded."""
    snapshot = need_machine(env)
    libs = need_libraries(snapshot)
    findings = []
    missing = [d.path for d in libs.search_dirs if d.kind is DirKind.LD_LIBRARY_PATH and not d.exists]
    if missing:
        findings.append(Finding(
            "cuda-env.ld-library-path-missing", Severity.WARNING,
            f"LD_LIBRARY_PATH names {len(missing)} director{'y' if len(missing) == 1 else 'ies'} that "
            "do not exist",
            [f"missing: {p}" for p in missing],
            fix="Remove them or fix the path: a CUDA you meant to use is not being found there.",
        ))
    for var, kind in (("CUDA_HOME", DirKind.CUDA_HOME), ("CUDA_PATH", DirKind.CUDA_PATH)):
        home = snapshot.env.get(var)
        if not home:
            continue
        kit = next((t for t in libs.toolkits if t.kind is kind), None)
        if kit is None:
            findings.append(Finding(
                "cuda-env.cuda-home-missing", Severity.WARNING, f"{var}={home} does not exist",
                [f"{var}={home}"], fix=f"Point {var} at an installed CUDA toolkit, or unset it.",
            ))
            continue
        cudart = env.libraries.get("cudart")
        runtime = cudart.copy if cudart is not None else None
        how = cudart.how() if cudart is not None else ""
        if isinstance(kit.version, Unavailable) or runtime is None or not best_version(runtime)[0]:
            continue
        if major_minor(kit.version) != major_minor(best_version(runtime)[0]):
            findings.append(Finding(
                "cuda-env.cuda-home-mismatch", Severity.WARNING,
                f"{var} is CUDA {kit.version}, but the CUDA runtime in use is {best_version(runtime)[0]}",
                [f"{var}={home} (version {kit.version} from {kit.version_source})",
                 f"runtime: {where_found(runtime, how)}"],
                fix=f"Point {var} at the CUDA that is loaded, or put {home}/lib64 first on LD_LIBRARY_PATH: "
                "tools (ptxas, nvcc) and libraries should come from one CUDA.",
            ))
    if not findings:
        if not snapshot.env.get("LD_LIBRARY_PATH") and not any(snapshot.env.get(v) for v in
                                                               ("CUDA_HOME", "CUDA_PATH")):
            raise CheckSkipped("LD_LIBRARY_PATH, CUDA_HOME and CUDA_PATH are not set")
        findings.append(Finding("cuda-env.ok", Severity.OK,
                                "LD_LIBRARY_PATH and CUDA_HOME point at real directories"))
    return findings

"""The NVIDIA driver against the minimum the CUDA runtime in use needs (minimum drivers are data in
``matrices/compat/cuda-driver.toml``), and libcuda against the kernel driver.
"""

from __future__ import annotations

from packaging.version import Version

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.checks.facts_access import need_gpus
from mgpu_doctor.checks.library_evidence import in_use_text
from mgpu_doctor.checks.tensorflow_build import origin_text
from mgpu_doctor.environment.resolve import ResolvedEnvironment
from mgpu_doctor.matrix.compat_tables import CudaDriverTable, bundled_cuda_driver_table
from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.model.snapshot import LibraryFacts
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.model.versions import is_short, minor_text, parse_version
from mgpu_doctor.record import replace

CUDA_COMPAT_DOC = "https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html"


CODES = (
    "driver.ok",
    "driver.minor-compat",
    "driver.too-old",
    "driver.cuda-not-in-table",
    "driver.libcuda-mismatch",
    "driver.version-too-short",
    "driver.cuda-version-short",
)


def check_driver_for_cuda(env: ResolvedEnvironment) -> list[Finding]:
    """The driver against the minimum for the CUDA runtime in use, with minor-version compat."""
    snapshot = env.snapshot
    if snapshot is not None:
        need_gpus(snapshot)
    if not env.driver.known:
        missing = env.driver.missing
        raise CheckSkipped(missing.detail if missing is not None and missing.detail
                           else "driver version not known")
    runtime = env.cuda
    if not runtime.known:
        raise CheckSkipped("no CUDA runtime found and TensorFlow's build is unknown")
    table = bundled_cuda_driver_table()
    libcuda: list[Finding] = []
    if snapshot is not None and not isinstance(snapshot.libraries, Unavailable):
        libcuda = _libcuda_mismatch(snapshot.libraries, env.driver.text)
    if is_short(runtime.text, 2):
        return libcuda + _short_cuda(env, runtime.text, table)
    cuda = minor_text(runtime.text)
    return libcuda + _driver_against(env, cuda, table)


def _short_cuda(env: ResolvedEnvironment, text: str, table: CudaDriverTable) -> list[Finding]:
    """CUDA named by its major only ("11"): judged against every minor of it the table has; the
    one answer when they all give it, else "cannot tell" with the minors that fit and those that
    do not (CUDA 11 is not 11.0)."""
    major = int(text.split(".")[0])
    minors = table.minors(major)
    outcomes: dict[str, list[Finding]] = {}
    for minor in minors:
        try:
            outcomes[minor] = _driver_against(env, minor, table)
        except CheckSkipped:
            continue
    if not outcomes:
        raise CheckSkipped(f"CUDA {text} is not in the driver table ({table.origin})")
    verdicts = {minor: tuple(sorted(f.code for f in found)) for minor, found in outcomes.items()}
    shown = f"{minors[0]}-{minors[-1]}" if len(minors) > 1 else minors[0]
    note = f"CUDA {text} names no minor version: judged as every {major}.x in the table ({shown})"
    if len(set(verdicts.values())) == 1:
        found = outcomes[minors[-1]] if minors[-1] in outcomes else next(iter(outcomes.values()))
        return [replace(f, evidence=[*f.evidence, note]) for f in found]
    fits = [m for m, found in outcomes.items() if all(f.severity < Severity.WARNING for f in found)]
    short = [m for m in outcomes if m not in fits]
    driver_text = env.driver.text
    return [Finding(
        "driver.cuda-version-short", Severity.INFO,
        f"Cannot tell whether driver {driver_text} is new enough for CUDA {text}: enough for "
        f"{', '.join(fits) or 'none of its minors'}, not for {', '.join(short)}",
        [f"driver: {driver_text}", note]
        + [f"CUDA {m}: {found[0].title}" for m, found in outcomes.items() if found][:12],
        fix=f"Name the CUDA runtime's full version (`mgpu-doctor libs` reads it); for CUDA {short[0]} "
        "or newer, upgrade the driver.",
        links=[CUDA_COMPAT_DOC],
    )]


def _driver_against(env: ResolvedEnvironment, cuda: str, table: CudaDriverTable) -> list[Finding]:
    """The driver against the minimum for CUDA ``cuda`` (``X.Y``)."""
    runtime = env.cuda
    lib = env.libraries.get("cudart")
    if runtime.observed:
        origin = f"CUDA runtime {cuda}: {in_use_text(lib, runtime)}"
    else:
        origin = f"CUDA {cuda}: what TensorFlow was built for ({origin_text(runtime)})"
    need_driver = table.requirement(cuda)
    driver = env.driver.version
    driver_text = env.driver.text
    if need_driver is None or driver is None:
        raise CheckSkipped(f"cannot compare driver {driver_text!r} with CUDA {cuda!r}")
    supports = f" (supports CUDA up to {env.driver_cuda})" if env.driver_cuda else ""
    evidence = [f"driver: {driver_text}{supports}", origin]
    findings: list[Finding] = []
    upgrade = "Upgrade the NVIDIA driver"
    full = parse_version(need_driver.full_driver) if need_driver.full_driver else None
    compat = parse_version(need_driver.compat_driver) if need_driver.compat_driver else None
    if full is not None:
        evidence.append(f"CUDA {cuda} ships with driver {need_driver.full_driver} ({need_driver.full_release}"
                        + (", secondary source" if need_driver.full_confidence == "secondary" else "") + ")")
    if compat is not None:
        evidence.append(f"minor-version compatibility for CUDA {cuda.split('.')[0]}.x needs "
                        f"{need_driver.compat_driver}")
    links = list(dict.fromkeys(u for u in (need_driver.full_source, *need_driver.compat_sources)
                               if u.startswith("https://")))
    short = next((text for t, text in ((full, need_driver.full_driver), (compat, need_driver.compat_driver))
                  if t is not None and _names_less_than(driver, t)), None)
    if short is not None and not (full is not None and driver > full):
        findings.append(Finding(
            "driver.version-too-short", Severity.INFO,
            f"Driver {driver_text} names no patch level: cannot tell whether it reaches "
            f"{short} for CUDA {cuda}",
            evidence + [f"{driver_text}.x is below {short} for some x and not for others"],
            fix=f"Read the full version with `nvidia-smi --query-gpu=driver_version --format=csv`: "
            f"below {short}, upgrade the driver.",
            links=links or [CUDA_COMPAT_DOC],
        ))
    elif full is not None and driver >= full:
        findings.append(Finding("driver.ok", Severity.OK,
                                f"driver {driver_text}, CUDA {cuda}", evidence))
    elif full is None and compat is not None and driver >= compat:
        findings.append(Finding(
            "driver.cuda-not-in-table", Severity.INFO,
            f"CUDA {cuda} is not in the driver table; driver {driver_text} meets CUDA "
            f"{cuda.split('.')[0]}.x minor-version compatibility",
            evidence + [f"table: {table.origin}"],
            fix="If CUDA fails to initialise, upgrade the driver to the one that ships with this CUDA.",
            links=links or [CUDA_COMPAT_DOC],
        ))
    elif compat is not None and driver >= compat:
        findings.append(Finding(
            "driver.minor-compat", Severity.WARNING,
            f"Driver {driver_text} runs CUDA {cuda} only through minor-version compatibility",
            evidence + ["PTX built by a newer CUDA than the driver cannot be JIT-compiled; XLA then "
                        "disables parallel compilation or fails on such kernels"],
            fix=f"{upgrade} to {need_driver.full_driver or 'a ' + cuda + ' driver'} or newer "
            "(or use CUDA forward-compatibility packages on datacenter GPUs).",
            links=links or [CUDA_COMPAT_DOC],
        ))
    elif full is None and compat is None:
        raise CheckSkipped(f"CUDA {cuda} is not in the driver table ({table.origin})")
    else:
        minimum = min(filter(None, (need_driver.compat_driver, need_driver.full_driver)),
                      key=lambda v: parse_version(v) or Version("0"))
        findings.append(Finding(
            "driver.too-old", Severity.ERROR,
            f"Driver {driver_text} is too old for CUDA {cuda}: TensorFlow fails with "
            "'CUDA driver version is insufficient for CUDA runtime version'",
            evidence,
            fix=f"{upgrade} to {minimum} or newer ({need_driver.full_driver or minimum} for every feature), "
            "or install a TensorFlow / CUDA runtime built for an older CUDA.",
            links=links or [CUDA_COMPAT_DOC],
        ))
    return findings


def _names_less_than(driver: Version, threshold: Version) -> bool:
    """A driver written shorter than the threshold it is the start of ("450.51" for 450.51.05)."""
    n = len(driver.release)
    return n < len(threshold.release) and driver.release == threshold.release[:n]


def _libcuda_mismatch(libs: LibraryFacts, driver: str) -> list[Finding]:
    """The user-space libcuda must be the same version as the kernel module NVML talks to."""
    copy = next((c for c in libs.copies if c.name == "cuda" and c.on_search_path), None)
    if copy is None:
        return []
    version = copy.versions.get("filename", "")
    if not version or parse_version(version) == parse_version(driver) or "compat" in copy.path:
        return []
    return [Finding(
        "driver.libcuda-mismatch", Severity.ERROR,
        f"libcuda {version} does not match the loaded kernel driver {driver}",
        [f"libcuda: {copy.path} ({copy.found_by})", f"kernel driver (NVML): {driver}"],
        fix="Reboot after a driver upgrade, or (in a container) do not install a driver inside the "
        "image: let the NVIDIA container runtime mount the host's libcuda.",
    )]

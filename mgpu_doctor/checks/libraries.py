"""CUDA, cuDNN, NCCL and the driver: the libraries found against TensorFlow's build and the driver.

Version tables (minimum drivers, TensorFlow's tested builds) are data in ``matrices/compat``;
what is here are the rules for comparing versions.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from packaging.version import Version

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.checks.facts_access import need, need_gpus, need_machine
from mgpu_doctor.facts import Unavailable
from mgpu_doctor.findings import Finding, Severity
from mgpu_doctor.library_model import MAIN_LIBRARIES, best_version, copies_of, cuda_major_of, major_of
from mgpu_doctor.matrix.compat import bundled_cuda_driver_table
from mgpu_doctor.matrix.versions import Tri, parse_version, version_in
from mgpu_doctor.resolve import LibraryInUse, ResolvedEnvironment, ResolvedVersion
from mgpu_doctor.snapshot import DirKind, LibraryCopy, LibraryFacts, Snapshot

CUDA_COMPAT_DOC = "https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html"
TF_SOURCE_DOC = "https://www.tensorflow.org/install/source#gpu"
TF_PIP_DOC = "https://www.tensorflow.org/install/pip"
# CUDA libraries TensorFlow's GPU support cannot start without (it logs "Cannot dlopen some GPU
# libraries" and registers no GPU).
REQUIRED = ("cudart", "cublas", "cublasLt", "cufft", "cusolver", "cusparse", "cudnn")
# Loading an older minor than TensorFlow was built with: cuDNN refuses ("CuDNN library needs to
# have matching major version and equal or higher minor version"); CUDA libraries usually start
# but may miss symbols or fixes the build relied on.
OLDER_MINOR_SEVERITY = {"cudnn": Severity.ERROR}


def need_libraries(snapshot: Snapshot) -> LibraryFacts:
    return need(snapshot.libraries, "CUDA library facts")


def need_some_gpu(snapshot: Snapshot) -> None:
    """Skip on a machine without NVIDIA GPUs: no CUDA library is used there, missing is fine.

    An NVML that *failed* does not skip: the GPUs may well be there.
    """
    nvml = snapshot.nvml
    if isinstance(nvml, Unavailable) and nvml.reason == "absent":
        raise CheckSkipped("no NVIDIA driver: TensorFlow runs on the CPU and loads no CUDA library")
    if not isinstance(nvml, Unavailable) and not nvml.gpus:
        raise CheckSkipped("no GPU found by NVML: TensorFlow loads no CUDA library")


@dataclass(frozen=True)
class BuiltFor:
    """What TensorFlow was built against, and where that came from."""

    tensorflow: str
    cuda: str  # "12.5"
    cudnn: str  # "9.3" ("9" when only the major is known)
    source: str


def built_for(env: ResolvedEnvironment) -> BuiltFor:
    """TensorFlow's CUDA/cuDNN as resolved (build info, refined by the tested-builds table)."""
    if env.cpu_only_build:
        raise CheckSkipped(f"TensorFlow {env.tensorflow.text} is a CPU-only build")
    if not env.built_cuda.known:
        if not env.tensorflow.known:
            raise CheckSkipped(f"TensorFlow's build is unknown ({env.tensorflow.describe()})")
        missing = env.built_cuda.missing
        raise CheckSkipped(missing.detail if missing is not None else "TensorFlow's build is unknown")
    cuda, cudnn = env.built_cuda, env.built_cudnn
    source = _origin_text(cuda)
    if cudnn.known and _origin_text(cudnn) != source:
        source += f"; cuDNN {cudnn.text} from {_origin_text(cudnn)}"
    return BuiltFor(env.tensorflow.text, cuda.text, cudnn.text if cudnn.known else "", source)


def _origin_text(value: ResolvedVersion) -> str:
    chosen = value.chosen
    if chosen is None:
        return "not known"
    if chosen.where and chosen.origin.name == "TESTED_BUILD":
        return f"tested build table ({chosen.where})"
    return chosen.origin.value + (f" ({chosen.where})" if chosen.where else "")


def _minor(text: str) -> str:
    version = parse_version(text)
    return f"{version.major}.{version.minor}" if version is not None else text


def _mm(text: str) -> tuple[int, int] | None:
    version = parse_version(text)
    if version is None:
        return None
    return version.major, version.minor


def _where(copy: LibraryCopy, how: str) -> str:
    version, source = best_version(copy)
    return f"{copy.path} ({version or 'version unknown'}{' from ' + source if source else ''}; {how})"


def _in_use_text(lib: LibraryInUse | None, value: ResolvedVersion) -> str:
    if lib is not None and lib.copy is not None:
        return _where(lib.copy, lib.how())
    return value.describe()


BUILD_CODES = (
    "libraries.match",
    "libraries.missing",
    "libraries.major-mismatch",
    "libraries.older-minor",
    "libraries.newer-minor",
    "libraries.version-unknown",
)


def check_tensorflow_build_libraries(env: ResolvedEnvironment) -> list[Finding]:
    """The libraries in use (or named in a query) against the CUDA/cuDNN TensorFlow was built for."""
    snapshot = env.snapshot
    if snapshot is not None:
        need_libraries(snapshot)
        need_some_gpu(snapshot)
    built = built_for(env)
    findings: list[Finding] = []
    cuda_major = env.built_cuda.version.major if env.built_cuda.version is not None else None
    wheel_hint = f"pip install 'tensorflow[and-cuda]=={built.tensorflow}'"
    for name, value, expected in (("cudart", env.cuda, built.cuda), ("cudnn", env.cudnn, built.cudnn)):
        lib = env.libraries.get(name)
        if lib is not None and lib.copy is None:
            continue  # missing: reported below
        if not value.observed and not (lib is not None and lib.copy is not None):
            continue  # nothing in use is known (a query that does not name it)
        evidence = [f"built for: {('cuDNN ' + built.cudnn) if name == 'cudnn' else 'CUDA ' + built.cuda} "
                    f"({built.source})", f"in use: {_in_use_text(lib, value)}"]
        findings.extend(_compare(name, expected, value.text if value.observed else "", evidence, built,
                                 wheel_hint))
    missing = [n for n in REQUIRED if snapshot is not None and
               (n not in env.libraries or env.libraries[n].copy is None)]
    for name in MAIN_LIBRARIES:
        lib = env.libraries.get(name)
        if name in ("cuda", "cudart", "cudnn") or lib is None or lib.copy is None:
            continue
        belongs = cuda_major_of(lib.copy)
        if cuda_major is not None and belongs is not None and belongs != cuda_major:
            findings.append(Finding(
                "libraries.major-mismatch", Severity.ERROR,
                f"lib{name} in use is for CUDA {belongs}, TensorFlow {built.tensorflow} was built for "
                f"CUDA {built.cuda}",
                [f"built for: CUDA {built.cuda} ({built.source})", f"in use: {_where(lib.copy, lib.how())}"],
                fix=f"{wheel_hint}, or put CUDA {cuda_major}'s lib{name} first on LD_LIBRARY_PATH.",
                links=[TF_SOURCE_DOC],
            ))
    if missing:
        findings.append(_missing_finding(env, built, missing, wheel_hint))
    if not findings and snapshot is None and not (env.cuda.observed or env.cudnn.observed):
        raise CheckSkipped("no CUDA runtime or cuDNN version named")
    if not any(f.severity > Severity.INFO for f in findings):
        findings.append(Finding(
            "libraries.match", Severity.OK,
            f"CUDA {built.cuda}, cuDNN {built.cudnn} for TensorFlow {built.tensorflow}",
            [f"built for: CUDA {built.cuda}, cuDNN {built.cudnn} ({built.source})"],
        ))
    return findings


def _missing_finding(
    env: ResolvedEnvironment, built: BuiltFor, missing: list[str], wheel_hint: str
) -> Finding:
    others = [c for name in missing if name in env.libraries for c in env.libraries[name].others]
    why = [env.libraries[n].why_none for n in missing if n in env.libraries and env.libraries[n].why_none]
    return Finding(
        "libraries.missing", Severity.ERROR,
        f"{', '.join('lib' + n for n in missing)} not on the library search path: TensorFlow "
        f"{built.tensorflow} will not use the GPUs",
        [f"TensorFlow {built.tensorflow} was built for CUDA {built.cuda}, cuDNN {built.cudnn} "
         f"({built.source})"]
        + why[:4]
        + [f"present, not used: {_where(c, c.found_by if not c.on_search_path else 'another soname')}"
           for c in others][:6],
        fix=f"{wheel_hint}, or add the directories holding CUDA {built.cuda} / cuDNN {built.cudnn} "
        "libraries to LD_LIBRARY_PATH (`mgpu-doctor libs` shows what is where).",
        links=[TF_PIP_DOC],
    )


def _compare(name: str, expected: str, found: str, evidence: list[str], built: BuiltFor,
             wheel_hint: str) -> list[Finding]:
    want = _mm(expected)
    have = _mm(found)
    label = "cuDNN" if name == "cudnn" else "the CUDA runtime"
    if want is None or have is None:
        return [Finding(
            "libraries.version-unknown", Severity.WARNING,
            f"Cannot tell which version lib{name} is; TensorFlow expects {expected}",
            evidence, fix=f"Run `mgpu-doctor libs` without --quick to load it and read its version; "
            f"or reinstall with {wheel_hint}.",
        )]
    only_major = "." not in expected
    if have[0] != want[0]:
        return [Finding(
            "libraries.major-mismatch", Severity.ERROR,
            f"{label} in use is {found}, TensorFlow {built.tensorflow} was built for {expected}",
            evidence, fix=f"{wheel_hint}, or put the {expected} lib{name} first on LD_LIBRARY_PATH.",
            links=[TF_SOURCE_DOC],
        )]
    if only_major or have[1] == want[1]:
        return []
    if have[1] < want[1]:
        severity = OLDER_MINOR_SEVERITY.get(name, Severity.WARNING)
        return [Finding(
            "libraries.older-minor", severity,
            f"{label} in use ({found}) is older than the {expected} TensorFlow {built.tensorflow} was "
            "built with" + (": TensorFlow refuses to use it" if severity is Severity.ERROR else ""),
            evidence, fix=f"Install {label} {expected} or newer within {want[0]}.x: {wheel_hint}.",
            links=[TF_SOURCE_DOC],
        )]
    return [Finding(
        "libraries.newer-minor", Severity.INFO,
        f"{label} in use ({found}) is newer than the {expected} TensorFlow was built with (compatible)",
        evidence,
    )]


AND_CUDA_CODES = ("and-cuda.ok", "and-cuda.missing", "and-cuda.out-of-range")


def check_and_cuda_wheels(env: ResolvedEnvironment) -> list[Finding]:
    """The `tensorflow[and-cuda]` pins of TensorFlow against the nvidia-* wheels installed (or named)."""
    if env.snapshot is not None:
        need_some_gpu(env.snapshot)
    if not env.tensorflow.known:
        raise CheckSkipped("no TensorFlow distribution installed")
    tf_name = env.tensorflow_distribution or "tensorflow"
    tf_version = env.tensorflow.text
    pins = env.and_cuda_pins
    if not pins:
        raise CheckSkipped(f"{tf_name} {tf_version} declares no [and-cuda] extra"
                           + ("" if env.snapshot is not None else " in the pins table"))
    from packaging.utils import canonicalize_name  # slow to import (packaging.tags); needed here only

    installed = {canonicalize_name(r.name): env.wheels.get(canonicalize_name(r.name)) for r in pins}
    if not any(installed.values()):
        raise CheckSkipped("no nvidia-* wheel of tensorflow[and-cuda] is installed (system CUDA is used)"
                           if env.snapshot is not None else "no nvidia-* wheel named")
    findings = []
    fix_all = f"pip install '{tf_name}[and-cuda]=={tf_version}'"
    source = f" ({env.and_cuda_source})" if env.and_cuda_source else ""
    locations = {} if env.snapshot is None or isinstance(env.snapshot.packages, Unavailable) \
        else env.snapshot.packages.locations
    for req in pins:
        name = canonicalize_name(req.name)
        have = installed[name]
        if not have:
            if env.snapshot is None:
                continue  # a query names only some wheels
            findings.append(Finding(
                "and-cuda.missing", Severity.ERROR,
                f"{name} is missing: tensorflow[and-cuda] {tf_version} needs {name}{req.specifier}",
                [f"{tf_name}=={tf_version} requires: {req}{source}"], fix=fix_all, links=[TF_PIP_DOC],
            ))
            continue
        if version_in(have, req.specifier) is Tri.NO:
            findings.append(Finding(
                "and-cuda.out-of-range", Severity.ERROR,
                f"{name} {have} is outside the range tensorflow[and-cuda] {tf_version} pins "
                f"({req.specifier})",
                [f"{tf_name}=={tf_version} requires: {req}{source}",
                 f"installed: {name}=={have}" + (f" in {locations[name]}" if name in locations else "")],
                fix=f"pip install '{name}{req.specifier}' (or: {fix_all})", links=[TF_PIP_DOC],
            ))
    if not findings:
        findings.append(Finding(
            "and-cuda.ok", Severity.OK,
            f"{sum(1 for v in installed.values() if v)} wheels, pinned by TensorFlow {tf_version}",
            [f"{canonicalize_name(r.name)}=={installed[canonicalize_name(r.name)]} ({r.specifier})"
             for r in pins if installed[canonicalize_name(r.name)]],
        ))
    return findings


COPIES_CODES = (
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
                [f"wins: {_where(win, win.found_by + ', first in search order')}"]
                + [f"shadowed: {_where(c, c.found_by)}" for c in rest],
                fix=f"Keep one {soname}: remove the others from LD_LIBRARY_PATH / uninstall them, "
                "so what loads does not depend on the order of the search path.",
            ))
        majors = sorted({m for m in (major_of(c) for c in on_path) if m is not None})
        if name == "cudnn" and len(majors) > 1:
            findings.append(Finding(
                "libraries.several-majors", Severity.INFO,
                f"cuDNN {' and '.join(map(str, majors))} are both on the search path",
                [_where(c, c.found_by) for c in on_path],
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


DRIVER_CODES = (
    "driver.ok",
    "driver.minor-compat",
    "driver.too-old",
    "driver.cuda-not-in-table",
    "driver.libcuda-mismatch",
    "driver.version-too-short",
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
    cuda = _minor(runtime.text)
    lib = env.libraries.get("cudart")
    if runtime.observed:
        origin = f"CUDA runtime {cuda}: {_in_use_text(lib, runtime)}"
    else:
        origin = f"CUDA {cuda}: what TensorFlow was built for ({_origin_text(runtime)})"
    table = bundled_cuda_driver_table()
    need_driver = table.requirement(cuda)
    driver = env.driver.version
    driver_text = env.driver.text
    if need_driver is None or driver is None:
        raise CheckSkipped(f"cannot compare driver {driver_text!r} with CUDA {cuda!r}")
    supports = f" (supports CUDA up to {env.driver_cuda})" if env.driver_cuda else ""
    evidence = [f"driver: {driver_text}{supports}", origin]
    findings: list[Finding] = []
    if snapshot is not None and not isinstance(snapshot.libraries, Unavailable):
        findings.extend(_libcuda_mismatch(snapshot.libraries, driver_text))
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


ARCH = re.compile(r"\b(sm|compute)_(\d+)([a-z]?)\b|\b(\d+)\.(\d)\b")


def compiled_archs(text: str) -> tuple[set[tuple[int, int, str]], set[tuple[int, int]]]:
    """(SASS (major, minor, suffix), PTX (major, minor)) from ``cuda_compute_capabilities``."""
    sass: set[tuple[int, int, str]] = set()
    ptx: set[tuple[int, int]] = set()
    for match in ARCH.finditer(text):
        if match.group(1):
            digits = match.group(2)
            cc = (int(digits[:-1]), int(digits[-1]))
            if match.group(1) == "sm":
                sass.add((cc[0], cc[1], match.group(3)))
            else:
                ptx.add(cc)
        else:
            sass.add((int(match.group(4)), int(match.group(5)), ""))
    return sass, ptx


ARCHITECTURE_CODES = ("gpu-arch.native", "gpu-arch.ptx-jit", "gpu-arch.unsupported")


def check_gpu_architectures(env: ResolvedEnvironment) -> list[Finding]:
    """Each GPU's compute capability against the architectures TensorFlow was compiled for."""
    by_cc: dict[str, list[str]] = {}
    if env.snapshot is not None:
        nvml = need_gpus(env.snapshot)
        if not env.compiled_archs:  # else from the build info, or the table when TF was not imported
            need(env.snapshot.tensorflow, "TensorFlow")
        for gpu in nvml.gpus:
            if isinstance(gpu.compute_capability, str):
                by_cc.setdefault(gpu.compute_capability, []).append(str(gpu.index))
        if not by_cc:
            raise CheckSkipped("NVML reports no compute capability")
    elif env.machine.compute_capabilities:
        by_cc = {cc: [] for cc in env.machine.compute_capabilities}
    else:
        raise CheckSkipped("no compute capability named")
    if env.cpu_only_build:
        raise CheckSkipped(f"TensorFlow {env.tensorflow.text} is a CPU-only build")
    text = env.compiled_archs
    if not text:
        raise CheckSkipped("TensorFlow's build info lists no CUDA architectures" if env.snapshot is not None
                           else f"no architecture table row for TensorFlow {env.tensorflow.describe()}")
    source = "" if env.compiled_archs_source == "TensorFlow's build info" \
        else f" ({env.compiled_archs_source})"
    sass, ptx = compiled_archs(text)
    findings = []
    fine: list[str] = []
    tf_version = env.tensorflow.text
    for cc_text, indices in sorted(by_cc.items()):
        cc = _mm(cc_text)
        if cc is None:
            continue
        which = (f"GPU {', '.join(indices)} (compute capability {cc_text})" if indices
                 else f"compute capability {cc_text}")
        evidence = [f"TensorFlow {tf_version} compiled for: {text}{source}"]
        if any((m, n) == cc for m, n, _ in sass):
            fine.append(f"{cc_text}: native sm_{cc[0]}{cc[1]}")
        elif any(m == cc[0] and n <= cc[1] and not s for m, n, s in sass):
            fine.append(f"{cc_text}: runs sm_{cc[0]}x code (binary compatible)")
        elif any(p <= cc for p in ptx):
            best = max(p for p in ptx if p <= cc)
            cache = env.snapshot.env.get("CUDA_CACHE_MAXSIZE", "(default)") if env.snapshot else "(not known)"
            findings.append(Finding(
                "gpu-arch.ptx-jit", Severity.WARNING,
                f"{which}: no native code in TensorFlow {tf_version}; its compute_{best[0]}{best[1]} PTX is "
                "JIT-compiled at start (minutes, on every new cache)",
                evidence + [f"CUDA_CACHE_MAXSIZE={cache}"],
                fix="Expect a slow first start; raise CUDA_CACHE_MAXSIZE (e.g. 4294967296) so the JIT result "
                "is kept, and use a TensorFlow release compiled for this GPU when there is one.",
            ))
        else:
            findings.append(Finding(
                "gpu-arch.unsupported", Severity.ERROR,
                f"{which}: TensorFlow {tf_version} has no code that runs on it",
                evidence,
                fix="Use a TensorFlow built for this GPU generation (an older release for old GPUs, a newer "
                "one for new GPUs), or build TensorFlow from source with TF_CUDA_COMPUTE_CAPABILITIES="
                f"{cc_text}.",
                links=[TF_SOURCE_DOC],
            ))
    if fine:
        findings.append(Finding("gpu-arch.native", Severity.OK,
                                f"compute capability {'; '.join(fine)} (TensorFlow {tf_version})",
                                [f"TensorFlow {tf_version} compiled for: {text}{source}"]))
    return findings


PTXAS_CODES = ("ptxas.ok", "ptxas.missing", "ptxas.older-than-runtime", "xla.cuda-data-dir-missing")


def check_ptxas(env: ResolvedEnvironment) -> list[Finding]:
    """ptxas for XLA, and --xla_gpu_cuda_data_dir pointing at a real CUDA directory."""
    snapshot = need_machine(env)
    libs = need_libraries(snapshot)
    if env.cpu_only_build:
        raise CheckSkipped(f"TensorFlow {env.tensorflow.text} is a CPU-only build: "
                           "XLA does not compile for GPUs")
    if isinstance(snapshot.nvml, Unavailable) or not snapshot.nvml.gpus:
        raise CheckSkipped("no GPU: XLA does not compile GPU kernels here")
    findings = []
    for entry in libs.search_dirs:
        if entry.kind is DirKind.XLA_DATA_DIR and not entry.exists:
            findings.append(Finding(
                "xla.cuda-data-dir-missing", Severity.ERROR,
                f"XLA_FLAGS --xla_gpu_cuda_data_dir={entry.path} points nowhere",
                [f"XLA_FLAGS={snapshot.env.get('XLA_FLAGS', '?')}"],
                fix="Point it at a CUDA toolkit directory that has bin/ptxas and nvvm/libdevice "
                "(for example /usr/local/cuda), or remove the flag.",
            ))
    ptxas = [c for c in libs.copies if c.name == "ptxas"]
    if not ptxas:
        findings.append(Finding(
            "ptxas.missing", Severity.WARNING,
            "No ptxas found: XLA (jit_compile, Keras 3's default on GPU) cannot compile kernels itself",
            ["searched: PATH, CUDA_HOME/CUDA_PATH, /usr/local/cuda*, the pip nvidia-cuda-nvcc wheel"],
            fix="pip install nvidia-cuda-nvcc-cu12 (or the CUDA toolkit), or compile with jit_compile=False.",
        ))
        return findings
    first = next((c for c in ptxas if c.on_search_path), ptxas[0])
    cudart = env.libraries.get("cudart")
    runtime = cudart.copy if cudart is not None else None
    ptx_version = best_version(first)[0]
    if runtime is not None and ptx_version:
        have, want = _mm(ptx_version), _mm(best_version(runtime)[0])
        if have is not None and want is not None and have < want:
            findings.append(Finding(
                "ptxas.older-than-runtime", Severity.WARNING,
                f"ptxas {ptx_version} is older than the CUDA runtime {best_version(runtime)[0]}",
                [f"ptxas: {_where(first, first.found_by)}", f"runtime: {_where(runtime, runtime.found_by)}"],
                fix="Put a ptxas at least as new as the runtime first on PATH (pip install "
                f"nvidia-cuda-nvcc-cu{want[0]}); XLA may refuse an old one or miscompile.",
            ))
    if not findings:
        findings.append(Finding("ptxas.ok", Severity.OK, f"version {ptx_version or 'unknown'}",
                                [_where(first, first.found_by)]))
    return findings


CUDA_ENV_CODES = (
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
        if _mm(kit.version) != _mm(best_version(runtime)[0]):
            findings.append(Finding(
                "cuda-env.cuda-home-mismatch", Severity.WARNING,
                f"{var} is CUDA {kit.version}, but the CUDA runtime in use is {best_version(runtime)[0]}",
                [f"{var}={home} (version {kit.version} from {kit.version_source})",
                 f"runtime: {_where(runtime, how)}"],
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

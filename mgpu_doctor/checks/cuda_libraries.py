"""The CUDA and cuDNN libraries in use against the versions TensorFlow was built for."""

from __future__ import annotations

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.checks.facts_access import need_libraries, need_some_gpu
from mgpu_doctor.checks.library_evidence import in_use_text, where_found
from mgpu_doctor.checks.tensorflow_build import TF_PIP_DOC, TF_SOURCE_DOC, BuiltFor, built_for
from mgpu_doctor.environment.library_copies import MAIN_LIBRARIES, cuda_major_of
from mgpu_doctor.environment.resolve import ResolvedEnvironment
from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.model.versions import is_short, major_minor

# CUDA libraries TensorFlow's GPU support cannot start without (it logs "Cannot dlopen some GPU
# libraries" and registers no GPU).
REQUIRED = ("cudart", "cublas", "cublasLt", "cufft", "cusolver", "cusparse", "cudnn")
# Loading an older minor than TensorFlow was built with: cuDNN refuses ("CuDNN library needs to
# have matching major version and equal or higher minor version"); CUDA libraries usually start
# but may miss symbols or fixes the build relied on.
OLDER_MINOR_SEVERITY = {"cudnn": Severity.ERROR}

CODES = (
    "libraries.match",
    "libraries.missing",
    "libraries.major-mismatch",
    "libraries.older-minor",
    "libraries.newer-minor",
    "libraries.version-unknown",
    "libraries.version-short",
    "libraries.soname-minor",
    "libraries.nvidia-build-only",
)
# Before CUDA 11, libcudart's file name carries the minor (libcudart.so.10.1): a TensorFlow built
# for 10.1 opens that file and no other, so 10.0 or 10.2 cannot stand in. From CUDA 11 on every
# 11.x provides libcudart.so.11.0 (minor version compatibility).
FIRST_MINOR_COMPATIBLE_CUDA = 11
NVIDIA_TF1_DOC = "https://docs.nvidia.com/deeplearning/frameworks/tensorflow-wheel-release-notes/"


def check_tensorflow_build_libraries(env: ResolvedEnvironment) -> list[Finding]:
    """The libraries in use (or named in a query) against the CUDA/cuDNN TensorFlow was built for."""
    snapshot = env.snapshot
    if snapshot is not None:
        if snapshot.pasted is None:  # a paste states versions, not library files
            need_libraries(snapshot)
        need_some_gpu(snapshot)
    built = built_for(env)
    findings: list[Finding] = []
    cuda_major = env.built_cuda.version.major if env.built_cuda.version is not None else None
    wheel_hint = install_hint(env, built)
    chosen = env.built_cuda.chosen
    assumed = chosen is not None and chosen.origin.name == "TESTED_BUILD"  # the pip wheel's, not read
    for name, value, expected in (("cudart", env.cuda, built.cuda), ("cudnn", env.cudnn, built.cudnn)):
        lib = env.libraries.get(name)
        if lib is not None and lib.copy is None:
            continue  # missing: reported below
        if not value.observed and not (lib is not None and lib.copy is not None):
            continue  # nothing in use is known (a query that does not name it)
        evidence = [f"built for: {('cuDNN ' + built.cudnn) if name == 'cudnn' else 'CUDA ' + built.cuda} "
                    f"({built.source})", f"in use: {in_use_text(lib, value)}"]
        found = value.text if value.observed else ""
        if name == "cudart" and assumed and _nvidia_only(built, found, env):
            findings.append(_nvidia_build_only(built, found, evidence))
            continue
        findings.extend(_compare(name, expected, found, evidence, built, wheel_hint))
    missing = [n for n in REQUIRED if snapshot is not None and not isinstance(snapshot.libraries, Unavailable)
               and (n not in env.libraries or env.libraries[n].copy is None)]
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
                [f"built for: CUDA {built.cuda} ({built.source})",
                 f"in use: {where_found(lib.copy, lib.how())}"],
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


def install_hint(env: ResolvedEnvironment, built: BuiltFor) -> str:
    """How to get the CUDA and cuDNN a TensorFlow was built for: its `[and-cuda]` extra where that
    release has one (2.14 on), else the versions themselves."""
    if env.and_cuda_pins:
        return f"pip install '{env.tensorflow_distribution or 'tensorflow'}[and-cuda]=={built.tensorflow}'"
    cudnn = f" and cuDNN {built.cudnn}" if built.cudnn else ""
    return (f"Install CUDA {built.cuda}{cudnn} (no pip extra installs them for TensorFlow "
            f"{built.tensorflow}: NVIDIA's installers, or conda's cudatoolkit and cudnn packages)")


def _nvidia_only(built: BuiltFor, found: str, env: ResolvedEnvironment) -> bool:
    """TensorFlow 1.x with a CUDA 11 or newer: only NVIDIA's build (nvidia-tensorflow, the NGC
    containers) runs there, while the build was assumed to be the pip wheel's (CUDA 10.0)."""
    have, tf = major_minor(found), major_minor(built.tensorflow)
    if have is None or tf is None or tf[0] != 1 or have[0] < FIRST_MINOR_COMPATIBLE_CUDA:
        return False
    if env.build_why:  # the build was named (`build=pip`) or shown: judged as that build
        return False
    snapshot = env.snapshot
    if snapshot is None or isinstance(snapshot.packages, Unavailable):
        return True  # a query or a paste names a version, not which build
    return not any(snapshot.packages.versions.get(name) for name in ("tensorflow", "tensorflow-gpu"))


def _nvidia_build_only(built: BuiltFor, found: str, evidence: list[str]) -> Finding:
    return Finding(
        "libraries.nvidia-build-only", Severity.INFO,
        f"Cannot tell whether CUDA {found} fits TensorFlow {built.tensorflow}: only NVIDIA's build of "
        "TensorFlow 1.15 runs on CUDA 11 or newer, and which build this is is not known",
        evidence + [f"the pip wheel of TensorFlow {built.tensorflow} was built for CUDA {built.cuda} and "
                    f"cannot load CUDA {found}; nvidia-tensorflow (NVIDIA's 1.15 builds, also in the NGC "
                    "containers) is built for CUDA 11 and later"],
        fix="If this is the pip wheel (`tensorflow` or `tensorflow-gpu` 1.15), install CUDA "
            f"{built.cuda} and cuDNN {built.cudnn or '7'} for it, or move to nvidia-tensorflow; if it is "
            "NVIDIA's build, name it (`nvidia-tensorflow==...` or `build=nvidia` in `matrix query`) "
            "to have it judged as that build.",
        links=[NVIDIA_TF1_DOC],
    )


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
        + [f"present, not used: {where_found(c, c.found_by if not c.on_search_path else 'another soname')}"
           for c in others][:6],
        fix=f"{wheel_hint}, or add the directories holding CUDA {built.cuda} / cuDNN {built.cudnn} "
        "libraries to LD_LIBRARY_PATH (`mgpu-doctor libs` shows what is where).",
        links=[TF_PIP_DOC],
    )


def _compare(name: str, expected: str, found: str, evidence: list[str], built: BuiltFor,
             wheel_hint: str) -> list[Finding]:
    want = major_minor(expected)
    have = major_minor(found)
    label = "cuDNN" if name == "cudnn" else "the CUDA runtime"
    if want is None or have is None:
        return [Finding(
            "libraries.version-unknown", Severity.WARNING,
            f"Cannot tell which version lib{name} is; TensorFlow expects {expected}",
            evidence, fix=f"Run `mgpu-doctor libs` without --quick to load it and read its version; "
            f"or reinstall with {wheel_hint}.",
        )]
    only_major = "." not in expected
    if have[0] == want[0] and not only_major and is_short(found, 2):
        # "11" is every 11.x: some are older than the 11.2 the build needs, some are not
        return [Finding(
            "libraries.version-short", Severity.INFO,
            f"Cannot tell whether {label} {found} fits: TensorFlow {built.tensorflow} was built with "
            f"{expected}, and {found} names no minor version",
            evidence + [f"{found} stands for every {want[0]}.x: {expected} or newer fits"
                        + (", older ones TensorFlow refuses" if name in OLDER_MINOR_SEVERITY else
                           ", older ones may miss symbols the build relies on")],
            fix=f"Name the full version (`mgpu-doctor libs` reads it); {label} {expected} or newer "
            f"within {want[0]}.x fits.",
            links=[TF_SOURCE_DOC],
        )]
    soname_bound = have[0] == want[0] < FIRST_MINOR_COMPATIBLE_CUDA
    if name == "cudart" and soname_bound and not only_major and have != want:
        soname = f"libcudart.so.{want[0]}.{want[1]}"
        return [Finding(
            "libraries.soname-minor", Severity.ERROR,
            f"{label} in use is {found}, TensorFlow {built.tensorflow} was built for {expected} and opens "
            f"{soname}: it cannot load {found}",
            evidence + [f"before CUDA {FIRST_MINOR_COMPATIBLE_CUDA}, libcudart's file name carries the "
                        f"minor: CUDA {found} provides libcudart.so.{have[0]}.{have[1]}, not {soname}"],
            fix=f"{wheel_hint[:1].upper()}{wheel_hint[1:]}, beside or instead of {found} (put its lib64 "
                "first on LD_LIBRARY_PATH); or use a TensorFlow built for "
                f"CUDA {have[0]}.{have[1]}.",
            links=[TF_SOURCE_DOC],
        )]
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

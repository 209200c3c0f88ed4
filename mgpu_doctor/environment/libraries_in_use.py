"""Which copy of each CUDA library TensorFlow uses (the one it mapped, else the loader's pick for the
soname it opens) and the version each library resolves to."""

from __future__ import annotations

from collections.abc import Mapping

from mgpu_doctor.environment.library_copies import MAIN_LIBRARIES, best_version, cuda_major_of, soname_major
from mgpu_doctor.environment.readings import Origin, Reading, ResolvedVersion, reading, resolved
from mgpu_doctor.model.snapshot import LibraryCopy, LibraryFacts, TensorFlowFacts
from mgpu_doctor.model.unavailable import Unavailable, absent
from mgpu_doctor.record import record

# Wheels whose version is the library's own (nvidia-nccl-cu12 2.21.5 is NCCL 2.21.5).
LIBRARY_WHEELS = {"cudart": "nvidia-cuda-runtime", "cudnn": "nvidia-cudnn", "nccl": "nvidia-nccl",
                  "cublas": "nvidia-cublas"}
# Libraries whose soname major is the CUDA major (libcudart.so.12), or their own fixed major.
SONAME_FOLLOWS_CUDA = ("cudart", "cublas", "cublasLt", "nvrtc", "nvJitLink")
FIXED_SONAME_MAJOR = {"nccl": 2, "cuda": 1}


@record
class LibraryInUse:
    """The copy of one CUDA library TensorFlow uses: the one it mapped, or the one the loader
    returns for the soname it opens; every other copy found is listed as present, not used."""

    name: str
    soname: str  # what TensorFlow opens ("libcudnn.so.9"); "" when its major is not known
    copy: LibraryCopy | None
    origin: Origin | None
    others: tuple[LibraryCopy, ...] = ()
    why_none: str = ""

    @property
    def version(self) -> str:
        return best_version(self.copy)[0] if self.copy is not None else ""

    @property
    def soname_major(self) -> int | None:
        return int(self.soname.rsplit(".", 1)[1]) if self.soname else None

    def how(self) -> str:
        if self.copy is None or self.origin is None:
            return self.why_none
        if self.origin is Origin.LOADED:
            return "loaded by TensorFlow"
        wanted = f" for {self.soname}" if self.soname else ""
        return f"first on the search path{wanted} ({self.copy.found_by})"


def wanted_soname_major(name: str, built_cuda: ResolvedVersion, built_cudnn: ResolvedVersion) -> int | None:
    """The soname major TensorFlow opens for a library: CUDA's major for the runtime and cuBLAS,
    cuDNN's major for cuDNN, 2 for NCCL; None when it does not follow from the build."""
    if name in FIXED_SONAME_MAJOR:
        return FIXED_SONAME_MAJOR[name]
    source = built_cuda if name in SONAME_FOLLOWS_CUDA else built_cudnn if name.startswith("cudnn") else None
    if source is None or source.version is None:
        return None
    return source.version.major


def resolve_libraries(facts: LibraryFacts, tf: TensorFlowFacts | Unavailable, built_cuda: ResolvedVersion,
                      built_cudnn: ResolvedVersion) -> dict[str, LibraryInUse]:
    """Each main library's copy in use: what TensorFlow mapped, else the loader's pick by soname."""
    out = {}
    loaded = set() if isinstance(tf, Unavailable) else set(tf.loaded_libraries) | set(tf.loaded_after_import)
    cuda_major = built_cuda.version.major if built_cuda.version is not None else None
    for name in MAIN_LIBRARIES:
        copies = [c for c in facts.copies if c.name == name]
        if not copies:
            continue
        major = wanted_soname_major(name, built_cuda, built_cudnn)
        soname = f"lib{name}.so.{major}" if major is not None else ""
        mapped = next((c for c in copies if c.real_path in loaded or c.path in loaded), None)
        chosen: LibraryCopy | None
        if mapped is not None:
            chosen, origin, why = mapped, Origin.LOADED, ""
        else:
            on_path = [c for c in copies if c.on_search_path]
            if major is not None:
                fitting = [c for c in on_path if soname_major(c) == major]
            elif cuda_major is not None:  # cuFFT and friends: the copy of TensorFlow's CUDA major
                fitting = [c for c in on_path if cuda_major_of(c) in (cuda_major, None)]
                fitting.sort(key=lambda c: cuda_major_of(c) != cuda_major)
            else:
                fitting = on_path
            chosen = fitting[0] if fitting else None
            origin = Origin.LOADER
            if chosen is None:
                present = ", ".join(sorted({c.soname for c in copies}))
                where = "on the library search path" if on_path else "on the search path (only elsewhere)"
                why = (f"no {soname or 'lib' + name} {where}; found: {present}" if soname
                       else f"no lib{name} on the library search path; found: {present}")
            else:
                why = ""
        out[name] = LibraryInUse(name, soname, chosen, origin if chosen is not None else None,
                                 tuple(c for c in copies if c is not chosen), why)
    return out


def library_version(key: str, name: str, libraries: Mapping[str, LibraryInUse], wheels: Mapping[str, str],
                    built: ResolvedVersion | None, pasted: list[Reading] | None = None) -> ResolvedVersion:
    """A library's version: the copy in use, its wheel, what a paste states, or (as a prediction)
    the build's."""
    readings = []
    lib = libraries.get(name)
    if lib is not None and lib.copy is not None and lib.version:
        readings.append(reading(lib.version, lib.origin or Origin.LOADER, lib.copy.path))
    stem = LIBRARY_WHEELS.get(name)
    if stem is not None:
        readings += [reading(v, Origin.WHEEL, w) for w, v in sorted(wheels.items())
                     if w.startswith(stem + "-cu")]
    readings += pasted or []
    if built is not None and built.chosen is not None:
        readings.append(built.chosen)
    if lib is not None and lib.copy is None:
        missing = absent(lib.why_none)
    elif built is not None and built.missing is not None:
        missing = built.missing
    else:
        missing = absent(f"no lib{name} found")
    return resolved(key, readings, missing)

"""What `mgpu-doctor libs` shows, computed into the report (the data: ``model/libraries.py``)."""

from __future__ import annotations

from mgpu_doctor.environment.libraries_in_use import LibraryInUse
from mgpu_doctor.environment.library_copies import (
    MAIN_LIBRARIES,
    TOOLS,
    best_version,
    copies_of,
    soname_major,
    winner,
)
from mgpu_doctor.environment.resolve import ResolvedEnvironment
from mgpu_doctor.matrix.compat_tables import CudaDriverTable
from mgpu_doctor.model.libraries import CopyView, DriverView, LibrariesView, LibraryRow
from mgpu_doctor.model.snapshot import LibraryCopy, LibraryFacts
from mgpu_doctor.model.unavailable import Unavailable


def library_view(env: ResolvedEnvironment, table: CudaDriverTable) -> LibrariesView | Unavailable:
    """The `libs` view of a machine; Unavailable (with why) when it has no library facts."""
    snapshot = env.snapshot
    if snapshot is None:
        return Unavailable("skipped", "not a machine")
    libs = snapshot.libraries
    if isinstance(libs, Unavailable):
        return libs
    nvml = snapshot.nvml
    if isinstance(nvml, Unavailable):
        first_line = nvml.detail.splitlines()[0] if nvml.detail else ""
        driver = DriverView("", "", "", f"NVML {nvml.reason}: {first_line}")
    else:
        cuda = nvml.cuda_driver_version if isinstance(nvml.cuda_driver_version, str) else ""
        driver = DriverView(nvml.driver_version, cuda, table.newest_cuda(nvml.driver_version) or "")
    built_known = env.built_cuda.known and not env.cpu_only_build
    unknown = "" if built_known else (
        f"TensorFlow {env.tensorflow.text} is a CPU-only build" if env.cpu_only_build
        else str(env.built_cuda.missing or "not known"))
    rows = [_row(env, libs, name, driver) for name in (*MAIN_LIBRARIES, *TOOLS)]
    built_source = "; ".join(dict.fromkeys(v.chosen.source() for v in (env.built_cuda, env.built_cudnn)
                                           if v.chosen is not None)) if built_known else ""
    return LibrariesView(
        built_cuda=env.built_cuda.text if built_known else "",
        built_cudnn=env.built_cudnn.text if built_known else "",
        built_source=built_source, built_unknown=unknown, driver=driver, rows=rows,
        toolkits=list(libs.toolkits), search_dirs=list(libs.search_dirs),
        versions_loaded=libs.versions_loaded, probe_seconds=libs.probe_seconds,
    )


def _row(env: ResolvedEnvironment, libs: LibraryFacts, name: str, driver: DriverView) -> LibraryRow:
    lib: LibraryInUse | None = env.libraries.get(name)
    used = lib.copy if lib is not None else None
    how = lib.how() if lib is not None else ""
    if used is None and copies_of(libs, name):
        if lib is None:  # a tool (ptxas, nvcc): the first on PATH
            used = winner(libs, name)
            how = f"first on PATH ({used.found_by})" if used is not None else ""
        else:
            how = lib.why_none
    built_known = env.built_cuda.known and not env.cpu_only_build
    expected = ""
    if built_known:
        expected = {"cudart": f"CUDA {env.built_cuda.text}",
                    "cudnn": f"cuDNN {env.built_cudnn.text}"}.get(name, "")
    supports = f"CUDA {driver.cuda} (driver {driver.driver})" if name in ("cudart", "cuda", "ptxas") \
        and driver.driver else ""
    soname = lib.soname if lib is not None else ""
    copies = [_copy_view(c, used, lib, libs, name) for c in copies_of(libs, name)]
    version, source = best_version(used) if used is not None else ("", "")
    return LibraryRow(name=name, built_for=expected, soname=soname, in_use=used.path if used else "",
                      in_use_version=version, version_source=source, found_how=how,
                      driver_supports=supports, copies=copies)


def _copy_view(copy: LibraryCopy, used: LibraryCopy | None, lib: LibraryInUse | None, libs: LibraryFacts,
               name: str) -> CopyView:
    version, source = best_version(copy)
    first = winner(libs, name, copy.soname)
    return CopyView(
        path=copy.path, soname=copy.soname, real_path=copy.real_path, found_by=copy.found_by,
        on_search_path=copy.on_search_path, version=version, version_source=source, in_use=copy is used,
        wins=copy is first, why=_why(copy, used, first, lib), wheel=copy.wheel, load_error=copy.load_error,
    )


def _why(
    copy: LibraryCopy, used: LibraryCopy | None, first: LibraryCopy | None, lib: LibraryInUse | None
) -> str:
    if copy.load_error:
        return f"fails to load: {copy.load_error}"
    if copy is used:
        return "in use: " + ("loaded by TensorFlow" if not copy.on_search_path or copy is not first
                             else f"first on the search path ({copy.found_by})")
    if not copy.on_search_path:
        return f"not on the search path ({copy.found_by})"
    if lib is not None and lib.soname and soname_major(copy) != lib.soname_major:
        return f"present, not used: TensorFlow opens {lib.soname}, this is {copy.soname}"
    if copy is first:
        return f"first on the search path for {copy.soname} ({copy.found_by})"
    return f"shadowed by {first.path}" if first is not None else ""

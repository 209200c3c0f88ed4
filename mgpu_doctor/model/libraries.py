"""What `mgpu-doctor libs` shows, as the report holds it: per CUDA library what TensorFlow was built
for, the copy in use and how it was chosen, what the driver supports, and every copy found in the
loader's order with the one the loader takes and why (computed by ``environment/library_view.py``)."""

from __future__ import annotations

from mgpu_doctor.model.snapshot import CudaToolkit, SearchDir
from mgpu_doctor.record import field, record


@record
class CopyView:
    """One file of a library, as `libs` lists it."""

    path: str
    soname: str
    real_path: str
    found_by: str
    on_search_path: bool
    version: str
    version_source: str
    in_use: bool
    wins: bool  # the loader's first pick for this soname on the search path
    why: str
    wheel: str = ""
    load_error: str = ""


@record
class LibraryRow:
    """One library (or tool): built for, in use, driver support, and every copy."""

    name: str
    built_for: str  # "CUDA 12.5", "cuDNN 9.3", "" when it does not apply
    soname: str  # what TensorFlow opens ("libcudnn.so.9"), "" when unknown
    in_use: str  # the path, "" when none
    in_use_version: str
    version_source: str
    found_how: str
    driver_supports: str
    copies: list[CopyView] = field(default_factory=list)


@record
class DriverView:
    driver: str  # "" when NVML did not answer (see note)
    cuda: str  # the newest CUDA the driver supports (NVML)
    full_support_up_to: str  # the newest CUDA whose toolkit driver is at most this driver
    note: str = ""


@record
class LibrariesView:
    built_cuda: str  # "" when unknown (see built_unknown)
    built_cudnn: str
    built_source: str
    built_unknown: str  # why the build is not known
    driver: DriverView
    rows: list[LibraryRow]
    toolkits: list[CudaToolkit]
    search_dirs: list[SearchDir]
    versions_loaded: bool
    probe_seconds: float

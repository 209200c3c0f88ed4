"""The snapshot: every fact about one machine, as plain data with a JSON round trip.

Probes fill it, checks read it, ``mgpu-doctor check --from FILE`` loads it back.
A fact that could not be gathered is an :class:`~mgpu_doctor.model.unavailable.Unavailable`.
"""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mgpu_doctor.model.collective_facts import CollectiveFacts, not_in_snapshot
from mgpu_doctor.model.evidence import EvidenceText
from mgpu_doctor.model.markdown_json_block import (
    EmbeddedJsonError,
    extract_json,
    looks_like_markdown_report,
    normalise,
)
from mgpu_doctor.model.serde import SchemaError, from_jsonable, lazy_types, to_jsonable
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.process.inputs import MAX_GPUS, InputError, check_fact_sizes, parse_json, read_text
from mgpu_doctor.record import field, record

if TYPE_CHECKING:
    from mgpu_doctor.model.pasted import PastedFacts

# Only a pasted text (`check --from ISSUE.txt`) fills `pasted`: its type is imported when a
# snapshot is decoded (serde finds it through __getattr__), not on every run (`check --quick`).
LAZY_TYPES = {"PastedFacts": "mgpu_doctor.model.pasted"}


__getattr__ = lazy_types(__name__, LAZY_TYPES)

SCHEMA_VERSION = 1
KIND = "mgpu-doctor-snapshot"
REPORT_KIND = "mgpu-doctor-report"  # `check --format json` and the JSON inside `mgpu-doctor report`


@record
class HostFacts:
    hostname: str
    os_name: str
    os_release: str | Unavailable
    kernel: str
    machine: str
    libc: str | Unavailable
    cpu_count: int
    memory_total_bytes: int | Unavailable
    container_hints: list[str] = field(default_factory=list)


@record
class PythonFacts:
    """The interpreter being diagnosed (``--python``), which may differ from the doctor's."""

    version: str
    executable: str
    implementation: str
    prefix: str
    site_packages: list[str]
    is_doctor_interpreter: bool


@record
class PackageFacts:
    """Installed distributions of interest, keyed by canonical name (``tf-keras``)."""

    versions: dict[str, str]
    locations: dict[str, str]
    # Requires-Dist lines of the TensorFlow distributions (for the [and-cuda] pins).
    requires: dict[str, list[str]]
    # Other versions of the same distribution further down sys.path (never imported).
    shadowed: dict[str, list[str]] = field(default_factory=dict)


@record
class GpuProcess:
    pid: int
    used_memory_bytes: int | Unavailable
    kind: str  # "compute" or "graphics"


@record
class MigDevice:
    """A MIG device of a GPU in MIG mode: what CUDA_VISIBLE_DEVICES=MIG-<uuid> names."""

    index: int  # NVML's MIG device slot on its GPU
    uuid: str  # MIG-<uuid>
    memory_total_bytes: int | Unavailable


@record
class GpuFacts:
    index: int
    name: str
    uuid: str
    pci_bus_id: str
    memory_total_bytes: int
    memory_used_bytes: int | Unavailable
    compute_capability: str | Unavailable  # "8.0"
    persistence_mode: bool | Unavailable
    compute_mode: str | Unavailable  # default, exclusive_thread, prohibited, exclusive_process
    mig_mode: bool | Unavailable
    ecc_enabled: bool | Unavailable
    ecc_uncorrected_volatile: int | Unavailable
    temperature_c: int | Unavailable
    throttle_reasons: list[str] | Unavailable
    pcie_gen_current: int | Unavailable
    pcie_gen_max: int | Unavailable
    pcie_width_current: int | Unavailable
    pcie_width_max: int | Unavailable
    processes: list[GpuProcess] | Unavailable
    mig_devices: list[MigDevice] | Unavailable = field(default_factory=not_in_snapshot)


@record
class GpuLink:
    """How two GPUs (by NVML index) talk to each other."""

    a: int
    b: int
    topology: str | Unavailable  # internal, single, multiple, hostbridge, node, system
    nvlink_links: int | Unavailable  # active NVLink links from a that reach b
    p2p_read: str | Unavailable  # ok, not_supported, disabled_by_chipset, ...


@record
class NvmlFacts:
    driver_version: str
    cuda_driver_version: str | Unavailable  # "12.4": the newest CUDA the driver supports
    nvml_version: str | Unavailable
    gpus: list[GpuFacts]
    links: list[GpuLink]
    # Set when NVML stopped answering part-way: what was gathered before stays.
    partial_error: str = ""


@record
class TfDevice:
    name: str  # /physical_device:GPU:0
    device_type: str  # GPU, CPU
    details: dict[str, str]  # tf.config.experimental.get_device_details


@record
class TensorFlowFacts:
    version: str
    module_path: str
    keras_module: str | Unavailable  # which module tf.keras resolves to: keras (3) or tf_keras
    keras_version: str | Unavailable
    build_info: dict[str, str]
    built_with_cuda: bool | Unavailable
    physical_devices: list[TfDevice] | Unavailable
    # Shared libraries mapped into the process after import and device query (/proc/self/maps).
    loaded_libraries: list[str]
    import_seconds: float
    warnings: list[str] = field(default_factory=list)
    # The same, right after `import tensorflow` (before any device query): what import alone loads.
    loaded_after_import: list[str] = field(default_factory=list)


@record
class JaxDevice:
    """One device of ``jax.devices()``."""

    id: int
    platform: str  # gpu, cpu, tpu
    device_kind: str  # "NVIDIA H100 80GB HBM3", "cpu"
    local_hardware_id: int | None = None  # the CUDA ordinal of a GPU; None where JAX gives none


@record
class JaxFacts:
    """JAX's own view, from a child that imported it with ``XLA_PYTHON_CLIENT_PREALLOCATE=false``.

    ``plugins`` maps the CUDA plugin distributions found (``jax-cuda13-plugin``,
    ``jax-cuda13-pjrt``) to their versions; ``plugin_wheels_missing`` names the distributions a
    plugin's ``with-cuda`` extra asks for that are not installed (the ``nvidia-*`` wheels);
    ``backend_errors`` what JAX said when a backend (``cuda``) did not initialise.
    """

    version: str
    jaxlib_version: str | Unavailable
    module_path: str
    plugins: dict[str, str]
    default_backend: str | Unavailable  # gpu, cpu, tpu
    devices: list[JaxDevice] | Unavailable
    import_seconds: float
    plugin_wheels_missing: list[str] = field(default_factory=list)
    backend_errors: dict[str, str] = field(default_factory=dict)
    loaded_libraries: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@record
class LibraryCopy:
    """One file of a CUDA library (or a CUDA tool such as ptxas) found on this machine.

    ``name`` is the library without ``lib`` and suffix (``cudart``, ``cudnn``, ``cudnn_ops``,
    ``cuda`` for the driver's libcuda, ``ptxas``); ``soname`` the name the loader looks for
    (``libcudart.so.12``). ``versions`` maps where a version was read to what it says
    (``filename``, ``soname``, ``wheel``, ``version.json``, ``header``, ``ctypes``, ``--version``).
    ``load_error`` holds the dynamic loader's message when loading the file with ctypes failed.
    """

    name: str
    soname: str
    path: str
    real_path: str
    found_by: str  # LD_LIBRARY_PATH, pip wheel, ldconfig cache, system directory, CUDA_HOME, ...
    on_search_path: bool  # whether the dynamic loader (or TensorFlow's RUNPATH) would consider it
    versions: dict[str, str] = field(default_factory=dict)
    wheel: str = ""  # the pip distribution that installed it (nvidia-cudnn-cu12)
    load_error: str = ""


class DirKind(str, enum.Enum):
    """How a library directory or toolkit was found; ``found_by`` is the same, worded for people."""

    LD_LIBRARY_PATH = "ld_library_path"
    PIP_WHEEL = "pip_wheel"  # site-packages/nvidia/*/lib: TensorFlow's RUNPATH
    LDCONFIG = "ldconfig"
    SYSTEM = "system"
    CUDA_HOME = "cuda_home"
    CUDA_PATH = "cuda_path"
    CUDA_GLOB = "cuda_glob"  # /usr/local/cuda*
    CONDA = "conda"
    XLA_DATA_DIR = "xla_data_dir"  # XLA_FLAGS --xla_gpu_cuda_data_dir
    FORWARD_COMPAT = "forward_compat"  # a toolkit's compat/ directory
    LOADED_BY_TENSORFLOW = "loaded_by_tensorflow"

    @classmethod
    def from_label(cls, label: str) -> DirKind:
        """The kind a probe's ``found_by`` wording stands for (also for snapshots written before
        ``kind`` was recorded)."""
        exact = {"LD_LIBRARY_PATH": cls.LD_LIBRARY_PATH, "ldconfig cache": cls.LDCONFIG,
                 "system directory": cls.SYSTEM, "CUDA_HOME": cls.CUDA_HOME, "CUDA_PATH": cls.CUDA_PATH,
                 "conda env": cls.CONDA, XLA_DATA_DIR_LABEL: cls.XLA_DATA_DIR,
                 "loaded by TensorFlow": cls.LOADED_BY_TENSORFLOW}
        if label in exact:
            return exact[label]
        if label.startswith("pip wheel"):
            return cls.PIP_WHEEL
        if label.endswith("(forward compatibility)"):
            return cls.FORWARD_COMPAT
        return cls.CUDA_GLOB


XLA_DATA_DIR_LABEL = "XLA_FLAGS --xla_gpu_cuda_data_dir"


@record
class SearchDir:
    """A directory searched for libraries, in the order the dynamic loader considers them."""

    path: str
    found_by: str
    exists: bool
    on_search_path: bool
    kind: DirKind | None = None  # None only while reading an old snapshot: derived from found_by

    def __post_init__(self) -> None:
        if self.kind is None:
            object.__setattr__(self, "kind", DirKind.from_label(self.found_by))


@record
class CudaToolkit:
    """A CUDA toolkit directory (CUDA_HOME, /usr/local/cuda-12.5, a conda env) and its version."""

    path: str
    found_by: str
    version: str | Unavailable
    version_source: str = ""  # version.json, header, dist-info, nvcc
    kind: DirKind | None = None  # None only while reading an old snapshot: derived from found_by

    def __post_init__(self) -> None:
        if self.kind is None:
            object.__setattr__(self, "kind", DirKind.from_label(self.found_by))


@record
class LibraryFacts:
    """Every copy of the CUDA libraries and tools found, in the dynamic loader's search order."""

    copies: list[LibraryCopy]
    search_dirs: list[SearchDir]
    toolkits: list[CudaToolkit]
    versions_loaded: bool  # whether versions were also read by loading each library (ctypes)
    probe_seconds: float


@record
class Snapshot:
    schema_version: int
    kind: str
    tool_version: str
    created: str  # ISO 8601, UTC
    host: HostFacts
    python: PythonFacts | Unavailable
    packages: PackageFacts | Unavailable
    env: dict[str, str]
    nvml: NvmlFacts | Unavailable
    tensorflow: TensorFlowFacts | Unavailable
    # Added after schema 1 was first released: older snapshots load with the reason.
    libraries: LibraryFacts | Unavailable = field(
        default_factory=lambda: Unavailable("skipped", "not recorded in this snapshot", "old-snapshot"))
    # Host, container and NCCL set-up (IOMMU/ACS, /dev/shm, CPUs, network, container): added later too.
    collective: CollectiveFacts | Unavailable = field(default_factory=not_in_snapshot)
    # Read from a pasted text (`check --from ISSUE.txt`): the parts, and where each fact came from.
    pasted: PastedFacts | None = None
    # JAX's view (version, CUDA plugin, devices): added later too.
    jax: JaxFacts | Unavailable = field(default_factory=not_in_snapshot)
    # Training logs given with `check --log FILE`: the lines that may show the failure.
    logs: list[EvidenceText] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(to_jsonable(self), indent=2, sort_keys=False) + "\n"


class SnapshotLoadError(Exception):
    """A saved snapshot could not be read; the message is one line naming file and problem."""


class NotJsonText(SnapshotLoadError):
    """Text that is neither JSON nor a Markdown report: perhaps a paste (``text`` holds it)."""

    def __init__(self, message: str, text: str) -> None:
        super().__init__(message)
        self.text = text


def snapshot_from_data(data: object, source: str) -> Snapshot:
    if isinstance(data, dict) and data.get("kind") == REPORT_KIND:
        if not isinstance(data.get("snapshot"), dict):
            raise SnapshotLoadError(f"{source}: the report has no 'snapshot' object (edited or cut?)")
        data = data["snapshot"]
    if not isinstance(data, dict):
        raise SnapshotLoadError(f"{source}: not a snapshot (expected a JSON object)")
    if data.get("kind", KIND) != KIND:
        raise SnapshotLoadError(f"{source}: not a snapshot (kind is {data.get('kind')!r})")
    version = data.get("schema_version")
    if version is None:
        raise SnapshotLoadError(f"{source}: not a snapshot (no schema_version)")
    if version != SCHEMA_VERSION:
        raise SnapshotLoadError(
            f"{source}: snapshot schema_version {version!r} is not supported "
            f"(this mgpu-doctor reads {SCHEMA_VERSION})"
        )
    _check_limits(data, source)
    try:
        return from_jsonable(Snapshot, data, "snapshot")
    except SchemaError as exc:
        raise SnapshotLoadError(f"{source}: field {exc.path}: {exc.message}") from None


def _check_limits(data: dict[str, Any], source: str) -> None:
    """What no real machine has is refused before anything reads it (see process/inputs.py)."""
    nvml = data.get("nvml")
    gpus = nvml.get("gpus") if isinstance(nvml, dict) else None
    if isinstance(gpus, list) and len(gpus) > MAX_GPUS:
        raise SnapshotLoadError(f"{source}: field snapshot.nvml.gpus: {len(gpus)} GPUs; no machine has "
                                f"more than {MAX_GPUS} (edited or corrupted?)")
    try:
        check_fact_sizes(data, "snapshot")
    except InputError as exc:
        raise SnapshotLoadError(f"{source}: field {exc}") from None


@record
class LoadedDocument:
    """What a file given to ``--from`` held: the snapshot, and the report around it if any."""

    snapshot: Snapshot
    # The whole report (`check --format json`, or the JSON inside `mgpu-doctor report`):
    # where smoke results and check outcomes recorded on the original machine can be read back.
    report_data: dict[str, Any] | None = None


def meant_as_json(text: str) -> bool:
    """Whether a text that does not parse was meant as JSON (a snapshot cut short): it opens an object
    or array whose first member is JSON. A log that opens with a bracket (dmesg's `[ 8127.41] ...`,
    `[INFO] ...`) or a printed Python dict (`{'loss': nan}`) is a paste."""
    body = text.lstrip("\ufeff \t\r\n")
    if not body.startswith(("{", "[")):
        return False
    after = body[1:].lstrip(" \t\r\n")[:1]
    return after in ('"', "}", "]") if body[0] == "{" else after in ('"', "{", "[", "]")


def load_snapshot(path: Path) -> Snapshot:
    """Read a snapshot: a JSON snapshot, a JSON report, or a Markdown report from `mgpu-doctor report`.

    Every problem becomes a one-line :class:`SnapshotLoadError` naming the file and what is wrong.
    """
    return load_document(path).snapshot


def load_document(path: Path) -> LoadedDocument:
    try:
        text = read_text(path, "a snapshot or report")
    except FileNotFoundError:
        raise SnapshotLoadError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise SnapshotLoadError(f"{path}: is a directory, not a snapshot file") from None
    except InputError as exc:
        raise SnapshotLoadError(str(exc)) from None
    except OSError as exc:
        raise SnapshotLoadError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not text.strip():
        raise SnapshotLoadError(f"{path}: file is empty")
    text = normalise(text)
    source = str(path)
    if not text.lstrip().startswith(("{", "[")) and looks_like_markdown_report(text):
        try:
            data, line = extract_json(text, source)
        except (EmbeddedJsonError, InputError) as exc:
            raise SnapshotLoadError(str(exc) if isinstance(exc, InputError) else f"{path}: {exc}") from None
        source = f"{path} (JSON block at line {line})"
    else:
        try:
            data = parse_json(text, source)
        except InputError as exc:
            raise SnapshotLoadError(str(exc)) from None
        except json.JSONDecodeError as exc:
            if text.lstrip().startswith(("{", "[")):  # check --from judges it again (meant_as_json)
                message = (f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
                           "truncated or edited? (a Markdown report from `mgpu-doctor report` works too)")
            else:  # plain text: a paste given where a snapshot is wanted
                message = (f"{path}: plain text, not a snapshot or report (`mgpu-doctor snapshot -o FILE` "
                           "writes one on that machine); a pasted text is read by `mgpu-doctor check --from`")
            raise NotJsonText(message, text) from None
    report_data = data if isinstance(data, dict) and data.get("kind") == REPORT_KIND else None
    return LoadedDocument(snapshot_from_data(data, source), report_data)

"""Find every copy of the CUDA libraries and tools, in the order the dynamic loader considers them.

Search order (what `dlopen("libcudnn.so.9")` from TensorFlow does): LD_LIBRARY_PATH, then
TensorFlow's RUNPATH (the pip `nvidia/*/lib` wheels, TensorFlow 2.14+), then the loader cache
(`ldconfig -p`), then the default system directories. Toolkits that are *not* on that path
(CUDA_HOME / CUDA_PATH, /usr/local/cuda*, the active conda environment) are listed too, so a
user can see the copy they think they use and why it is not the one loaded.

Versions come from the file names, the wheel metadata, a toolkit's version.json or dist-info,
headers, and (unless ``load_versions`` is off) from loading each library with ctypes in a child
process and calling its version function; a library that fails to load records the loader's
error. None of this needs a GPU.
"""

from __future__ import annotations

import glob
import json
import os
import platform
import re
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from mgpu_doctor.childproc import run_tool
from mgpu_doctor.inputs import parse_json, read_text
from mgpu_doctor.interpreter import Interpreter
from mgpu_doctor.library_copies import LIBRARY_FILE, TOOLS
from mgpu_doctor.snapshot import XLA_DATA_DIR_LABEL, CudaToolkit, LibraryCopy, LibraryFacts, SearchDir
from mgpu_doctor.unavailable import absent

LOAD_TIMEOUT_S = 20.0
LOAD_STALL_S = 10.0
TOOL_TIMEOUT_S = 5.0
LDCONFIG_KEEP_BYTES = 16 * 1024 * 1024  # `ldconfig -p` lists every library: keep all of a large cache
XLA_DATA_DIR = XLA_DATA_DIR_LABEL
DEFAULT_DIRS = ("/lib64", "/usr/lib64", "/lib", "/usr/lib")
# Libraries the ctypes child asks for a version (cuDNN's sub-libraries are big and have none).
LOADABLE = ("cuda", "cudart", "cublas", "cublasLt", "cufft", "curand", "cusolver", "cusparse", "cudnn",
            "nccl", "nvrtc", "nvJitLink")
# How a toolkit's version.json / dist-info names each library's component.
VERSION_JSON_KEYS = {
    "cudart": "cuda_cudart", "cublas": "libcublas", "cublasLt": "libcublas", "cufft": "libcufft",
    "curand": "libcurand", "cusolver": "libcusolver", "cusparse": "libcusparse", "nvrtc": "cuda_nvrtc",
    "nvJitLink": "libnvjitlink", "ptxas": "cuda_nvcc", "nvcc": "cuda_nvcc",
}
DIST_INFO_NAMES = {
    "cudart": "cuda_runtime", "cublas": "cublas", "cublasLt": "cublas", "cufft": "cufft",
    "curand": "curand", "cusolver": "cusolver", "cusparse": "cusparse", "nvrtc": "cuda_nvrtc",
    "nvJitLink": "nvjitlink", "ptxas": "cuda_nvcc", "nvcc": "cuda_nvcc", "cudnn": "cudnn", "nccl": "nccl",
}


@dataclass(frozen=True)
class LibraryProbeInput:
    """What discovery looks at; tests pass their own trees, the CLI passes this machine's."""

    env: Mapping[str, str]
    site_packages: Sequence[str] = ()
    ldconfig_entries: Sequence[tuple[str, str]] | None = None  # (name, path); None: run ldconfig -p
    default_dirs: Sequence[str] = DEFAULT_DIRS
    cuda_globs: Sequence[str] = ("/usr/local/cuda*",)
    loaded_by_tensorflow: Sequence[str] = ()
    system_include_dirs: Sequence[str] = ("/usr/include",)


@dataclass
class _Dir:
    path: str
    found_by: str
    on_path: bool
    root: str = ""  # toolkit root for version.json / dist-info / headers
    wheel: str = ""
    wheel_version: str = ""


@dataclass
class _State:
    dirs: list[_Dir] = field(default_factory=list)
    seen_dirs: dict[str, _Dir] = field(default_factory=dict)


def gather_libraries(
    probe_input: LibraryProbeInput,
    interpreter: Interpreter | None = None,
    load_versions: bool = True,
) -> LibraryFacts:
    """Discover the libraries; with ``load_versions`` also load each in a child (needs ``interpreter``)."""
    start = time.monotonic()
    state = _State()
    env = probe_input.env
    machine = platform.machine()
    for entry in env.get("LD_LIBRARY_PATH", "").split(":"):
        if entry.strip():
            _add_dir(state, entry, "LD_LIBRARY_PATH", on_path=True)
    for site in probe_input.site_packages:
        for lib_dir in sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib"))):
            wheel, version = _wheel_of(site, lib_dir)
            _add_dir(state, lib_dir, "pip wheel (TensorFlow's RUNPATH)", on_path=True, wheel=wheel,
                     wheel_version=version)
    cache = probe_input.ldconfig_entries
    if cache is None:
        cache = _ldconfig_entries(machine)
    for _, path in cache:
        _add_dir(state, os.path.dirname(path), "ldconfig cache", on_path=True)
    for base in probe_input.default_dirs:
        _add_dir(state, base, "system directory", on_path=True)
        _add_dir(state, os.path.join(base, f"{machine}-linux-gnu"), "system directory", on_path=True)
    toolkit_roots: list[tuple[str, str]] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(var):
            toolkit_roots.append((env[var], var))
    for pattern in probe_input.cuda_globs:
        for root in sorted(glob.glob(pattern)):
            toolkit_roots.append((root, pattern))
    if env.get("CONDA_PREFIX"):
        toolkit_roots.append((env["CONDA_PREFIX"], "conda env"))
    xla_dir = xla_cuda_data_dir(env.get("XLA_FLAGS", ""))
    if xla_dir:
        toolkit_roots.append((xla_dir, XLA_DATA_DIR))
    for root, how in toolkit_roots:
        for sub in ("lib64", "lib", *sorted(glob.glob(os.path.join(root, "targets", "*", "lib")))):
            _add_dir(state, os.path.join(root, sub), how, on_path=False, root=root)
        _add_dir(state, os.path.join(root, "compat"), f"{how} (forward compatibility)", on_path=False,
                 root=root)
    for path in probe_input.loaded_by_tensorflow:
        _add_dir(state, os.path.dirname(path), "loaded by TensorFlow", on_path=False)
    copies = _library_copies(state, probe_input)
    copies += _tool_copies(env, toolkit_roots, probe_input.site_packages, run_tools=load_versions)
    toolkits = [_toolkit(root, how) for root, how in toolkit_roots if os.path.isdir(root)]
    if load_versions and interpreter is not None:
        copies = load_library_versions(copies, interpreter)
    search_dirs = [SearchDir(d.path, d.found_by, os.path.isdir(d.path), d.on_path) for d in state.dirs
                   if d.found_by == "LD_LIBRARY_PATH" or os.path.isdir(d.path)]
    if xla_dir:
        search_dirs.append(SearchDir(xla_dir, XLA_DATA_DIR, os.path.isdir(xla_dir), False))
    return LibraryFacts(copies=copies, search_dirs=search_dirs, toolkits=_dedupe_toolkits(toolkits),
                        versions_loaded=load_versions and interpreter is not None,
                        probe_seconds=round(time.monotonic() - start, 4))


def xla_cuda_data_dir(flags: str) -> str:
    """The directory ``--xla_gpu_cuda_data_dir`` names in XLA_FLAGS, or ""."""
    match = re.search(r"--xla_gpu_cuda_data_dir=(\"[^\"]*\"|'[^']*'|\S+)", flags)
    return match.group(1).strip("'\"") if match else ""


def _add_dir(state: _State, path: str, found_by: str, on_path: bool, root: str = "", wheel: str = "",
             wheel_version: str = "") -> None:
    key = os.path.realpath(path)
    if key in state.seen_dirs:
        known = state.seen_dirs[key]
        known.root = known.root or root or _root_of(path)
        return
    entry = _Dir(path, found_by, on_path, root or _root_of(path), wheel, wheel_version)
    state.seen_dirs[key] = entry
    state.dirs.append(entry)


def _root_of(lib_dir: str) -> str:
    """The toolkit-like root of a lib directory (``/usr/local/cuda-12.5`` for its ``lib64``)."""
    parts = Path(lib_dir)
    if parts.name in ("lib", "lib64"):
        parent = parts.parent
        if parent.parent.name == "targets":
            return str(parent.parent.parent)
        return str(parent)
    return ""


def _ldconfig_entries(machine: str) -> list[tuple[str, str]]:
    out = ""
    for ldconfig in ("ldconfig", "/sbin/ldconfig"):
        ran = run_tool([ldconfig, "-p"], TOOL_TIMEOUT_S, keep_bytes=LDCONFIG_KEEP_BYTES)
        if not ran.start_error:
            out = ran.stdout if ran.returncode == 0 else ""
            break
    entries = []
    want_64 = machine.endswith("64")
    for line in out.splitlines():
        match = re.match(r"\s*(\S+) \(([^)]*)\) => (\S+)", line)
        if not match or not LIBRARY_FILE.match(match.group(1)):
            continue
        if want_64 and "64" not in match.group(2):
            continue  # a 32-bit copy the 64-bit loader never takes
        entries.append((match.group(1), match.group(3)))
    return entries


def _library_copies(state: _State, probe_input: LibraryProbeInput) -> list[LibraryCopy]:
    copies: list[LibraryCopy] = []
    seen_real: set[str] = set()
    for d in state.dirs:
        try:
            names = sorted(os.listdir(d.path))
        except OSError:
            continue
        groups: dict[str, list[tuple[str, str, str]]] = {}
        for file_name in names:
            match = LIBRARY_FILE.match(file_name)
            if not match:
                continue
            full = os.path.join(d.path, file_name)
            real = os.path.realpath(full)
            if not os.path.isfile(real):
                continue  # a dangling symlink
            groups.setdefault(real, []).append((file_name, match.group("name"), match.group("version") or ""))
        for real, files in groups.items():
            if real in seen_real:
                continue  # the same file reached through another directory
            seen_real.add(real)
            with_version = [f for f in files if f[2]]
            soname_entry = min(with_version, key=lambda f: (f[2].count("."), len(f[0]))) if with_version \
                else files[0]
            longest = max(files, key=lambda f: f[2].count(".") if f[2] else -1)
            name = soname_entry[1]
            versions: dict[str, str] = {}
            if soname_entry[2]:
                versions["soname"] = soname_entry[2]
            if longest[2] and longest[2] != soname_entry[2]:
                versions["filename"] = longest[2]
            if d.wheel_version:
                versions["wheel"] = d.wheel_version
            versions.update(_root_versions(d, name, probe_input))
            copies.append(LibraryCopy(
                name=name, soname=soname_entry[0], path=os.path.join(d.path, soname_entry[0]),
                real_path=real, found_by=d.found_by, on_search_path=d.on_path, versions=versions,
                wheel=d.wheel,
            ))
    return copies


def _wheel_of(site: str, lib_dir: str) -> tuple[str, str]:
    """The nvidia-* wheel (canonical name, version) that owns ``site/nvidia/<sub>/lib``."""
    sub = Path(lib_dir).parent.name.lower()
    candidates = []
    for dist in glob.glob(os.path.join(site, "nvidia_*.dist-info")):
        match = re.match(r"^(nvidia_.+?)-([^-]+)\.dist-info$", os.path.basename(dist))
        if not match:
            continue
        name, version = match.group(1).lower(), match.group(2)
        stem = re.sub(r"_cu\d+$", "", name[len("nvidia_"):])
        if stem == sub:
            return name.replace("_", "-"), version
        candidates.append((name, version, dist))
    for name, version, dist in candidates:  # CUDA 13 wheels share nvidia/cu13/lib: ask RECORD
        try:
            with open(os.path.join(dist, "RECORD"), encoding="utf-8", errors="replace") as fh:
                if any(line.startswith(f"nvidia/{sub}/lib/") for line in fh):
                    return name.replace("_", "-"), version
        except OSError:
            continue
    return "", ""


def _root_versions(d: _Dir, name: str, probe_input: LibraryProbeInput) -> dict[str, str]:
    found: dict[str, str] = {}
    root = d.root
    base = "cudnn" if name.startswith("cudnn") else name
    if root:
        version = _version_json(root).get(VERSION_JSON_KEYS.get(base, ""), "")
        if version:
            found["version.json"] = version
        dist = _dist_info_versions(root).get(DIST_INFO_NAMES.get(base, ""), "")
        if dist:
            found["dist-info"] = dist
    include_dirs = [os.path.join(root, "include")] if root else []
    if d.found_by == "system directory" or (d.found_by == "ldconfig cache" and d.path.startswith("/usr/lib")):
        include_dirs += list(probe_input.system_include_dirs)
    if d.wheel:
        include_dirs.append(os.path.join(os.path.dirname(d.path), "include"))
    for include in include_dirs:
        header = header_version(include, base)
        if header:
            found["header"] = header
            break
    return found


_json_cache: dict[str, dict[str, str]] = {}
_dist_cache: dict[str, dict[str, str]] = {}


def _version_json(root: str) -> dict[str, str]:
    if root not in _json_cache:
        versions: dict[str, str] = {}
        try:
            path = Path(root, "version.json")
            data = parse_json(read_text(path, "a version.json", limit=2**20), str(path))
            for key, value in data.items():
                if isinstance(value, dict) and isinstance(value.get("version"), str):
                    versions[key] = value["version"]
        except (OSError, ValueError, AttributeError):  # InputError is a ValueError
            pass
        _json_cache[root] = versions
    return _json_cache[root]


def _dist_info_versions(root: str) -> dict[str, str]:
    """Toolkits installed from wheels keep ``dist-info/nvidia_cuda_runtime-13.0.96.dist-info``."""
    if root not in _dist_cache:
        versions: dict[str, str] = {}
        for dist in glob.glob(os.path.join(root, "dist-info", "nvidia_*.dist-info")):
            match = re.match(r"^nvidia_(.+?)(?:_cu\d+)?-([^-]+)\.dist-info$", os.path.basename(dist))
            if match:
                versions[match.group(1).lower()] = match.group(2)
        _dist_cache[root] = versions
    return _dist_cache[root]


HEADERS = {
    "cudart": ("cuda_runtime_api.h", ("CUDART_VERSION",)),
    "cudnn": ("cudnn_version.h", ("CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL")),
    "nccl": ("nccl.h", ("NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH")),
    "cublas": ("cublas_api.h", ("CUBLAS_VER_MAJOR", "CUBLAS_VER_MINOR", "CUBLAS_VER_PATCH")),
    "cublasLt": ("cublas_api.h", ("CUBLAS_VER_MAJOR", "CUBLAS_VER_MINOR", "CUBLAS_VER_PATCH")),
}


def header_version(include_dir: str, name: str) -> str:
    """The version a header in ``include_dir`` declares for library ``name``; "" when none."""
    if name not in HEADERS:
        return ""
    file_name, macros = HEADERS[name]
    candidates = [file_name] + (["cudnn.h"] if name == "cudnn" else [])  # cuDNN <= 7 had no cudnn_version.h
    for candidate in candidates:
        try:
            text = Path(include_dir, candidate).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        values = []
        for macro in macros:
            match = re.search(rf"#define\s+{macro}\s+(\d+)", text)
            if not match:
                break
            values.append(int(match.group(1)))
        if len(values) != len(macros):
            continue
        if name == "cudart":  # 12050 -> 12.5
            return f"{values[0] // 1000}.{(values[0] % 1000) // 10}"
        return ".".join(str(v) for v in values)
    return ""


def _tool_copies(env: Mapping[str, str], toolkit_roots: list[tuple[str, str]], site_packages: Sequence[str],
                 run_tools: bool) -> list[LibraryCopy]:
    places: list[tuple[str, str, bool, str]] = []  # (dir, found_by, on PATH, root)
    for entry in env.get("PATH", "").split(":"):
        if entry:
            places.append((entry, "PATH", True, _root_of_bin(entry)))
    for root, how in toolkit_roots:
        places.append((os.path.join(root, "bin"), how, False, root))
    for site in site_packages:
        places.append((os.path.join(site, "nvidia", "cuda_nvcc", "bin"), "pip wheel", False,
                       os.path.join(site, "nvidia", "cuda_nvcc")))
    copies: list[LibraryCopy] = []
    seen: set[tuple[str, str]] = set()
    for tool in TOOLS:
        for directory, how, on_path, root in places:
            path = os.path.join(directory, tool)
            if not os.path.isfile(path) or not os.access(path, os.X_OK):
                continue
            real = os.path.realpath(path)
            if (tool, real) in seen:
                continue
            seen.add((tool, real))
            versions: dict[str, str] = {}
            if root:
                for source, value in (("version.json", _version_json(root).get("cuda_nvcc", "")),
                                      ("dist-info", _dist_info_versions(root).get("cuda_nvcc", ""))):
                    if value:
                        versions[source] = value
            if run_tools:
                said = tool_version(path)
                if said:
                    versions["--version"] = said
            copies.append(LibraryCopy(tool, tool, path, real, how, on_path, versions))
    return copies


def _root_of_bin(bin_dir: str) -> str:
    path = Path(bin_dir)
    return str(path.parent) if path.name == "bin" and (path.parent / "version.json").exists() else ""


def tool_version(path: str) -> str:
    """``ptxas --version`` / ``nvcc --version``: "Cuda compilation tools, release 12.5, V12.5.82"."""
    out = run_tool([path, "--version"], TOOL_TIMEOUT_S).stdout  # garbage costs no other fact
    number = r"\d{1,6}"  # not a 5000-digit "version" from a program that only looks like nvcc
    match = (re.search(rf"\bV({number}\.{number}\.{number})\b", out)
             or re.search(rf"release ({number}\.{number})\b", out))
    return match.group(1) if match else ""


def _toolkit(root: str, how: str) -> CudaToolkit:
    json_version = _version_json(root).get("cuda", "")
    if json_version:
        return CudaToolkit(root, how, json_version, "version.json")
    dist = _dist_info_versions(root).get("cuda_runtime", "")
    if dist:
        return CudaToolkit(root, how, dist, "dist-info")
    header = header_version(os.path.join(root, "include"), "cudart")
    if header:
        return CudaToolkit(root, how, header, "header")
    return CudaToolkit(root, how, absent("no version.json, dist-info or cuda_runtime_api.h"))


def _dedupe_toolkits(toolkits: list[CudaToolkit]) -> list[CudaToolkit]:
    seen: set[str] = set()
    out = []
    for kit in toolkits:
        real = os.path.realpath(kit.path)
        if real in seen and kit.found_by not in ("CUDA_HOME", "CUDA_PATH"):
            continue
        seen.add(real)
        out.append(kit)
    return out


def load_library_versions(copies: list[LibraryCopy], interpreter: Interpreter) -> list[LibraryCopy]:
    """Load each library in a child process and record its version or the loader's error.

    Each round loads at most one file per soname, so two copies of one library never meet in a
    process. A load that crashes or hangs marks that file and the round goes on in a new child.
    Each file is opened by ``path``, as the loader finds it, not by its resolved target: a
    RUNPATH's ``$ORIGIN`` is the directory of the path opened (a ``libcudnn.so.9`` symlinked
    away from its sub-libraries aborts there, and so it must here).
    """
    pending = [c for c in copies if c.name in LOADABLE]
    results: dict[str, dict[str, str]] = {}
    while pending:
        batch: list[LibraryCopy] = []
        taken: set[str] = set()
        rest: list[LibraryCopy] = []
        for copy in pending:
            (rest if copy.soname in taken else batch).append(copy)
            taken.add(copy.soname)
        while batch:
            done = _run_batch(batch, interpreter)
            results.update(done)
            batch = [c for c in batch if c.path not in results]
        pending = rest
    out = []
    for copy in copies:
        entry = results.get(copy.path)
        if entry is None:
            out.append(copy)
            continue
        versions = dict(copy.versions)
        if entry.get("version"):
            versions["ctypes"] = entry["version"]
        out.append(replace(copy, versions=versions, load_error=entry.get("error", "")))
    return out


def _run_batch(batch: list[LibraryCopy], interpreter: Interpreter) -> dict[str, dict[str, str]]:
    jobs = [{"path": c.path, "name": c.name} for c in batch]
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="mgpu-doctor-libs-", delete=False) as fh:
        json.dump(jobs, fh)
        jobs_file = fh.name
    try:
        outcome = interpreter.run_script("library_versions.py", jobs_file, timeout_s=LOAD_TIMEOUT_S,
                                         stall_timeout_s=LOAD_STALL_S)
    finally:
        os.unlink(jobs_file)
    got: dict[str, dict[str, str]] = {}
    raw = outcome.result.get("results", {}) if isinstance(outcome.result, dict) else {}
    for path, entry in raw.items():
        if isinstance(entry, dict):
            got[str(path)] = {str(k): str(v) for k, v in entry.items()}
    if not (isinstance(outcome.result, dict) and outcome.result.get("done")):
        # The first file without a final result is the one the child was busy with when it died.
        culprit = next((c for c in batch if c.path not in got or "calling" in got[c.path]), None)
        if culprit is not None:
            calling = got.get(culprit.path, {}).get("calling", "")
            doing = f"it loaded, but {calling}()" if calling else "loading it"
            said = library_said(outcome.stderr)
            error = f"{doing} {outcome.failure_summary()}" + (f": {said}" if said else "")
            got[culprit.path] = {"error": error}
    return {path: entry for path, entry in got.items() if "calling" not in entry}


FAULTHANDLER_START = ("Fatal Python error", "Current thread", "Thread 0x")
SAID_MAX_CHARS = 400


def library_said(stderr: str) -> str:
    """What a library printed before it killed the child, without faulthandler's stack dump.

    cuDNN prints why it aborts ("Unable to load any of {libcudnn_graph.so.9.3.0, ...}") and
    then calls abort(); those words are the useful part of the error.
    """
    lines: list[str] = []
    for line in stderr.splitlines():
        if line.startswith(FAULTHANDLER_START):
            break
        if line.strip():
            lines.append(line.strip())
    text = "; ".join(lines[-2:])
    return text if len(text) <= SAID_MAX_CHARS else text[:SAID_MAX_CHARS - 3] + "..."

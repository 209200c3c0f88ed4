"""Find every copy of the CUDA libraries and tools, in the order the dynamic loader considers them.

Search order (what `dlopen("libcudnn.so.9")` from TensorFlow does): LD_LIBRARY_PATH, then
TensorFlow's RUNPATH (the pip `nvidia/*/lib` wheels, TensorFlow 2.14+), then the loader cache
(`ldconfig -p`), then the default system directories. Toolkits that are *not* on that path
(CUDA_HOME / CUDA_PATH, /usr/local/cuda*, the active conda environment) are listed too, so a
user can see the copy they think they use and why it is not the one loaded.

Versions come from the file names, and from the sources in
:mod:`~mgpu_doctor.probes.library_version_sources` (the wheel metadata, a toolkit's version.json
or dist-info, headers, a tool's ``--version``), and (unless ``load_versions`` is off) from
loading each library with ctypes in a child process (:mod:`~mgpu_doctor.probes.library_loading`);
a library that fails to load records the loader's error. None of this needs a GPU.
"""

from __future__ import annotations

import glob
import os
import platform
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from mgpu_doctor.environment.library_copies import LIBRARY_FILE, TOOLS
from mgpu_doctor.model.snapshot import XLA_DATA_DIR_LABEL, CudaToolkit, LibraryCopy, LibraryFacts, SearchDir
from mgpu_doctor.model.unavailable import absent
from mgpu_doctor.probes.library_loading import load_library_versions
from mgpu_doctor.probes.library_version_sources import (
    DIST_INFO_NAMES,
    VERSION_JSON_KEYS,
    dist_info_versions,
    header_version,
    tool_version,
    version_json,
    wheel_of,
)
from mgpu_doctor.probes.loader_listing import loader_listing
from mgpu_doctor.process.interpreter import Interpreter
from mgpu_doctor.record import field, record

XLA_DATA_DIR = XLA_DATA_DIR_LABEL
DEFAULT_DIRS = ("/lib64", "/usr/lib64", "/lib", "/usr/lib")


@record
class LibraryProbeInput:
    """What discovery looks at; tests pass their own trees, the CLI passes this machine's."""

    env: Mapping[str, str]
    site_packages: Sequence[str] = ()
    ldconfig_entries: Sequence[tuple[str, str]] | None = None  # (name, path); None: run ldconfig -p
    default_dirs: Sequence[str] = DEFAULT_DIRS
    cuda_globs: Sequence[str] = ("/usr/local/cuda*",)
    loaded_by_tensorflow: Sequence[str] = ()
    system_include_dirs: Sequence[str] = ("/usr/include",)


@record(frozen=False)
class _Dir:
    """One directory discovery looks in, how it was found, and the toolkit or wheel it belongs to."""

    path: str
    found_by: str
    on_path: bool
    root: str = ""  # toolkit root for version.json / dist-info / headers
    wheel: str = ""
    wheel_version: str = ""


@record(frozen=False)
class _State:
    """The directories found so far, in the loader's order, each once."""

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
            wheel, version = wheel_of(site, lib_dir)
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
    out = loader_listing()
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

def _root_versions(d: _Dir, name: str, probe_input: LibraryProbeInput) -> dict[str, str]:
    found: dict[str, str] = {}
    root = d.root
    base = "cudnn" if name.startswith("cudnn") else name
    if root:
        version = version_json(root).get(VERSION_JSON_KEYS.get(base, ""), "")
        if version:
            found["version.json"] = version
        dist = dist_info_versions(root).get(DIST_INFO_NAMES.get(base, ""), "")
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
                for source, value in (("version.json", version_json(root).get("cuda_nvcc", "")),
                                      ("dist-info", dist_info_versions(root).get("cuda_nvcc", ""))):
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

def _toolkit(root: str, how: str) -> CudaToolkit:
    json_version = version_json(root).get("cuda", "")
    if json_version:
        return CudaToolkit(root, how, json_version, "version.json")
    dist = dist_info_versions(root).get("cuda_runtime", "")
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

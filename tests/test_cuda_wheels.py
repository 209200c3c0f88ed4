"""The version decoders on the real cuDNN, NCCL, cuBLAS and CUDA runtime libraries, without a GPU.

The libraries come from the real `nvidia-*` wheels that `tensorflow[and-cuda]` pins (cuDNN 9 for
TensorFlow 2.21, cuDNN 8 for 2.16: their version numbers are encoded differently), installed
once into a cache by tests/cuda_wheels.py (about 2 GB to download the first time, hence `slow`).
Each library is loaded by the real child script, found by the real discovery in a site laid out
by pip, and its decoded version is compared with the version in its wheel's own METADATA.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mgpu_doctor.checks import CHECKS
from mgpu_doctor.model.snapshot import LibraryFacts, load_snapshot
from mgpu_doctor.probes.libraries import LibraryProbeInput, gather_libraries
from mgpu_doctor.probes.library_loading import load_library_versions
from mgpu_doctor.process.interpreter import Interpreter
from mgpu_doctor.record import replace
from tests.checking import judge
from tests.cuda_wheels import SITES, WheelsUnavailable, dist_version, site_dir
from tests.scenarios import path_of

pytestmark = pytest.mark.slow

BY_NAME = {s.name: s for s in SITES}
# (site, library, wheel, version parts the library's own function reports)
LIBRARIES = [
    ("tensorflow-2.21.0", "cudnn", "nvidia-cudnn-cu12", 3),
    ("tensorflow-2.21.0", "nccl", "nvidia-nccl-cu12", 3),
    ("tensorflow-2.21.0", "cublas", "nvidia-cublas-cu12", 3),
    ("tensorflow-2.21.0", "cublasLt", "nvidia-cublas-cu12", 3),
    ("tensorflow-2.21.0", "cudart", "nvidia-cuda-runtime-cu12", 2),  # cudaRuntimeGetVersion: 12050
    ("tensorflow-2.16.1", "cudnn", "nvidia-cudnn-cu12", 3),
]
HEADERS = {"cudnn", "nccl", "cublas", "cublasLt", "cudart"}  # each wheel ships its version header


@pytest.fixture(scope="session")
def wheel_sites():
    """Site name -> installed site directory, installed on first use."""
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            try:
                cache[name] = site_dir(BY_NAME[name])
            except WheelsUnavailable as exc:
                if os.environ.get("CI"):  # CI reaches the package index: it must run these
                    raise
                pytest.skip(f"cannot install the CUDA wheels: {exc}")
        return cache[name]

    return get


def discover(site: Path, **env: str) -> LibraryFacts:
    probe = LibraryProbeInput(env={"PATH": "", **env}, site_packages=[str(site)], ldconfig_entries=[],
                              default_dirs=[], cuda_globs=[])
    return gather_libraries(probe, load_versions=False)


def expected(site: Path, wheel: str, parts: int) -> str:
    return ".".join(dist_version(site, wheel).split(".")[:parts])


@pytest.mark.parametrize("site_name,library,wheel,parts", LIBRARIES,
                         ids=[f"{s}-{lib}" for s, lib, _, _ in LIBRARIES])
def test_each_real_library_alone_says_the_version_of_its_wheel(wheel_sites, site_name, library, wheel, parts):
    """Loaded alone in the child (no libcudart, no other library first), no GPU: NCCL links its
    runtime statically, cuBLAS finds libcublasLt through its RUNPATH ($ORIGIN), cuDNN's
    libcudnn.so.N loads its sub-library (graph for 9, ops_infer for 8) from its own directory."""
    site = wheel_sites(site_name)
    [copy] = [c for c in discover(site).copies if c.name == library]
    assert copy.wheel == wheel and copy.versions["wheel"] == dist_version(site, wheel)
    [loaded] = load_library_versions([copy], Interpreter.current())
    assert loaded.load_error == ""
    assert loaded.versions["ctypes"] == expected(site, wheel, parts)
    if library in HEADERS:
        header = loaded.versions["header"]
        assert header == expected(site, wheel, len(header.split(".")))


def test_cudnn_8_and_9_decode_to_their_wheels(wheel_sites):
    """cudnnGetVersion is 8907 for 8.9.7 and 90300 for 9.3.0: one decoder, both encodings."""
    versions = {}
    for name in ("tensorflow-2.16.1", "tensorflow-2.21.0"):
        site = wheel_sites(name)
        [copy] = load_library_versions([c for c in discover(site).copies if c.name == "cudnn"],
                                       Interpreter.current())
        versions[copy.soname] = (copy.versions["ctypes"], expected(site, "nvidia-cudnn-cu12", 3))
    assert set(versions) == {"libcudnn.so.8", "libcudnn.so.9"}
    assert all(got == want for got, want in versions.values()), versions


@pytest.mark.parametrize("site_name,sub_library", [("tensorflow-2.21.0", "libcudnn_graph.so.9"),
                                                   ("tensorflow-2.16.1", "libcudnn_ops_infer.so.8")])
def test_a_cudnn_symlinked_away_from_its_sub_libraries_fails_as_it_would_for_tensorflow(
        wheel_sites, tmp_path, site_name, sub_library):
    """A `libcudnn.so.N` symlinked onto LD_LIBRARY_PATH: the loader's $ORIGIN is the link's
    directory, where the sub-library is not, and cudnnGetVersion aborts the process. The doctor
    opens the path the loader opens, so it reports that abort with cuDNN's own words."""
    site = wheel_sites(site_name)
    [real] = [c for c in discover(site).copies if c.name == "cudnn"]
    linked = tmp_path / "lib"
    linked.mkdir()
    (linked / real.soname).symlink_to(real.real_path)
    facts = discover(site, LD_LIBRARY_PATH=str(linked))
    [copy] = [c for c in facts.copies if c.name == "cudnn"]  # one file, found first through the link
    assert copy.path == str(linked / real.soname) and copy.found_by == "LD_LIBRARY_PATH"
    [loaded] = load_library_versions([copy], Interpreter.current())
    assert "ctypes" not in loaded.versions
    assert loaded.load_error.startswith("it loaded, but cudnnGetVersion() crashed with SIGABRT: ")
    assert sub_library in loaded.load_error
    check = next(c for c in CHECKS if c.name == "library-copies")
    libs = replace(facts, copies=[loaded], versions_loaded=True)
    outcome = judge(check, replace(load_snapshot(path_of("healthy-8gpu-nvlink")), libraries=libs))
    findings = [f for f in outcome.findings if f.code == "libraries.load-failed"]
    assert [f.title for f in findings] == [f"{copy.path} fails to load"]
    assert sub_library in findings[0].evidence[0]


def venv_over(site: Path, tmp_path: Path) -> Path:
    """A virtual environment whose site-packages is ``site``: the interpreter a user trains with."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    [packages] = venv.glob("lib/python*/site-packages")
    packages.rmdir()
    packages.symlink_to(site, target_is_directory=True)
    return venv / "bin" / "python"


def doctor(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH")}
    return subprocess.run([sys.executable, "-m", "mgpu_doctor", *argv], env=env, capture_output=True,
                          text=True, timeout=300)


def test_snapshot_and_libs_show_the_real_versions(wheel_sites, tmp_path):
    """`snapshot --python` on an environment of real wheels, then `libs --from` that snapshot."""
    site = wheel_sites("tensorflow-2.21.0")
    python = venv_over(site, tmp_path)
    out = tmp_path / "snapshot.json"
    done = doctor("snapshot", "--python", str(python), "--no-redact", "-o", str(out))
    assert done.returncode == 0, done.stderr
    libs = load_snapshot(out).libraries
    assert isinstance(libs, LibraryFacts) and libs.versions_loaded
    want = {lib: expected(site, wheel, parts) for s, lib, wheel, parts in LIBRARIES if s == "tensorflow-2.21.0"}
    in_site = [c for c in libs.copies if c.real_path.startswith(str(site)) and c.name in want]
    assert {c.name: c.versions.get("ctypes") for c in in_site} == want
    assert all(c.load_error == "" for c in in_site)

    human = doctor("libs", "--from", str(out))
    assert human.returncode in (0, 1), human.stderr
    for copy in in_site:
        assert f"{copy.path}  {want[copy.name]} (ctypes)" in human.stdout, human.stdout
    report = doctor("libs", "--from", str(out), "--format", "json")
    rows = {r["name"]: r for r in json.loads(report.stdout)["libraries"]["rows"]}
    for copy in in_site:
        [shown] = [c for c in rows[copy.name]["copies"] if c["path"] == copy.path]
        assert (shown["version"], shown["version_source"], shown["load_error"]) == (want[copy.name], "ctypes", "")


def test_a_site_of_all_four_wheels_loads_in_one_child(wheel_sites):
    """What the probe does on a user's machine: every copy of the site in one round of children."""
    site = wheel_sites("tensorflow-2.21.0")
    probe = LibraryProbeInput(env={"PATH": ""}, site_packages=[str(site)], ldconfig_entries=[],
                              default_dirs=[], cuda_globs=[])
    facts = gather_libraries(probe, Interpreter.current(), load_versions=True)
    loaded = {c.name: c for c in facts.copies if "ctypes" in c.versions}
    assert set(loaded) == {lib for s, lib, _, _ in LIBRARIES if s == "tensorflow-2.21.0"}
    assert not [c for c in facts.copies if c.load_error]
    for s, lib, wheel, parts in LIBRARIES:
        if s == "tensorflow-2.21.0":
            assert loaded[lib].versions["ctypes"] == expected(site, wheel, parts)

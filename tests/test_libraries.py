"""CUDA library discovery, version reading and the library checks, on real file trees.

Trees are built in tmp_path with files named like the real libraries (sonames, symlinks,
headers with version macros, wheel metadata). Libraries that must *load* are real: the
nvidia-cuda-runtime-cu12 wheel of the test extra, loaded with ctypes in a child, no GPU needed.
"""

from __future__ import annotations

import json
import site
from pathlib import Path

import pytest
from packaging.version import Version

from mgpu_doctor.checks import CHECKS
from mgpu_doctor.cli import main
from mgpu_doctor.matrix import compat_tables
from mgpu_doctor.matrix.compat_tables import CompatTableError, load_cuda_driver_table, load_tensorflow_table
from mgpu_doctor.model.findings import Severity
from mgpu_doctor.model.snapshot import LibraryCopy, load_snapshot, snapshot_from_data
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.probes.libraries import LibraryProbeInput, gather_libraries
from mgpu_doctor.probes.library_loading import library_said, load_library_versions
from mgpu_doctor.process.interpreter import Interpreter
from mgpu_doctor.record import replace
from tests.checking import judge
from tests.scenarios import (
    AND_CUDA,
    TF_REQUIRES,
    libcuda_copy,
    packages,
    path_of,
    pip_cuda_libraries,
    real_cudart,
)

BY_NAME = {c.name: c for c in CHECKS}


def codes(snapshot, check_name):
    outcome = judge(BY_NAME[check_name], snapshot)
    return {f.code: f.severity for f in outcome.findings}, outcome


def touch(path: Path, text: str = "not really a library\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def link(path: Path, target: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)


def cudnn_tree(tmp_path: Path) -> LibraryProbeInput:
    """cuDNN 9.1 on LD_LIBRARY_PATH, 9.3 from the pip wheel, CUDA 12.5 toolkit off the path."""
    ld = tmp_path / "opt/cudnn-9.1/lib"
    touch(ld / "libcudnn.so.9.1.0")
    link(ld / "libcudnn.so.9", "libcudnn.so.9.1.0")
    link(ld / "libcudnn.so", "libcudnn.so.9")
    touch(ld / "libcudnn_ops.so.9.1.0")
    link(ld / "libcudnn_ops.so.9", "libcudnn_ops.so.9.1.0")
    site_dir = tmp_path / "venv/site-packages"
    touch(site_dir / "nvidia/cudnn/lib/libcudnn.so.9")
    touch(site_dir / "nvidia/cudnn/include/cudnn_version.h",
          "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 3\n#define CUDNN_PATCHLEVEL 0\n")
    (site_dir / "nvidia_cudnn_cu12-9.3.0.75.dist-info").mkdir(parents=True)
    touch(site_dir / "nvidia/cuda_runtime/lib/libcudart.so.12")
    (site_dir / "nvidia_cuda_runtime_cu12-12.5.82.dist-info").mkdir(parents=True)
    kit = tmp_path / "usr/local/cuda-12.5"
    touch(kit / "lib64/libcudart.so.12.5.82")
    link(kit / "lib64/libcudart.so.12", "libcudart.so.12.5.82")
    touch(kit / "include/cuda_runtime_api.h", "#define CUDART_VERSION 12050\n")
    touch(kit / "version.json", json.dumps({"cuda": {"version": "12.5.1"},
                                            "cuda_cudart": {"version": "12.5.82"}}))
    system = tmp_path / "usr/lib"
    touch(system / "libcuda.so.560.35.03")
    link(system / "libcuda.so.1", "libcuda.so.560.35.03")
    return LibraryProbeInput(
        env={"LD_LIBRARY_PATH": f"{ld}:{tmp_path / 'gone'}", "PATH": ""},
        site_packages=[str(site_dir)], ldconfig_entries=[], default_dirs=[str(system)],
        cuda_globs=[str(tmp_path / "usr/local/cuda*")], system_include_dirs=[],
    )


def test_discovery_order_versions_and_shadowing(tmp_path):
    facts = gather_libraries(cudnn_tree(tmp_path), load_versions=False)
    cudnn = [c for c in facts.copies if c.name == "cudnn"]
    assert [(c.found_by, c.on_search_path) for c in cudnn] == [
        ("LD_LIBRARY_PATH", True), ("pip wheel (TensorFlow's RUNPATH)", True)]
    assert cudnn[0].soname == "libcudnn.so.9" and cudnn[0].versions == {"soname": "9", "filename": "9.1.0"}
    assert cudnn[1].wheel == "nvidia-cudnn-cu12"
    assert cudnn[1].versions == {"soname": "9", "wheel": "9.3.0.75", "header": "9.3.0"}
    assert [c.name for c in facts.copies if c.name.startswith("cudnn_")] == ["cudnn_ops"]
    cudart = [c for c in facts.copies if c.name == "cudart"]
    assert [(c.found_by, c.on_search_path) for c in cudart] == [
        ("pip wheel (TensorFlow's RUNPATH)", True), (str(tmp_path / "usr/local/cuda*"), False)]
    assert cudart[1].versions == {"soname": "12", "filename": "12.5.82", "version.json": "12.5.82",
                                  "header": "12.5"}
    driver = [c for c in facts.copies if c.name == "cuda"]
    assert driver[0].versions["filename"] == "560.35.03" and driver[0].found_by == "system directory"
    assert [(t.version, t.version_source) for t in facts.toolkits] == [("12.5.1", "version.json")]
    assert [d.path for d in facts.search_dirs if not d.exists] == [str(tmp_path / "gone")]


def tree_snapshot(scenario, facts):
    snap = scenario("healthy-8gpu-nvlink")
    return replace(snap, libraries=facts, tensorflow=replace(snap.tensorflow, loaded_libraries=[]))


def test_shadowed_cudnn_on_ld_library_path_is_found_and_named(scenario, tmp_path):
    snap = tree_snapshot(scenario, gather_libraries(cudnn_tree(tmp_path), load_versions=False))
    found, outcome = codes(snap, "library-copies")
    assert found == {"libraries.shadowed": Severity.WARNING}
    [finding] = outcome.findings
    assert "opt/cudnn-9.1/lib/libcudnn.so.9 (9.1.0 from filename; LD_LIBRARY_PATH" in finding.evidence[0]
    assert "9.3.0.75" in finding.evidence[1]
    found, outcome = codes(snap, "cuda-libraries")
    assert found["libraries.older-minor"] is Severity.ERROR  # cuDNN 9.1 < 9.3: TensorFlow refuses it
    env, _ = codes(replace(snap, env={"LD_LIBRARY_PATH": "x"}), "cuda-environment")
    assert env == {"cuda-env.ld-library-path-missing": Severity.WARNING}


def test_no_shadowing_when_one_copy(scenario, tmp_path):
    probe = cudnn_tree(tmp_path)
    probe = replace(probe, env={"PATH": ""})
    snap = tree_snapshot(scenario, gather_libraries(probe, load_versions=False))
    found, _ = codes(snap, "library-copies")
    assert set(found) == {"libraries.one-copy"}


def test_garbage_file_named_like_a_library_fails_to_load_clearly(scenario, tmp_path):
    garbage = touch(tmp_path / "lib/libcudart.so.12", "this is not an ELF file\n" * 100)
    copy = LibraryCopy("cudart", "libcudart.so.12", str(garbage), str(garbage), "LD_LIBRARY_PATH", True)
    [loaded] = load_library_versions([copy], Interpreter.current())
    assert "ctypes" not in loaded.versions
    assert str(garbage) in loaded.load_error and "header" in loaded.load_error  # invalid ELF header
    libs = replace(pip_cuda_libraries(), copies=[loaded])
    found, outcome = codes(replace(scenario("healthy-8gpu-nvlink"), libraries=libs), "library-copies")
    assert found == {"libraries.load-failed": Severity.ERROR}
    assert outcome.findings[0].title == f"{garbage} fails to load"


@pytest.mark.parametrize("stderr,said", [
    # cuDNN 9.3's own words (recorded from the real wheel, tests/test_cuda_wheels.py), then faulthandler
    ("Unable to load any of {libcudnn_graph.so.9.3.0, libcudnn_graph.so.9}\n"
     "Invalid handle. Cannot load symbol cudnnGetVersion\nFatal Python error: Aborted\n\n"
     "Current thread 0x00007f0dac5deb80 (most recent call first):\n  File \"x.py\", line 78 in version_of\n",
     "Unable to load any of {libcudnn_graph.so.9.3.0, libcudnn_graph.so.9}; "
     "Invalid handle. Cannot load symbol cudnnGetVersion"),
    ("Fatal Python error: Segmentation fault\n\nCurrent thread 0x1 (most recent call first):\n", ""),
    ("Thread 0x00007f (most recent call first):\n  File \"x.py\", line 1\n", ""),  # stacks after a stall
    ("x" * 1000 + "\n", "x" * 397 + "..."),
])
def test_what_a_library_said_before_it_killed_the_child(stderr, said):
    assert library_said(stderr) == said


@pytest.mark.skipif(real_cudart() is None, reason="nvidia-cuda-runtime-cu12 (test extra) is not installed")
def test_real_cuda_runtime_wheel_loads_and_says_its_version_without_a_gpu(tmp_path):
    lib = real_cudart()
    assert lib is not None
    probe = LibraryProbeInput(env={"PATH": ""}, site_packages=[str(lib.parents[3])], ldconfig_entries=[],
                              default_dirs=[], cuda_globs=[])
    facts = gather_libraries(probe, Interpreter.current(), load_versions=True)
    [cudart] = [c for c in facts.copies if c.name == "cudart"]
    assert cudart.load_error == ""
    wheel = cudart.versions["wheel"]
    assert cudart.wheel == "nvidia-cuda-runtime-cu12"
    assert cudart.versions["ctypes"] == ".".join(wheel.split(".")[:2])  # 12.5.82 says 12.5
    assert facts.versions_loaded


# --- the compatibility tables, every tested TensorFlow configuration both ways ----------------------

TF_TABLE = load_tensorflow_table(Path(compat_tables.bundled_matrix_dir()) / compat_tables.TENSORFLOW_FILE)
DRIVERS = load_cuda_driver_table(Path(compat_tables.bundled_matrix_dir()) / compat_tables.CUDA_DRIVER_FILE)


def configured(scenario, tf_version: str, cuda: str, cudnn: str, driver: str):
    """A healthy box running exactly ``cuda`` / ``cudnn`` for TensorFlow ``tf_version``."""
    # A loaded libcudart reports its full version: the table's "9" (TensorFlow 1.9-1.12, which
    # open libcudart.so.9.0) is 9.0 on a machine, not every 9.x.
    cuda = cuda if "." in cuda else f"{cuda}.0"
    snap = scenario("healthy-8gpu-nvlink")
    libs = pip_cuda_libraries(driver)
    major = cuda.split(".")[0]
    copies = []
    for c in libs.copies:
        if c.name == "cudart":
            c = replace(c, soname=f"libcudart.so.{major}", wheel=f"nvidia-cuda-runtime-cu{major}",
                        versions={"ctypes": cuda})
        elif c.name == "cudnn":
            c = replace(c, soname=f"libcudnn.so.{cudnn.split('.')[0]}", versions={"ctypes": cudnn})
        elif c.wheel:
            c = replace(c, wheel=c.wheel.replace("cu12", f"cu{major}"))
        copies.append(c)
    build = dict(snap.tensorflow.build_info, cuda_version=cuda, cudnn_version=cudnn.split(".")[0])
    tf = replace(snap.tensorflow, version=tf_version, build_info=build,
                 loaded_libraries=[c.real_path for c in copies])
    nvml = replace(snap.nvml, driver_version=driver, cuda_driver_version=cuda)
    return replace(snap, libraries=replace(libs, copies=copies), tensorflow=tf, nvml=nvml,
                   packages=packages(tensorflow=tf_version))


def lower(version: str) -> str:
    parts = version.split(".")
    parts[-1] = str(int(parts[-1]) - 1)
    return ".".join(parts)


def worst(snap, check):
    return max((f.severity for f in judge(BY_NAME[check], snap).findings), default=Severity.OK)


@pytest.mark.parametrize("build", TF_TABLE.builds, ids=lambda b: b.tensorflow)
def test_every_tested_tensorflow_configuration_passes_with_a_new_enough_driver(scenario, build):
    need = DRIVERS.requirement(build.cuda)
    assert need is not None and need.full_driver, f"CUDA {build.cuda} has no driver row"
    snap = configured(scenario, build.tensorflow, build.cuda, build.cudnn, need.full_driver)
    assert worst(snap, "cuda-libraries") is Severity.OK, judge(BY_NAME["cuda-libraries"], snap)
    assert codes(snap, "driver-cuda")[0] == {"driver.ok": Severity.OK}


@pytest.mark.parametrize("build", TF_TABLE.builds, ids=lambda b: b.tensorflow)
def test_every_tested_configuration_off_by_one_raises_the_right_finding(scenario, build):
    need = DRIVERS.requirement(build.cuda)
    assert need is not None and need.full_driver
    # The driver one step below the minimum that applies: too old.
    minimum = min(filter(None, (need.compat_driver, need.full_driver)), key=Version)
    snap = configured(scenario, build.tensorflow, build.cuda, build.cudnn, lower(minimum))
    assert "driver.too-old" in codes(snap, "driver-cuda")[0]
    if need.compat_driver and Version(need.compat_driver) < Version(need.full_driver):
        snap = configured(scenario, build.tensorflow, build.cuda, build.cudnn, lower(need.full_driver))
        assert codes(snap, "driver-cuda")[0] == {"driver.minor-compat": Severity.WARNING}
    full = need.full_driver
    cuda_major, cuda_minor = (int(x) for x in (build.cuda.split(".") + ["0"])[:2])
    cudnn_major = int(build.cudnn.split(".")[0])
    other_major = configured(scenario, build.tensorflow, f"{cuda_major + 1}.0", build.cudnn, full)
    other_major = replace(other_major, tensorflow=configured(scenario, build.tensorflow, build.cuda,
                                                             build.cudnn, full).tensorflow)
    assert codes(other_major, "cuda-libraries")[0].get("libraries.major-mismatch") is Severity.ERROR
    newer = configured(scenario, build.tensorflow, build.cuda, build.cudnn, full)
    newer_libs = [replace(c, versions={"ctypes": f"{cuda_major}.{cuda_minor + 1}"}) if c.name == "cudart" else c
                  for c in newer.libraries.copies]
    newer = replace(newer, libraries=replace(newer.libraries, copies=newer_libs))
    # before CUDA 11 libcudart's file name carries the minor: another minor is not loadable at all
    soname_bound = cuda_major < 11
    assert codes(newer, "cuda-libraries")[0].get(
        "libraries.soname-minor" if soname_bound else "libraries.newer-minor") is (
        Severity.ERROR if soname_bound else Severity.INFO)
    cudnn_next = configured(scenario, build.tensorflow, build.cuda, build.cudnn, full)
    cudnn_libs = [replace(c, versions={"ctypes": f"{cudnn_major + 1}.0.0"}) if c.name == "cudnn" else c
                  for c in cudnn_next.libraries.copies]
    cudnn_next = replace(cudnn_next, libraries=replace(cudnn_next.libraries, copies=cudnn_libs))
    assert codes(cudnn_next, "cuda-libraries")[0].get("libraries.major-mismatch") is Severity.ERROR
    if "." in build.cudnn and int(build.cudnn.split(".")[1]) > 0:
        old = lower(build.cudnn)
        older = configured(scenario, build.tensorflow, build.cuda, old, full)
        older = replace(older, tensorflow=newer.tensorflow)
        assert codes(older, "cuda-libraries")[0].get("libraries.older-minor") is Severity.ERROR
    if cuda_minor > 0:
        older_rt = configured(scenario, build.tensorflow, f"{cuda_major}.{cuda_minor - 1}", build.cudnn, full)
        older_rt = replace(older_rt, tensorflow=newer.tensorflow)
        assert codes(older_rt, "cuda-libraries")[0].get(
            "libraries.soname-minor" if soname_bound else "libraries.older-minor") is (
            Severity.ERROR if soname_bound else Severity.WARNING)


def test_missing_library_names_what_is_off_the_path(scenario):
    snap = scenario("tensorflow-import-fails")
    found, outcome = codes(snap, "cuda-libraries")
    assert found == {"libraries.missing": Severity.ERROR}
    assert "libcudnn" in outcome.findings[0].title and "tensorflow[and-cuda]==2.21.0" in outcome.findings[0].fix


def test_libcuda_that_does_not_match_the_kernel_driver(scenario):
    snap = scenario("healthy-8gpu-nvlink")
    copies = [libcuda_copy("565.57.01") if c.name == "cuda" else c for c in snap.libraries.copies]
    snap = replace(snap, libraries=replace(snap.libraries, copies=copies))
    assert codes(snap, "driver-cuda")[0]["driver.libcuda-mismatch"] is Severity.ERROR


@pytest.mark.parametrize("change,expected", [
    ({"nvidia-cudnn-cu12": "8.9.7.29"}, {"and-cuda.out-of-range": Severity.ERROR}),
    ({"nvidia-nccl-cu12": ""}, {"and-cuda.missing": Severity.ERROR}),
    ({}, {"and-cuda.ok": Severity.OK}),
])
def test_and_cuda_pins_against_installed_wheels(scenario, change, expected):
    snap = replace(scenario("healthy-8gpu-nvlink"), packages=packages(**change))
    assert codes(snap, "and-cuda-wheels")[0] == expected
    assert sum("and-cuda" in line for line in TF_REQUIRES) == len(AND_CUDA)


@pytest.mark.parametrize("cc,arch,code", [
    ("8.0", "['sm_80']", "gpu-arch.native"),
    ("8.6", "['sm_80']", "gpu-arch.native"),  # sm_80 code runs on 8.6 (one OK finding names it)
    ("9.0", "['sm_60', 'sm_70', 'sm_80', 'sm_89', 'compute_90']", "gpu-arch.ptx-jit"),
    ("9.0", "['sm_60', 'sm_90a']", "gpu-arch.native"),  # arch-specific code runs on exactly 9.0
    ("10.0", "['sm_60', 'sm_90a']", "gpu-arch.unsupported"),  # ... and on nothing newer
    ("5.2", "['sm_60', 'compute_60']", "gpu-arch.unsupported"),
])
def test_gpu_architectures(scenario, cc, arch, code):
    snap = scenario("healthy-8gpu-nvlink")
    gpus = [replace(g, compute_capability=cc) for g in snap.nvml.gpus]
    tf = replace(snap.tensorflow, build_info=dict(snap.tensorflow.build_info, cuda_compute_capabilities=arch))
    snap = replace(snap, nvml=replace(snap.nvml, gpus=gpus), tensorflow=tf)
    assert set(codes(snap, "gpu-architecture")[0]) == {code}


def test_ptxas_missing_older_and_xla_dir(scenario, tmp_path):
    snap = scenario("healthy-8gpu-nvlink")
    libs = snap.libraries
    no_ptxas = replace(libs, copies=[c for c in libs.copies if c.name != "ptxas"])
    assert codes(replace(snap, libraries=no_ptxas), "ptxas")[0] == {"ptxas.missing": Severity.WARNING}
    old = [replace(c, versions={"--version": "11.8.89"}) if c.name == "ptxas" else c for c in libs.copies]
    assert codes(replace(snap, libraries=replace(libs, copies=old)), "ptxas")[0] == {
        "ptxas.older-than-runtime": Severity.WARNING}
    probe = LibraryProbeInput(env={"XLA_FLAGS": f"--xla_gpu_cuda_data_dir={tmp_path}/nowhere"},
                              ldconfig_entries=[], default_dirs=[], cuda_globs=[])
    xla = gather_libraries(probe, load_versions=False)
    found, _ = codes(replace(snap, libraries=replace(libs, search_dirs=xla.search_dirs)), "ptxas")
    assert found == {"xla.cuda-data-dir-missing": Severity.ERROR}


def test_cuda_home_pointing_at_another_cuda(scenario, tmp_path):
    kit = tmp_path / "cuda-11.8"
    touch(kit / "version.json", json.dumps({"cuda": {"version": "11.8.0"}}))
    probe = LibraryProbeInput(env={"CUDA_HOME": str(kit)}, ldconfig_entries=[], default_dirs=[],
                              cuda_globs=[])
    kits = gather_libraries(probe, load_versions=False).toolkits
    snap = scenario("healthy-8gpu-nvlink")
    snap = replace(snap, env={"CUDA_HOME": str(kit)}, libraries=replace(snap.libraries, toolkits=kits))
    assert codes(snap, "cuda-environment")[0] == {"cuda-env.cuda-home-mismatch": Severity.WARNING}
    gone = replace(snap, env={"CUDA_HOME": str(tmp_path / "nope")},
                   libraries=replace(snap.libraries, toolkits=[]))
    assert codes(gone, "cuda-environment")[0] == {"cuda-env.cuda-home-missing": Severity.WARNING}


def test_old_snapshot_without_library_facts_loads_and_skips(scenario):
    data = json.loads(path_of("sick-box").read_text())
    del data["libraries"]
    snap = snapshot_from_data(data, "old.json")
    assert isinstance(snap.libraries, Unavailable) and snap.libraries.cause == "old-snapshot"
    outcome = judge(BY_NAME["library-copies"], snap)
    assert outcome.status.value == "skipped" and "CUDA library facts skipped" in outcome.skip_reason


# --- tables and the CLI ------------------------------------------------------------------------------

def test_tables_load_and_cover_every_tensorflow_cuda(tmp_path):
    assert TF_TABLE.build_for("2.21.1").cuda == "12.5" and TF_TABLE.build_for("2.16.2").cudnn == "8.9"
    assert TF_TABLE.build_for("2.22.0.dev20260301") is None
    assert TF_TABLE.build_for("2.1.0").python_ok("2.7") and not TF_TABLE.build_for("2.21.0").python_ok("3.9")
    assert DRIVERS.requirement("12.5.82").full_driver == "555.42.02"
    assert DRIVERS.requirement("12.5").compat_driver == "525.60.13"
    assert DRIVERS.requirement("10.1").compat_driver is None
    assert DRIVERS.newest_cuda("560.35.03") == "12.6"


@pytest.mark.parametrize("text,field", [
    ("schema_version = 2\n", "schema_version"),
    ('schema_version = 1\n[[toolkit]]\ncuda = "12.x"\nlinux_driver = "1"\nsource = "https://x"\n',
     "toolkit[0].cuda"),
    ('schema_version = 1\n[[toolkit]]\ncuda = "12.5"\nlinux_driver = "555.42.02"\n', "toolkit[0].source"),
    ('schema_version = 1\n[[toolkit]]\ncuda = "12.5"\nlinux_driver = "5"\nsource = "https://x"\nextra = 1\n',
     "toolkit[0].extra"),
])
def test_broken_driver_table_names_file_and_field(tmp_path, text, field):
    path = touch(tmp_path / "cuda-driver.toml", text)
    with pytest.raises(CompatTableError) as err:
        load_cuda_driver_table(path)
    assert str(err.value).startswith(f"{path}: field {field}:")


def test_broken_table_is_exit_2_with_one_line(tmp_path, capsys, monkeypatch):
    touch(tmp_path / "compat/cuda-driver.toml", "schema_version = 1\n[[toolkit]]\ncuda = 12\n")
    touch(tmp_path / "compat/tensorflow.toml",
          (Path(compat_tables.bundled_matrix_dir()) / compat_tables.TENSORFLOW_FILE).read_text())
    monkeypatch.setattr(compat_tables, "bundled_matrix_dir", lambda: tmp_path)
    compat_tables.bundled_cuda_driver_table.cache_clear()
    try:
        for command in ("check", "libs"):
            assert main([command, "--from", str(path_of("sick-box"))]) == 2
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and "cuda-driver.toml: field toolkit[0].cuda: must be a string" in err
    finally:
        compat_tables.bundled_cuda_driver_table.cache_clear()


def test_libs_command_human_and_json(capsys, tmp_path):
    assert main(["libs", "--from", str(path_of("mixed-models"))]) == 0
    out = capsys.readouterr().out
    assert "TensorFlow built for: CUDA 12.5, cuDNN 9.3" in out
    assert "Driver: 560.35.03, supports CUDA up to 12.6 (full support up to CUDA 12.6)" in out
    assert "* /opt/envs/train/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9  9.3.0 (ctypes)" in out
    assert main(["libs", "--from", str(path_of("mixed-models")), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    cudnn = next(r for r in data["libraries"]["rows"] if r["name"] == "cudnn")
    assert (cudnn["built_for"], cudnn["in_use_version"], cudnn["found_how"]) == (
        "cuDNN 9.3", "9.3.0", "loaded by TensorFlow")
    assert cudnn["copies"][0]["wins"] is True
    old = json.loads(path_of("sick-box").read_text())
    del old["libraries"]
    touch(tmp_path / "old.json", json.dumps(old))
    assert main(["libs", "--from", str(tmp_path / "old.json")]) == 0
    assert "No library facts in snapshot" in capsys.readouterr().out


def test_quick_discovery_on_this_machine_is_fast():
    import os
    import time

    start = time.perf_counter()
    facts = gather_libraries(LibraryProbeInput(env=dict(os.environ), site_packages=site.getsitepackages()),
                             load_versions=False)
    assert time.perf_counter() - start < 0.5
    assert not facts.versions_loaded and all(not c.load_error for c in facts.copies)


def test_load_snapshot_round_trip_keeps_library_facts():
    snap = load_snapshot(path_of("healthy-8gpu-nvlink"))
    again = snapshot_from_data(json.loads(snap.to_json()), "again")
    assert again.libraries == snap.libraries


@pytest.mark.parametrize("name", ["driver-without-gpus", "no-driver-no-tensorflow"])
def test_no_gpu_no_library_alarm(scenario, name):
    snap = replace(scenario(name), libraries=replace(pip_cuda_libraries(), copies=[]))
    for check in ("cuda-libraries", "and-cuda-wheels"):
        assert judge(BY_NAME[check], snap).status.value == "skipped"


@pytest.mark.parametrize("prints", [
    b"\xff\xfe garbage \xe9\n",  # not UTF-8
    b"Cuda compilation tools, V12.5." + b"9" * 5000 + b"\n",  # a "version" no parser takes
    bytes(range(256)) * 64,  # binary noise
])
def test_an_nvcc_that_prints_garbage_costs_only_its_own_version(tmp_path, prints):
    """Real tools run: one odd `nvcc` on PATH, a good `ptxas` beside it; every other fact stays."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "out").write_bytes(prints)
    for tool, script in (("nvcc", f"cat {tmp_path / 'out'}"),
                         ("ptxas", "echo 'Cuda compilation tools, release 12.5, V12.5.82'")):
        (bin_dir / tool).write_text(f"#!/bin/sh\n{script}\n")
        (bin_dir / tool).chmod(0o755)
    lib = touch(tmp_path / "lib" / "libcudart.so.12.5.82")
    probe = LibraryProbeInput(env={"PATH": str(bin_dir), "LD_LIBRARY_PATH": str(lib.parent)},
                              ldconfig_entries=[], default_dirs=[], cuda_globs=[])
    facts = gather_libraries(probe, load_versions=True)  # runs the tools; no interpreter: loads nothing
    copies = {c.name: c for c in facts.copies}
    assert "--version" not in copies["nvcc"].versions
    assert copies["ptxas"].versions["--version"] == "12.5.82"
    assert copies["cudart"].path == str(lib)


@pytest.mark.parametrize("row,field", [
    ('series = "2.4"\ncuda = "11.0"\ncudnn = "8.0"\nsource = "https://x"\n', "nightly[0].first"),
    ('series = "2.4"\nfirst = "20.8.2020"\ncuda = "11.0"\ncudnn = "8.0"\nsource = "https://x"\n',
     "nightly[0].first"),
    ('series = "2.4"\nfirst = "2020-08-20"\ncuda = "11.0"\ncudnn = "8.0"\n', "nightly[0].source"),
])
def test_broken_nightly_row_names_file_and_field(tmp_path, row, field):
    text = ('schema_version = 1\nsource = "https://x"\n[[build]]\ntensorflow = "2.4.0"\npackage = "p"\n'
            'python = "3.8"\ncuda = "11.0"\ncudnn = "8.0"\n[[nightly]]\n' + row)
    path = touch(tmp_path / "tensorflow.toml", text)
    with pytest.raises(CompatTableError) as err:
        load_tensorflow_table(path)
    assert str(err.value).startswith(f"{path}: field {field}:")

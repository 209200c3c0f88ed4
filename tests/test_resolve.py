"""One resolved environment: every version decided once, and every rule applied wherever
versions are known (a machine's snapshot and a `matrix query` tell the same story)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from mgpu_doctor.checks import CHECKS
from mgpu_doctor.cli import main
from mgpu_doctor.diagnose import judge_snapshot
from mgpu_doctor.environment.keras_view import KerasFamily
from mgpu_doctor.environment.matrix_view import environment_from_resolved
from mgpu_doctor.environment.readings import Origin, reading, resolved, same_release
from mgpu_doctor.environment.resolve import resolve
from mgpu_doctor.environment.tensorflow_build import BuildKind
from mgpu_doctor.matrix.compat_tables import bundled_cuda_driver_table, bundled_tensorflow_table
from mgpu_doctor.model.findings import Severity
from mgpu_doctor.model.snapshot import LibraryCopy, LibraryFacts, load_snapshot
from mgpu_doctor.model.unavailable import skipped
from mgpu_doctor.probes.libraries import LibraryProbeInput, gather_libraries
from mgpu_doctor.record import replace
from tests.scenarios import (
    HOST,
    libcuda_copy,
    packages,
    path_of,
    pip_cuda_libraries,
    ptxas_copy,
    real_cudart,
    tf_view,
)

REPORT_SCHEMA = json.loads((Path(__file__).parents[1] / "mgpu_doctor/schemas/report.schema.json").read_text())


# --- precedence ---------------------------------------------------------------------------------

def test_the_first_usable_reading_wins_and_the_others_are_kept():
    value = resolved("tensorflow", [reading("2.21.0", Origin.IMPORTED, "/x"), reading("2.15.1", Origin.INSTALLED)])
    assert value.text == "2.21.0" and value.origin is Origin.IMPORTED and value.observed
    assert [r.text for r in value.disagreeing()] == ["2.15.1"]
    same = resolved("cuda", [reading("12.5", Origin.LOADED), reading("12.5.82", Origin.WHEEL)])
    assert same.disagreeing() == ()  # 12.5 and 12.5.82: one version read from two places
    assert not same_release(reading("12.5", Origin.QUERY).version, reading("12.4.1", Origin.QUERY).version)
    unknown = resolved("keras", [reading("not a version", Origin.INSTALLED)])
    assert not unknown.known and unknown.chosen is None


def test_a_half_upgraded_environment_tells_one_story():
    """Metadata says TensorFlow 2.15.1 / Keras 2.15.0; the child imported 2.21.0 with Keras 3.15.1."""
    snap = load_snapshot(path_of("half-upgraded"))
    env = resolve(snap)
    assert env.tensorflow.text == "2.21.0" and env.tensorflow.origin is Origin.IMPORTED
    assert env.keras.text == "3.15.1" and env.tf_keras_is.family is KerasFamily.KERAS3
    assert env.tf_keras_is.origin is Origin.IMPORTED
    report = judge_snapshot(snap, CHECKS, command="check", source="t")
    by_name = {c.name: c for c in report.checks}
    agree = {f.code: f.severity for f in by_name["versions-agree"].findings}
    assert agree == {"versions.tensorflow-differs": Severity.ERROR, "versions.keras-differs": Severity.ERROR}
    # Every other check speaks of the imported 2.21.0 and Keras 3, never of the stale metadata.
    # (the entries last reported on older releases name the versions of their reports, not these)
    others = [f for c in report.checks if c.name != "versions-agree" for f in c.findings
              if f.code != "matrix.reported-older"]
    text = "\n".join([f.title for f in others] + [e for f in others for e in f.evidence] + [f.fix for f in others])
    assert "2.15.1" not in text and "2.15.0" not in text
    assert "keras.keras2-with-tf216" not in {f.code for f in others}
    assert by_name["keras"].findings[0].title.startswith("tf.keras is Keras 3.15.1 (imported")
    assert environment_from_resolved(env).versions["tensorflow"] == "2.21.0"
    assert main(["check", "--from", str(path_of("half-upgraded")), "--require-tensorflow", "==2.21.*",
                 "--checks", "gpus", "--format", "json"]) == 0


def test_predicted_tf_keras_that_is_not_what_was_imported_is_a_warning(scenario):
    snap = scenario("healthy-8gpu-nvlink")
    # TensorFlow 2.21 without TF_USE_LEGACY_KERAS predicts Keras 3, yet tf.keras imported tf-keras
    # (something set the switch after the doctor looked, or a sitecustomize patches tf.keras)
    odd = replace(snap, packages=packages(tensorflow="2.21.0", keras="3.15.1", **{"tf-keras": "2.21.0"}),
                  tensorflow=replace(snap.tensorflow, version="2.21.0", keras_module="tf_keras",
                                     keras_version="2.21.0"))
    codes = {f.code: f.severity for c in judge_snapshot(odd, CHECKS, command="c", source="s").checks
             for f in c.findings}
    assert codes["versions.tf-keras-not-as-predicted"] is Severity.WARNING


def test_with_tf_keras_in_use_keras_3_entries_are_not_matched_on_the_keras_package(scenario):
    snap = scenario("healthy-8gpu-nvlink")
    legacy = replace(snap, packages=packages(**{"tf-keras": "2.21.0"}),
                     env={**snap.env, "TF_USE_LEGACY_KERAS": "1"},
                     tensorflow=replace(snap.tensorflow, keras_module="tf_keras", keras_version="2.21.0"))
    env = environment_from_resolved(resolve(legacy))
    assert "keras" not in env.versions and env.versions["tf-keras"] == "2.21.0"
    assert env.missing["keras"].startswith("tf.keras is tf-keras 2.21.0 (imported")
    assert env.missing["keras"].endswith("not the keras package 3.15.1")
    assert environment_from_resolved(resolve(snap)).versions["keras"] == "3.15.1"


def test_keras_3_with_tensorflow_2_15_is_predicted_as_what_tf_keras_becomes(scenario):
    snap = scenario("healthy-8gpu-nvlink")
    # TensorFlow 2.15 loads tf.keras from the keras package: with Keras 3 installed it is Keras 3
    old = replace(snap, packages=packages(tensorflow="2.15.1", keras="3.15.1"),
                  tensorflow=replace(snap.tensorflow, version="2.15.1"))
    codes = {f.code: f.severity for c in judge_snapshot(old, CHECKS, command="c", source="s").checks
             for f in c.findings}
    assert codes["keras.keras3-with-tf-before-216"] is Severity.WARNING
    assert "versions.tf-keras-not-as-predicted" not in codes


# --- the library in use is the one the loader returns for TensorFlow's soname --------------------

def touch(path: Path, text: str = "not really a library\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def tree_env(snap, probe: LibraryProbeInput):
    facts = gather_libraries(probe, load_versions=False)
    return replace(snap, libraries=facts, tensorflow=replace(snap.tensorflow, loaded_libraries=[],
                                                             loaded_after_import=[]))


def test_cudnn_8_first_on_the_path_is_not_in_use_by_a_tensorflow_built_for_cudnn_9(scenario, tmp_path):
    old, new = tmp_path / "cudnn8/lib", tmp_path / "cudnn9/lib"
    touch(old / "libcudnn.so.8.9.7")
    (old / "libcudnn.so.8").symlink_to("libcudnn.so.8.9.7")
    touch(new / "libcudnn.so.9.3.0")
    (new / "libcudnn.so.9").symlink_to("libcudnn.so.9.3.0")
    probe = LibraryProbeInput(env={"LD_LIBRARY_PATH": f"{old}:{new}", "PATH": ""}, site_packages=[],
                              ldconfig_entries=[], default_dirs=[], cuda_globs=[], system_include_dirs=[])
    snap = tree_env(scenario("healthy-8gpu-nvlink"), probe)
    env = resolve(snap)
    lib = env.libraries["cudnn"]
    assert lib.soname == "libcudnn.so.9" and lib.copy.path == str(new / "libcudnn.so.9")
    assert [c.soname for c in lib.others] == ["libcudnn.so.8"]
    assert env.cudnn.text == "9.3.0"
    codes = {f.code for f in judge_snapshot(snap, CHECKS, command="c", source="s").findings}
    assert "libraries.major-mismatch" not in codes
    path = tmp_path / "snap.json"
    path.write_text(snap.to_json())
    assert main(["libs", "--from", str(path), "--format", "json", "--no-redact"]) in (0, 1)


@pytest.mark.skipif(real_cudart() is None, reason="nvidia-cuda-runtime-cu12 (test extra) is not installed")
def test_a_cuda_13_runtime_is_never_in_use_by_a_tensorflow_built_for_cuda_12(scenario, tmp_path, capsys):
    wheel = real_cudart()
    toolkit = tmp_path / "cuda-13.0/lib64"
    touch(toolkit / "libcudart.so.13.0.96")
    (toolkit / "libcudart.so.13").symlink_to("libcudart.so.13.0.96")
    only_13 = LibraryProbeInput(env={"LD_LIBRARY_PATH": str(toolkit), "PATH": ""}, site_packages=[],
                                ldconfig_entries=[], default_dirs=[], cuda_globs=[], system_include_dirs=[])
    snap = tree_env(scenario("healthy-8gpu-nvlink"), only_13)
    lib = resolve(snap).libraries["cudart"]
    assert lib.copy is None and "no libcudart.so.12" in lib.why_none and "libcudart.so.13" in lib.why_none
    report = judge_snapshot(snap, CHECKS, command="c", source="s")
    cuda = {c.name: c for c in report.checks}["cuda-libraries"]
    missing = next(f for f in cuda.findings if f.code == "libraries.missing")
    assert "libcudart" in missing.title and any("libcudart.so.13" in e for e in missing.evidence)
    assert "libraries.major-mismatch" not in {f.code for f in cuda.findings}
    # The real CUDA 12 wheel beside it: that is what TensorFlow loads, the 13 is present and unused.
    both = replace(only_13, site_packages=[str(wheel.parents[3])])
    snap = tree_env(scenario("healthy-8gpu-nvlink"), both)
    lib = resolve(snap).libraries["cudart"]
    assert lib.copy.path == str(wheel.parents[0] / "libcudart.so.12")
    assert [c.soname for c in lib.others] == ["libcudart.so.13"]
    path = tmp_path / "snap.json"
    path.write_text(snap.to_json())
    main(["libs", "--from", str(path), "--no-redact"])
    out = capsys.readouterr().out
    assert "present, not used: TensorFlow opens libcudart.so.12, this is libcudart.so.13" in out


def test_libs_json_goes_through_the_report_and_fits_the_schema(capsys):
    assert main(["libs", "--from", str(path_of("mixed-models")), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator(REPORT_SCHEMA).validate(data)
    assert data["command"] == "libs" and data["libraries"]["rows"]
    assert {c["name"] for c in data["checks"]} >= {"cuda-libraries", "library-copies", "driver-cuda"}


# --- `check --from` a machine with these versions and `matrix query` them: the same verdict -----

BASE = load_snapshot(path_of("healthy-8gpu-nvlink"))
GPU_TERMS = ["gpus=8", "compute_capability=8.0", "gpu_name=NVIDIA A100-SXM4-80GB", "interconnect=nvlink",
             "platform=linux", "python==3.11.9", "backend=tensorflow"]


def machine_with(tensorflow: str, keras: str, cuda: str, cudnn: str, driver: str, tf_keras: str = ""):
    """A quick snapshot (TensorFlow not imported) of the healthy box, running exactly these versions
    from a system CUDA (no nvidia-* wheels), as a `matrix query` of the same versions describes it."""
    row = bundled_tensorflow_table().build_for(tensorflow)
    major = cuda.split(".")[0]
    copies = [libcuda_copy(driver)]
    for copy in pip_cuda_libraries(driver).copies:
        if copy.name in ("cuda", "ptxas"):
            continue
        version = {"cudart": cuda, "cudnn": cudnn}.get(copy.name, row.cuda if row else cuda)
        soname = copy.soname if copy.name in ("nccl", "curand", "cufft", "cusolver", "cusparse") else \
            f"lib{copy.name}.so.{cudnn.split('.')[0] if copy.name == 'cudnn' else major}"
        directory = f"/usr/local/cuda-{cuda}/lib64"
        copies.append(LibraryCopy(copy.name, soname, f"{directory}/{soname}", f"{directory}/{soname}",
                                  "LD_LIBRARY_PATH", True, {"ctypes": version}))
    copies.append(ptxas_copy(f"{cuda}.99"))
    libs = LibraryFacts(copies=copies, search_dirs=[], toolkits=[], versions_loaded=True, probe_seconds=0.1)
    no_wheels = {name: "" for name in BASE.packages.versions if name.startswith("nvidia-")}
    pkgs = packages(tensorflow=tensorflow, keras=keras, **{"tf-keras": tf_keras}, **no_wheels)
    pkgs = replace(pkgs, requires={})
    nvml = replace(BASE.nvml, driver_version=driver)
    return replace(BASE, packages=pkgs, libraries=libs, nvml=nvml, host=HOST,
                   tensorflow=skipped("--quick: TensorFlow is not imported", cause="quick"))


VERSION_SETS = [
    # The issue's own examples: errors on both sides.
    dict(tensorflow="2.12.0", keras="2.12.0", cuda="11.8", cudnn="8.1.0", driver="520.61.05"),
    dict(tensorflow="2.16.1", keras="3.15.1", cuda="12.3", cudnn="8.9", driver="510.47.03"),
    dict(tensorflow="2.9.0", keras="2.9.0", cuda="11.2", cudnn="8.1", driver="418.40.04"),
    # Minor-version compatibility only (a warning), Keras 2 with TensorFlow 2.16 (an error),
    # tf-keras of another minor (a warning), a clean modern box.
    dict(tensorflow="2.21.0", keras="3.15.1", cuda="12.5", cudnn="9.3", driver="535.104.05"),
    dict(tensorflow="2.16.1", keras="2.15.0", cuda="12.3", cudnn="8.9", driver="550.54.14"),
    dict(tensorflow="2.17.0", keras="3.15.1", cuda="12.3", cudnn="8.9", driver="550.54.14", tf_keras="2.15.0"),
    dict(tensorflow="2.21.0", keras="3.15.1", cuda="12.5", cudnn="9.3", driver="560.35.03"),
]


def serious_codes(data) -> set[str]:
    return {f["code"] for c in data["checks"] for f in c["findings"] if f["severity"] in ("warning", "error")}


def query_terms(versions) -> list[str]:
    terms = [f"{k.replace('tf_keras', 'tf-keras')}=={v}" for k, v in versions.items() if v] + GPU_TERMS
    # the machine's NumPy and protobuf (scenarios.packages), which TensorFlow's pins judge on both sides
    return terms + [f"{name}=={BASE.packages.versions[name]}" for name in ("numpy", "protobuf")]


@pytest.mark.parametrize("versions", VERSION_SETS, ids=lambda v: "-".join(x for x in v.values() if x))
def test_check_from_and_matrix_query_agree(capsys, tmp_path, versions):
    path = tmp_path / "machine.json"
    path.write_text(machine_with(**versions).to_json())
    main(["check", "--from", str(path), "--format", "json", "--no-redact"])
    machine = serious_codes(json.loads(capsys.readouterr().out))
    main(["matrix", "query", *query_terms(versions), "--format", "json"])
    query = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator(REPORT_SCHEMA).validate(query)
    assert serious_codes(query) == machine


@pytest.mark.parametrize("terms,code", [
    (["tensorflow==2.12.0", "cudnn==8.1.0"], "libraries.older-minor"),
    (["tensorflow==2.16.1", "cuda==12.3", "driver==510.47.03"], "driver.too-old"),
    (["tensorflow==2.9.0", "cuda==11.2", "driver==418.40.04"], "driver.too-old"),
    (["tensorflow==2.12.0", "cuda==11.8", "cudnn==8.1.0", "driver==418.40.04", "gpus=2"], "driver.too-old"),
    (["tensorflow==2.16.1", "keras==2.15.0"], "keras.keras2-with-tf216"),
    (["tensorflow==2.16.1", "driver==510.47.03"], "driver.too-old"),  # CUDA 12.3 from the tested build
    # the [and-cuda] pins table: 2.15.1 pins cuDNN 8.9.4.25; 2.21.0 asks NCCL >= 2.27.7
    (["tensorflow==2.15.1", "nvidia-cudnn-cu12==9.1.0.70"], "and-cuda.out-of-range"),
    (["tensorflow==2.21.0", "nvidia-nccl-cu12==2.21.5"], "and-cuda.out-of-range"),
    # the architectures table (each wheel's build_info): 2.17 dropped Maxwell, 2.3 started at sm_35
    (["tensorflow==2.17.0", "compute_capability=5.2"], "gpu-arch.unsupported"),
    (["tensorflow==2.3.0", "compute_capability=3.0"], "gpu-arch.unsupported"),
])
def test_matrix_query_applies_the_compatibility_rules(capsys, terms, code):
    assert main(["matrix", "query", *terms, "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    found = {f["code"]: f["severity"] for c in data["checks"] for f in c["findings"]}
    assert found[code] == "error"


@pytest.mark.parametrize("terms,code,severity", [
    (["tensorflow==2.21.0", "python==3.8.10"], "python.unsupported-by-tensorflow", "warning"),
    (["tensorflow==2.12.0", "python==3.10.12"], "python.supported", "ok"),
    (["tensorflow==2.13.1", "keras==3.1.1"], "keras.keras3-with-tf-before-216", "error"),
    (["tensorflow==2.15.0", "keras==3.3.3"], "keras.keras3-with-tf-before-216", "warning"),
    (["tensorflow==2.10.0", "keras==2.12.0"], "keras.keras2-minor-mismatch", "warning"),
    (["tensorflow==2.10.1", "keras==2.10.0"], "keras.in-use", "info"),
    # a driver written without its patch level, at the patch-level threshold: cannot tell
    (["tensorflow==2.4.1", "cuda==11.0", "driver==450.51"], "driver.version-too-short", "info"),
    (["tensorflow==2.4.1", "cuda==11.0", "driver==450.36"], "driver.too-old", "error"),
    (["tensorflow==2.4.1", "cuda==11.0", "driver==450.57"], "driver.ok", "ok"),
])
def test_python_and_keras_against_what_tensorflow_was_released_with(capsys, terms, code, severity):
    main(["matrix", "query", *terms, "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    found = {f["code"]: f["severity"] for c in data["checks"] for f in c["findings"]}
    assert found.get(code) == severity, found


@pytest.mark.parametrize("build", bundled_tensorflow_table().builds, ids=lambda b: b.tensorflow)
def test_every_tested_build_with_a_driver_for_its_cuda_is_free_of_errors(capsys, build):
    need = bundled_cuda_driver_table().requirement(build.cuda)
    for extra in ([], ["strategy=mirrored"]):
        terms = [f"tensorflow=={build.tensorflow}", f"cuda=={build.cuda}", f"cudnn=={build.cudnn}",
                 f"driver=={need.full_driver}", "gpus=2", *extra]
        assert main(["matrix", "query", *terms, "--format", "json"]) == 0, terms
        data = json.loads(capsys.readouterr().out)
        errors = [f["code"] for c in data["checks"] for f in c["findings"] if f["severity"] == "error"]
        assert errors == [], (terms, errors)


def test_the_and_cuda_pins_table_has_every_release_that_declares_the_extra():
    from mgpu_doctor.matrix.compat_tables import bundled_and_cuda_table

    table = bundled_and_cuda_table()
    listed = {r.tensorflow for r in table.releases}
    # every PyPI release of tensorflow from 2.14.0 (the first with [and-cuda]) to 2.21.0
    assert {"2.14.0", "2.14.1", "2.15.0", "2.15.0.post1", "2.15.1", "2.16.1", "2.16.2", "2.17.0", "2.17.1",
            "2.18.0", "2.18.1", "2.19.0", "2.19.1", "2.20.0", "2.21.0"} <= listed
    assert all(r.source == f"https://pypi.org/project/tensorflow/{r.tensorflow}/" for r in table.releases)
    assert table.pins_for("2.15") is None  # 2.15.0 also pinned tensorrt, 2.15.1 does not: no one answer
    assert table.pins_for("2.18") is not None


def test_the_distribution_names_of_bug_reports_are_query_terms():
    from mgpu_doctor.environment.query import resolve_query

    env, given = resolve_query(["tensorflow-gpu==1.15.0", "keras-nightly==3.7.0.dev2024120303", "gpus=2"])
    assert env.tensorflow.text == "1.15.0" and env.keras.text == "3.7.0.dev2024120303"
    assert given["tensorflow"] == "1.15.0"
    env, _ = resolve_query(["tf-nightly==2.19.0.dev20241203", "tf_keras==2.18.0"])
    assert env.tensorflow.text == "2.19.0.dev20241203" and env.tf_keras.text == "2.18.0"


def test_workers_term_is_multi_worker_training():
    from mgpu_doctor.environment.query import resolve_query

    env, given = resolve_query(["tensorflow==2.21.0", "workers=2"])
    assert env.usage.strategy == "multi_worker_mirrored" and env.machine.workers == 2
    assert given == {"tensorflow": "2.21.0", "workers": "2"}


# --- the house: who may import whom ------------------------------------------------------------

def imported_by(*modules: str) -> set[str]:
    code = ("import importlib, sys\n"
            f"for m in {list(modules)!r}: importlib.import_module(m)\n"
            "print('\\n'.join(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return {m for m in out.split() if m.startswith("mgpu_doctor")}


def test_the_report_and_the_renderers_import_no_check_and_no_probe():
    loaded = imported_by("mgpu_doctor.model.report", "mgpu_doctor.renderers.human", "mgpu_doctor.renderers.json_report",
                         "mgpu_doctor.renderers.markdown", "mgpu_doctor.renderers.junit",
                         "mgpu_doctor.renderers.bug_report", "mgpu_doctor.renderers.html_report")
    assert not {m for m in loaded if m.startswith(("mgpu_doctor.checks", "mgpu_doctor.probes"))}


def test_checks_import_no_probe_and_the_pipeline_no_cli():
    assert not {m for m in imported_by("mgpu_doctor.checks") if m.startswith("mgpu_doctor.probes")}
    assert not {m for m in imported_by("mgpu_doctor.diagnose", "mgpu_doctor.smoke.section")
                if m.startswith("mgpu_doctor.cli")}


def test_masking_depends_on_neither_the_probes_nor_redaction():
    # The probes mask what they gather and redaction masks again: both use masking, which
    # imports neither (an import cycle between them was how this started).
    assert imported_by("mgpu_doctor.process.masking") == {"mgpu_doctor", "mgpu_doctor.process", "mgpu_doctor.process.masking"}
    assert not {m for m in imported_by("mgpu_doctor.model.redact") if m.startswith("mgpu_doctor.probes")}
    assert "mgpu_doctor.model.redact" not in imported_by("mgpu_doctor.probes.envvars")


def test_the_tensorflow_distribution_names_live_in_one_place():
    root = Path(__file__).parents[1] / "mgpu_doctor"
    holders = [p.relative_to(root).as_posix() for p in root.rglob("*.py")
               if '"tensorflow-cpu"' in p.read_text() and "child_scripts" not in p.parts]
    assert holders == ["model/distributions.py"]


def test_a_quick_snapshot_still_resolves_what_tensorflow_was_built_for():
    snap = replace(BASE, tensorflow=skipped("--quick", cause="quick"))
    env = resolve(snap)
    assert env.built_cuda.text == "12.5" and env.built_cuda.origin is Origin.TESTED_BUILD
    assert tf_view(1).version == env.tensorflow.text


# --- no false alarms on TensorFlow's tested builds -------------------------------------------

TESTED_BUILD_WARNINGS = Path(__file__).parent / "data" / "tested-builds-warnings.txt"


def warnings_on_tested_builds() -> str:
    """Per tested build (with the driver of its CUDA, 2 GPUs; plain and with strategy=mirrored),
    every warning the query gives. Each line was read against its entry's thread: a real issue of
    that release under that condition. Regenerate with MGPU_DOCTOR_UPDATE_GOLDEN=1 and review."""
    from mgpu_doctor.diagnose import query

    lines = []
    for build in bundled_tensorflow_table().builds:
        need = bundled_cuda_driver_table().requirement(build.cuda)
        for extra in ([], ["strategy=mirrored"]):
            terms = [f"tensorflow=={build.tensorflow}", f"cuda=={build.cuda}", f"cudnn=={build.cudnn}",
                     f"driver=={need.full_driver}", "gpus=2", *extra]
            report = query(terms)
            for finding in report.findings:
                assert finding.severity < Severity.ERROR, (terms, finding.code)
                if finding.severity is Severity.WARNING:
                    lines.append(f"{build.tensorflow} {' '.join(extra) or '(no strategy)'}: {finding.code}")
    return "\n".join(lines) + "\n"


def test_tested_builds_raise_no_error_and_only_the_reviewed_warnings():
    import os

    text = warnings_on_tested_builds()
    if os.environ.get("MGPU_DOCTOR_UPDATE_GOLDEN"):
        TESTED_BUILD_WARNINGS.write_text(text)
    assert text == TESTED_BUILD_WARNINGS.read_text()


# --- versions read as written: short versions, nightlies, builds other than the pip wheel -----

def query_findings(capsys, terms) -> tuple[int, dict[str, str], dict[str, str]]:
    """Exit code, {code: severity}, {check name: skip reason}."""
    rc = main(["matrix", "query", *terms, "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    found = {f["code"]: f["severity"] for c in data["checks"] for f in c["findings"]}
    skipped_checks = {c["name"]: c["skip_reason"] for c in data["checks"] if c["status"] == "skipped"}
    return rc, found, skipped_checks


@pytest.mark.parametrize("terms,code", [
    # CUDA 11 is 11.0 to 11.8: 455.23 runs 11.0 and 11.1 fully, 11.2 and newer only through compat
    (["cuda==11", "driver==455.23"], "driver.cuda-version-short"),
    # 11 is not older than the 11.2 TensorFlow 2.10 was built with; it may be 11.2 or 11.8
    (["tensorflow==2.10.0", "cuda==11"], "libraries.version-short"),
    # cuDNN 9 may be the 9.3 TensorFlow 2.18 needs, or an older 9.x it refuses
    (["tensorflow==2.18.0", "cudnn==9"], "libraries.version-short"),
])
def test_a_short_version_is_every_completion_and_cannot_tell_when_they_disagree(capsys, terms, code):
    rc, found, _ = query_findings(capsys, terms)
    assert found.get(code) == "info", found
    assert rc == 0 and not {c for c, sev in found.items() if sev in ("warning", "error")}, found


def test_a_short_version_all_completions_agree_on_is_decided(capsys):
    _, found, _ = query_findings(capsys, ["cuda==11", "driver==530.30.02"])  # newer than every 11.x needs
    assert found.get("driver.ok") == "ok"
    _, found, _ = query_findings(capsys, ["tensorflow==2.18.0", "cuda==11"])  # 12.5 build: no 11.x fits
    assert found.get("libraries.major-mismatch") == "error"


@pytest.mark.parametrize("nightly,cuda,expected", [
    # tf-nightly moved to CUDA 11 on the night of 2020-08-18 (tensorflow/tensorflow#42047)
    ("2.4.0.dev20200701", "10.1", "libraries.match"),
    ("2.4.0.dev20200701", "11.0", "libraries.major-mismatch"),
    ("2.4.0.dev20200901", "11.0", "libraries.match"),
    ("2.4.0.dev20200818", "10.1", None),  # the night of the switch: cannot tell
    ("2.5.0.dev20210101", "11.0", None),  # 2.4 (11.0) and 2.5 (11.2) differ, no source dates it
    ("2.19.0.dev20241203", "12.5", "libraries.match"),  # 2.18 and 2.19 were built alike
])
def test_a_nightly_is_placed_by_its_date(capsys, nightly, cuda, expected):
    _, found, skipped_checks = query_findings(capsys, [f"tf-nightly=={nightly}", f"cuda=={cuda}"])
    if expected is None:
        assert not any(c.startswith("libraries.") for c in found), found
        assert "does not tell" in skipped_checks["cuda-libraries"], skipped_checks
    else:
        assert expected in found, found


@pytest.mark.parametrize("terms", [
    ["tensorflow==2.15.0", "build=source", "cuda==12.0"],
    ["nvidia-tensorflow==1.15.5+nv22.12", "cuda==11.8"],
    ["nvidia-tensorflow==1.15.5", "cuda==11.8"],
    ["tensorflow==1.15.5+nv22.12", "cuda==11.8"],
    ["tensorflow==1.15.5", "build=nvidia", "cuda==11.8"],
])
def test_a_build_other_than_the_pip_wheel_is_not_given_the_wheels_build(capsys, terms):
    rc, found, skipped_checks = query_findings(capsys, terms)
    assert rc == 0 and not any(c.startswith("libraries.") for c in found), found
    assert "the pip wheels' tested builds do not say" in skipped_checks["cuda-libraries"]


def test_the_pip_wheel_of_the_same_versions_is_still_judged_by_its_build(capsys):
    rc, found, _ = query_findings(capsys, ["tensorflow==1.15.5", "build=pip", "cuda==11.8"])
    assert rc == 1 and found["libraries.major-mismatch"] == "error"
    rc, found, _ = query_findings(capsys, ["tensorflow==2.15.0", "build=pip", "cuda==11.8"])
    assert rc == 1 and found["libraries.major-mismatch"] == "error"


def test_tensorflow_1_15_on_cuda_11_is_nvidia_s_build_or_cannot_be_told(capsys):
    """Only NVIDIA's build of 1.15 runs on CUDA 11: without the build named, not an error."""
    rc, found, _ = query_findings(capsys, ["tensorflow==1.15.5", "cuda==11.8"])
    assert rc == 0 and found["libraries.nvidia-build-only"] == "info", found
    assert "libraries.major-mismatch" not in found


@pytest.mark.parametrize(("tensorflow", "cuda", "code", "severity"), [
    ("2.1.0", "10.2", "libraries.soname-minor", "error"),  # opens libcudart.so.10.1 only
    ("2.1.0", "10.0", "libraries.soname-minor", "error"),
    ("1.14.0", "10.1", "libraries.soname-minor", "error"),
    ("2.1.0", "10.1", "libraries.match", "ok"),
    ("2.10.0", "11.8", "libraries.newer-minor", "info"),  # from CUDA 11 every 11.x is libcudart.so.11.0
])
def test_before_cuda_11_the_runtime_s_minor_is_in_its_file_name(capsys, tensorflow, cuda, code, severity):
    _, found, _ = query_findings(capsys, [f"tensorflow=={tensorflow}", f"cuda=={cuda}"])
    assert found.get(code) == severity, found


@pytest.mark.parametrize(("tensorflow", "extra"), [("2.1.0", False), ("1.15.0", False), ("2.3.1", False),
                                                    ("2.15.0", True)])
def test_a_fix_names_the_and_cuda_extra_only_where_the_release_has_one(capsys, tensorflow, extra):
    main(["matrix", "query", f"tensorflow=={tensorflow}", "build=pip", "cuda==9.0", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    fixes = [f["fix"] for c in report["checks"] for f in c["findings"] if f["code"].startswith("libraries.")]
    assert fixes and all(("[and-cuda]" in fix) is extra for fix in fixes), fixes


def test_a_bad_build_term_is_one_line_exit_2(capsys):
    assert main(["matrix", "query", "tensorflow==2.15.0", "build=conda"]) == 2
    err = capsys.readouterr().err
    assert "build=conda" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("change", [
    {"packages": {"nvidia-tensorflow": "1.15.5+nv22.12", "tensorflow": ""}},
    {"env": {"NVIDIA_TENSORFLOW_VERSION": "22.12-tf1"}},
])
def test_a_machine_with_nvidias_tensorflow_is_not_given_the_wheels_build(change):
    snap = replace(BASE, tensorflow=skipped("--quick", cause="quick"))
    if "packages" in change:
        snap = replace(snap, packages=packages(**change["packages"]))
    if "env" in change:
        snap = replace(snap, env={**snap.env, **change["env"]})
    env = resolve(snap)
    assert env.build is BuildKind.NVIDIA and env.build_why
    assert not env.built_cuda.known and "NVIDIA's build" in str(env.built_cuda.missing)
    assert resolve(replace(BASE, tensorflow=skipped("--quick", cause="quick"))).built_cuda.known  # control


def test_keras_nightly_installed_is_the_keras_version():
    snap = replace(BASE, tensorflow=skipped("--quick", cause="quick"),
                   packages=packages(keras="", **{"keras-nightly": "3.8.0.dev2024121803"}))
    assert resolve(snap).keras.text == "3.8.0.dev2024121803"


def test_a_keras_only_query_names_the_entries_a_tensorflow_version_would_decide(capsys):
    main(["matrix", "query", "keras==2.1.6", "gpus=2", "strategy=multi_gpu_model", "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    needs = [f for c in data["checks"] for f in c["findings"] if f["code"] == "matrix.needs-version"]
    assert len(needs) == 1 and needs[0]["severity"] == "info"
    # keyed on TensorFlow < 2.4 only, with strategy multi_gpu_model: a TensorFlow version decides it
    assert any(line.startswith("multi-gpu-model-batchnorm-nan-empty-replica:") for line in needs[0]["evidence"])
    main(["matrix", "query", "keras==2.1.6", "tensorflow==1.12.0", "gpus=2", "strategy=multi_gpu_model",
          "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    assert not [f for c in data["checks"] for f in c["findings"] if f["code"] == "matrix.needs-version"]

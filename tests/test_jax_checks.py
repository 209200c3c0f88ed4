"""The JAX checks on recorded snapshots: healthy-8gpu-nvlink with the JAX fact set, one fact changed."""

from __future__ import annotations

import json

import pytest

from mgpu_doctor.checks import CHECKS
from mgpu_doctor.environment.readings import Origin
from mgpu_doctor.environment.resolve import resolve
from mgpu_doctor.model.findings import CheckStatus, Severity
from mgpu_doctor.model.snapshot import GpuProcess, JaxDevice, JaxFacts, Snapshot, load_snapshot
from mgpu_doctor.model.unavailable import absent, failed, skipped
from mgpu_doctor.record import replace
from tests.checking import judge
from tests.scenarios import packages, path_of, with_env

BY_NAME = {c.name: c for c in CHECKS}
A100 = "NVIDIA A100-SXM4-80GB"


def jax_facts(gpus: int = 8, plugins: dict[str, str] | None = None, **kw) -> JaxFacts:
    devices = [JaxDevice(i, "gpu", A100, i) for i in range(gpus)] or [JaxDevice(0, "cpu", "cpu", 0)]
    base = dict(version="0.10.2", jaxlib_version="0.10.2", module_path="/opt/envs/train/site-packages/jax",
                plugins={"jax-cuda12-plugin": "0.10.2", "jax-cuda12-pjrt": "0.10.2"} if plugins is None else plugins,
                default_backend="gpu" if gpus else "cpu", devices=devices, import_seconds=1.5)
    base.update(kw)
    return JaxFacts(**base)  # type: ignore[arg-type]


@pytest.fixture
def healthy(scenario) -> Snapshot:
    snap = scenario("healthy-8gpu-nvlink")
    return replace(snap, jax=jax_facts(), packages=packages(jax="0.10.2", jaxlib="0.10.2"))


def outcome(snapshot: Snapshot, name: str):
    return judge(BY_NAME[name], snapshot)


def code(snapshot: Snapshot, name: str) -> str:
    found = outcome(snapshot, name)
    assert found.status is not CheckStatus.CRASHED, found
    assert found.findings, found.skip_reason
    return found.findings[0].code


def test_healthy_jax_passes_every_jax_check(healthy):
    assert code(healthy, "jax-gpus") == "jax.gpus-match"
    assert code(healthy, "jax-preallocation") == "jax.preallocation-unshared"
    assert outcome(with_env(healthy, KERAS_BACKEND="jax"), "keras-backend-jax").findings[0].severity is Severity.OK


def test_old_snapshot_without_jax_loads_and_skips(tmp_path):
    data = json.loads(path_of("healthy-8gpu-nvlink").read_text())
    del data["jax"]  # as a snapshot written before the JAX fact existed
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    snap = load_snapshot(old)
    assert snap.jax.reason == "skipped" and snap.jax.cause == "old-snapshot"
    assert outcome(snap, "jax-gpus").status is CheckStatus.SKIPPED


def test_jax_fact_round_trips_through_the_snapshot_file(healthy, tmp_path):
    path = tmp_path / "snap.json"
    path.write_text(healthy.to_json())
    assert load_snapshot(path).jax == healthy.jax


@pytest.mark.parametrize("change,expected", [
    (dict(plugins={}, gpus=0), "jax.cpu-only-jaxlib"),
    (dict(plugins={"jax-cuda13-plugin": "0.10.2", "jax-cuda13-pjrt": "0.10.2"}, gpus=0),
     "jax.plugin-needs-newer-driver"),
    (dict(plugins={"jax-cuda12-plugin": "0.9.0", "jax-cuda12-pjrt": "0.9.0"}, gpus=0),
     "jax.plugin-version-mismatch"),
    (dict(plugin_wheels_missing=["nvidia-cudnn-cu12"], gpus=0), "jax.cuda-wheels-missing"),
    (dict(gpus=4, backend_errors={"cuda": "Unable to load cuDNN"}), "jax.fewer-gpus-than-nvml"),
])
def test_jax_sees_fewer_gpus_names_the_cause(healthy, change, expected):
    snap = replace(healthy, jax=jax_facts(**change))
    found = outcome(snap, "jax-gpus").findings[0]
    assert found.code == expected
    assert found.severity is Severity.ERROR and found.fix


def test_plugin_for_newer_cuda_fix_names_the_drivers_major(healthy):
    snap = replace(healthy, jax=jax_facts(plugins={"jax-cuda13-plugin": "0.10.2"}, gpus=0))
    found = outcome(snap, "jax-gpus").findings[0]
    assert "jax[cuda12]" in found.fix and "CUDA 13" in found.title and "12.6" in found.title


def test_jax_platforms_cpu_explains_missing_gpus(healthy):
    snap = with_env(replace(healthy, jax=jax_facts(gpus=0)), JAX_PLATFORMS="cpu")
    assert code(snap, "jax-gpus") == "jax.platforms-exclude-gpu"


def test_cuda_visible_devices_narrows_what_jax_must_see(healthy):
    snap = with_env(replace(healthy, jax=jax_facts(gpus=2)), CUDA_VISIBLE_DEVICES="0,1")
    assert code(snap, "jax-gpus") == "jax.gpus-match"


def test_jax_import_failure_is_a_finding(healthy):
    snap = replace(healthy, jax=failed("ImportError: libcudnn.so.9", "exception:ImportError"))
    assert code(snap, "jax-gpus") == "jax.import-failed"


def test_jax_not_installed_skips_the_jax_checks(scenario):
    snap = replace(scenario("healthy-8gpu-nvlink"), jax=absent("JAX is not installed", "not-installed"))
    for name in ("jax-gpus", "jax-preallocation"):
        assert outcome(snap, name).status is CheckStatus.SKIPPED


def busy(snap: Snapshot, gpu: int, used_gib: int) -> Snapshot:
    nvml = snap.nvml
    gpus = list(nvml.gpus)  # type: ignore[union-attr]
    gpus[gpu] = replace(gpus[gpu], memory_used_bytes=used_gib * 2**30,
                        processes=[GpuProcess(4242, used_gib * 2**30, "compute")])
    return replace(snap, nvml=replace(nvml, gpus=gpus))  # type: ignore[arg-type]


def test_preallocation_on_a_shared_gpu_warns_with_the_fix(healthy):
    found = outcome(busy(healthy, 3, 10), "jax-preallocation").findings[0]
    assert found.code == "jax.preallocation-shared" and found.severity is Severity.WARNING
    assert "75 %" in found.title and "does not fit" not in found.title
    assert "XLA_PYTHON_CLIENT_PREALLOCATE=false" in found.fix
    assert any("GPU 3" in line and "60.0 GiB" in line for line in found.evidence)


def test_preallocation_that_does_not_fit_says_so(healthy):
    found = outcome(busy(healthy, 3, 30), "jax-preallocation").findings[0]
    assert "does not fit on GPU 3" in found.title


@pytest.mark.parametrize("env,expected", [
    ({"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}, "jax.preallocation-off"),
    ({"XLA_PYTHON_CLIENT_PREALLOCATE": "0"}, "jax.preallocation-off"),
    ({"XLA_PYTHON_CLIENT_ALLOCATOR": "platform"}, "jax.preallocation-off"),
    ({"XLA_PYTHON_CLIENT_PREALLOCATE": "no"}, "jax.preallocation-shared"),  # jaxlib: only false/False/0
    ({"XLA_CLIENT_MEM_FRACTION": ".5", "XLA_PYTHON_CLIENT_MEM_FRACTION": ".5"}, "jax.mem-fraction-twice"),
    ({"XLA_CLIENT_MEM_FRACTION": "half"}, "jax.mem-fraction-invalid"),
])
def test_preallocation_settings(healthy, env, expected):
    assert code(with_env(busy(healthy, 0, 10), **env), "jax-preallocation") == expected


def test_mem_fraction_changes_what_jax_takes(healthy):
    found = outcome(with_env(busy(healthy, 0, 30), XLA_PYTHON_CLIENT_MEM_FRACTION=".3"), "jax-preallocation")
    assert "30 %" in found.findings[0].title and "does not fit" not in found.findings[0].title


def test_keras_backend_jax_without_jax_is_an_error(scenario):
    snap = with_env(replace(scenario("healthy-8gpu-nvlink"), jax=absent("JAX is not installed", "not-installed")),
                    KERAS_BACKEND="jax")
    found = outcome(snap, "keras-backend-jax").findings[0]
    assert found.code == "jax.keras-backend-missing" and found.severity is Severity.ERROR


def test_keras_backend_jax_with_broken_jax(healthy):
    snap = with_env(replace(healthy, jax=failed("ImportError: no module jaxlib", "exception:ImportError")),
                    KERAS_BACKEND="jax")
    assert code(snap, "keras-backend-jax") == "jax.keras-backend-broken"


def test_keras_backend_check_skips_for_other_backends(healthy):
    assert outcome(healthy, "keras-backend-jax").status is CheckStatus.SKIPPED
    assert outcome(with_env(healthy, KERAS_BACKEND="tensorflow"), "keras-backend-jax").status is CheckStatus.SKIPPED


def test_jax_versions_resolve_imported_first(healthy):
    env = resolve(replace(healthy, packages=packages(jax="0.10.1", jaxlib="0.10.1")))
    assert env.jax.text == "0.10.2" and env.jax.origin is Origin.JAX_IMPORTED
    assert [r.text for r in env.jax.others] == ["0.10.1"]
    assert env.versions()["jaxlib"].text == "0.10.2"


def test_jax_versions_from_metadata_when_not_imported(scenario):
    snap = replace(scenario("healthy-8gpu-nvlink"), packages=packages(jax="0.4.30", jaxlib="0.4.30"),
                   jax=skipped("--quick: JAX is not imported", "quick"))
    env = resolve(snap)
    assert env.jax.text == "0.4.30" and env.jax.origin is Origin.INSTALLED
    assert resolve(scenario("healthy-8gpu-nvlink")).jax.absent




def test_check_from_a_saved_snapshot_names_the_plugin_for_a_newer_cuda(healthy, tmp_path, capsys):
    from mgpu_doctor.cli import main

    snap = replace(healthy, jax=jax_facts(plugins={"jax-cuda13-plugin": "0.10.2", "jax-cuda13-pjrt": "0.10.2"},
                                          gpus=0))
    path = tmp_path / "snapshot.json"
    path.write_text(snap.to_json())
    code_ = main(["check", "--from", str(path), "--checks", "jax-gpus", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code_ == 1
    codes = [f["code"] for c in report["checks"] for f in c["findings"]]
    assert codes == ["jax.plugin-needs-newer-driver"]

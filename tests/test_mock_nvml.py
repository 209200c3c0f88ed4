"""The GPU side end to end: the real CLI and the real NVML binding over the C mock of libnvidia-ml.

Each test runs `python -m mgpu_doctor` in a child process whose LD_LIBRARY_PATH puts the mock's
libnvidia-ml.so.1 first and whose MOCK_NVML_PROFILE names a machine (tests/mock_nvml/profiles).
TensorFlow is left out (--quick, or `devices`): it would see no GPU on this machine whatever the
profile says.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mgpu_doctor.model.snapshot import NvmlFacts, load_snapshot
from tests.mock_nvml import MockBuilder, MockUnavailable, load_profile, profile_names
from tests.mock_nvml.bindings import BINDINGS, Binding, BindingUnavailable, python_env

GOLDEN = Path(__file__).parent / "data" / "golden" / "mock_nvml"
GPU_PROFILES = [p for p in profile_names() if load_profile(p)["gpus"]]


@pytest.fixture(scope="session")
def mock(tmp_path_factory) -> MockBuilder:
    builder = MockBuilder(tmp_path_factory.mktemp("mock_nvml"))
    try:
        builder.library_dir([])
    except MockUnavailable as exc:
        if os.environ.get("CI"):  # CI has a compiler and the header: it must run these
            raise
        pytest.skip(f"cannot build the mock NVML library: {exc}")
    return builder


def doctor(mock: MockBuilder, profile: str, *argv: str, binding: Binding = BINDINGS[0],
           **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("CUDA_", "NVIDIA_", "NCCL_", "TF_")) and k not in ("LD_LIBRARY_PATH", "NO_COLOR")}
    base.update(env)
    full = python_env(binding, mock.env(profile, base))
    return subprocess.run([sys.executable, "-m", "mgpu_doctor", *argv], env=full, capture_output=True,
                          text=True, timeout=120)


def nvml_facts(mock: MockBuilder, profile: str, tmp_path: Path, binding: Binding = BINDINGS[0]) -> NvmlFacts:
    out = tmp_path / f"{profile}.json"
    done = doctor(mock, profile, "snapshot", "--quick", "--no-redact", "-o", str(out), binding=binding)
    assert done.returncode == 0, done.stderr
    facts = load_snapshot(out).nvml
    assert isinstance(facts, NvmlFacts), facts
    return facts


SEVERITIES = ("ok", "info", "warning", "error", "crash")


def codes(done: subprocess.CompletedProcess[str]) -> set[str]:
    """The finding codes of a `--format json` report."""
    return {f["code"] for c in json.loads(done.stdout)["checks"] for f in c["findings"]}


def worst(check: dict) -> str:
    return max((f["severity"] for f in check["findings"]), key=SEVERITIES.index, default="ok")


# -- every profile, every field, through the installed binding


@pytest.mark.parametrize("profile", GPU_PROFILES)
def test_snapshot_holds_what_the_profile_says(mock, tmp_path, profile):
    spec = load_profile(profile)
    facts = nvml_facts(mock, profile, tmp_path)
    assert facts.driver_version == spec["driver_version"]
    assert facts.cuda_driver_version == f"{spec['cuda_driver_version'] // 1000}.{spec['cuda_driver_version'] % 1000 // 10}"
    lost = [i for i, g in enumerate(spec["gpus"]) if "lost_after" in g]
    assert [g.index for g in facts.gpus] == [i for i in range(len(spec["gpus"])) if i not in lost]
    for gpu in facts.gpus:
        want = spec["gpus"][gpu.index]
        assert (gpu.name, gpu.uuid, gpu.pci_bus_id) == (want["name"], want["uuid"], want["bus_id"])
        assert [gpu.memory_total_bytes, gpu.memory_used_bytes] == want["memory"]
        assert gpu.compute_capability == "{}.{}".format(*want["compute_capability"])
        assert gpu.ecc_uncorrected_volatile == (want["ecc_errors"][1][0] if "ecc_errors" in want else
                                                gpu.ecc_uncorrected_volatile)
        assert (gpu.pcie_width_current, gpu.pcie_width_max) == tuple(want["pcie_width"])
        assert isinstance(gpu.processes, list)
        mig = gpu.mig_devices if isinstance(gpu.mig_devices, list) else []
        assert [m.uuid for m in mig] == [m["uuid"] for m in want.get("mig_devices", [])]
    links = {(lk.a, lk.b): lk for lk in facts.links}
    assert len(links) == len(facts.gpus) * (len(facts.gpus) - 1) // 2
    levels = {10: "single", 20: "multiple", 30: "hostbridge", 40: "node", 50: "system"}
    for (a, b), link in links.items():
        assert link.topology == levels[spec["topology"][a][b]]


def test_nvlink_through_nvswitches_counts_every_switch_link(mock, tmp_path):
    """DGX A100: 12 links per GPU, 2 to each of 6 NVSwitches; `nvidia-smi topo -m` says NV12."""
    facts = nvml_facts(mock, "dgx-a100", tmp_path)
    assert {lk.nvlink_links for lk in facts.links} == {12}


def test_direct_nvlinks_are_counted_per_peer(mock, tmp_path):
    facts = nvml_facts(mock, "driver-470", tmp_path)
    assert [lk.nvlink_links for lk in facts.links] == [2]


def test_gpus_without_nvlink_have_zero_links_not_an_error(mock, tmp_path):
    facts = nvml_facts(mock, "rtx4090-workstation", tmp_path)
    assert {lk.nvlink_links for lk in facts.links} == {0}
    assert {lk.p2p_read for lk in facts.links} == {"chipset_not_supported"}
    assert all(g.ecc_enabled.cause == "not-supported" for g in facts.gpus)  # type: ignore[union-attr]


def test_a_gpu_lost_mid_enumeration_leaves_the_others_listed(mock, tmp_path):
    facts = nvml_facts(mock, "gpu-lost", tmp_path)
    assert [g.index for g in facts.gpus] == [0, 1, 3]
    assert "GPU 2" in facts.partial_error and "GPU is lost" in facts.partial_error
    assert {(lk.a, lk.b) for lk in facts.links} == {(0, 1), (0, 3), (1, 3)}
    done = doctor(mock, "gpu-lost", "check", "--quick")
    assert "3 GPU(s)" in done.stdout and "NVML lost GPU 2" in done.stdout
    assert "Xid 79" in done.stdout


def test_driver_470_with_the_newest_binding_falls_back_to_the_old_entry_points(mock, tmp_path):
    facts = nvml_facts(mock, "driver-470", tmp_path)
    gpu = facts.gpus[0]
    assert [(p.pid, p.used_memory_bytes, p.kind) for p in gpu.processes[:1]] == [(4242, 2**30, "compute")]
    assert gpu.processes[1].used_memory_bytes.cause == ""  # type: ignore[union-attr]  # not reported
    assert gpu.throttle_reasons == ["gpu_idle"]
    assert facts.cuda_driver_version == "11.4"


def test_driver_470_and_a_cuda_12_runtime_wheel_is_an_error(mock):
    done = doctor(mock, "driver-470", "check", "--quick", "--format", "json")
    ids = codes(done)
    assert done.returncode == 1
    assert "driver.too-old" in ids, sorted(ids)


@pytest.mark.parametrize("profile,cause,words", [
    ("driver-not-loaded", "driver-not-loaded", "installed but not loaded"),
    ("driver-library-mismatch", "driver-library-mismatch", "version mismatch"),
])
def test_nvml_that_cannot_start_says_why(mock, tmp_path, profile, cause, words):
    out = tmp_path / "s.json"
    doctor(mock, profile, "snapshot", "--quick", "-o", str(out))
    nvml = load_snapshot(out).nvml
    assert nvml.cause == cause and words in nvml.detail  # type: ignore[union-attr]
    done = doctor(mock, profile, "check", "--quick")
    assert words in done.stdout and "Traceback" not in done.stderr


# -- the checks that read these facts


def test_ecc_errors_and_a_narrow_link_are_reported(mock):
    done = doctor(mock, "ecc-errors-x8", "check", "--quick", "--format", "json")
    report = json.loads(done.stdout)
    by_check = {c["name"]: c for c in report["checks"]}
    assert worst(by_check["gpu-ecc"]) == "error"
    assert worst(by_check["gpu-pcie-link"]) in ("warning", "error")
    text = json.dumps(by_check["gpu-pcie-link"])
    assert "x8" in text and "GPU 1" in text


def test_dgx_a100_is_nvlinked_and_says_nothing_about_sockets(mock):
    done = doctor(mock, "dgx-a100", "check", "--quick", "-v")
    assert "No NVLink" not in done.stdout
    assert "CPU sockets" not in done.stdout


def test_mig_device_in_cuda_visible_devices_is_its_gpu(mock):
    mig = load_profile("h100-mig")["gpus"][1]["mig_devices"][0]["uuid"]
    done = doctor(mock, "h100-mig", "check", "--quick", "--format", "json", CUDA_VISIBLE_DEVICES=mig)
    report = json.loads(done.stdout)
    cvd = next(c for c in report["checks"] if c["name"] == "cuda-visible-devices")
    assert worst(cvd) == "info", cvd
    assert "visible NVML indices: [1]" in json.dumps(cvd)
    devices = doctor(mock, "h100-mig", "devices", CUDA_VISIBLE_DEVICES=mig)
    rows = [line.split() for line in devices.stdout.splitlines() if line[:1].isdigit()]
    assert [(r[0], r[1]) for r in rows] == [("0", "hidden"), ("1", "0")]


def test_two_mig_devices_warn_that_cuda_uses_the_first(mock):
    gpus = load_profile("h100-mig")["gpus"]
    first, second = gpus[0]["mig_devices"][1]["uuid"], gpus[1]["mig_devices"][0]["uuid"]
    done = doctor(mock, "h100-mig", "check", "--quick", "--format", "json",
                  CUDA_VISIBLE_DEVICES=f"{first},{second}")
    ids = codes(done)
    assert "cuda-visible-devices.several-mig" in ids and "cuda-visible-devices.unknown-gpu" not in ids


def test_unknown_mig_device_is_no_gpu(mock):
    done = doctor(mock, "h100-mig", "check", "--quick", "--format", "json",
                  CUDA_VISIBLE_DEVICES="MIG-ffffffff-0000-0000-0000-000000000000")
    assert "cuda-visible-devices.unknown-gpu" in codes(done)


@pytest.mark.parametrize("cvd,order,expected", [
    ("1,0", "PCI_BUS_ID", [("0", "1"), ("1", "0")]),
    ("1", "PCI_BUS_ID", [("0", "hidden"), ("1", "0")]),
    (None, None, [("0", "?"), ("1", "?")]),  # mixed models, FASTEST_FIRST: CUDA's order is unknown
])
def test_cuda_ordinals_of_a_mixed_box(mock, cvd, order, expected):
    env = {k: v for k, v in (("CUDA_VISIBLE_DEVICES", cvd), ("CUDA_DEVICE_ORDER", order)) if v is not None}
    done = doctor(mock, "mixed-a100-v100", "devices", **env)
    rows = [line.split() for line in done.stdout.splitlines() if line[:1].isdigit()]
    assert [(r[0], r[1]) for r in rows] == expected, done.stdout


def test_gpu_uuid_in_cuda_visible_devices(mock):
    uuid = load_profile("t4-cloud-vm")["gpus"][2]["uuid"]
    done = doctor(mock, "t4-cloud-vm", "devices", CUDA_VISIBLE_DEVICES=uuid)
    rows = [line.split() for line in done.stdout.splitlines() if line[:1].isdigit()]
    assert [r[1] for r in rows] == ["hidden", "hidden", "0", "hidden"]


# -- snapshot + check --from, fleet


def test_snapshot_then_check_from_reports_what_check_reports_live(mock, tmp_path):
    out = tmp_path / "s.json"
    doctor(mock, "ecc-errors-x8", "snapshot", "--quick", "-o", str(out))
    live = json.loads(doctor(mock, "ecc-errors-x8", "check", "--quick", "--format", "json").stdout)
    saved = json.loads(doctor(mock, "t4-cloud-vm", "check", "--from", str(out), "--format", "json").stdout)
    severity = {c["name"]: worst(c) for c in live["checks"] if c["name"].startswith("gpu")}
    assert severity["gpu-ecc"] == "error"
    assert {c["name"]: worst(c) for c in saved["checks"] if c["name"] in severity} == severity


def test_fleet_across_two_profiles_names_the_gpu_difference(mock, tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    doctor(mock, "t4-cloud-vm", "snapshot", "--quick", "-o", str(a))
    doctor(mock, "rtx4090-workstation", "snapshot", "--quick", "-o", str(b))
    done = doctor(mock, "t4-cloud-vm", "fleet", str(a), str(b), "-v")
    assert "Tesla T4" in done.stdout and "RTX 4090" in done.stdout, done.stdout


# -- golden `devices` output, reviewed by hand once (MGPU_DOCTOR_UPDATE_GOLDEN=1 rewrites)


@pytest.mark.parametrize("profile", profile_names())
def test_devices_golden(mock, profile):
    done = doctor(mock, profile, "devices")
    text = f"exit {done.returncode}\n{done.stdout}"
    path = GOLDEN / f"{profile}.devices.txt"
    if os.environ.get("MGPU_DOCTOR_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text()
    assert "Traceback" not in done.stderr


# -- every supported binding


@pytest.mark.parametrize("binding", BINDINGS[1:], ids=lambda b: b.name)
def test_every_binding_reads_the_same_facts(mock, tmp_path, binding):
    """The facts of every GPU profile through an older binding equal those through the newest."""
    try:
        python_env(binding, {})
    except BindingUnavailable as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))
    (tmp_path / "newest").mkdir()
    for profile in GPU_PROFILES:
        newest = nvml_facts(mock, profile, tmp_path / "newest", BINDINGS[0])
        older = nvml_facts(mock, profile, tmp_path, binding)
        assert older == newest, profile
    for profile in ("driver-not-loaded", "driver-library-mismatch"):
        done = doctor(mock, profile, "check", "--quick", binding=binding)
        assert "Traceback" not in done.stderr and "NVML" in done.stdout
        assert "deprecated" not in done.stderr.lower()

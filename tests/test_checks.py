"""Every check both ways: a finding on the snapshot that has the problem, none on a healthy one."""

from __future__ import annotations

import pytest

from mgpu_doctor.checks import CHECKS, UnknownCheckError, select_checks
from mgpu_doctor.checks.base import Check
from mgpu_doctor.model.findings import CheckStatus, Severity
from mgpu_doctor.model.unavailable import failed, skipped
from mgpu_doctor.record import replace
from tests.checking import judge
from tests.scenarios import packages, with_env

BY_NAME = {c.name: c for c in CHECKS}


def codes(snapshot, check_name):
    outcome = judge(BY_NAME[check_name], snapshot)
    return {f.code: f.severity for f in outcome.findings if f.severity > Severity.OK}, outcome


def problem_codes(snapshot):
    return {
        f.code for c in CHECKS for f in judge(c, snapshot).findings
        if f.severity >= Severity.WARNING
    }


def test_healthy_box_has_no_warning_at_all(scenario):
    assert problem_codes(scenario("healthy-8gpu-nvlink")) == set()


@pytest.mark.parametrize("name,expected", [
    ("gpu-held-by-other-process", {"gpu.memory-in-use"}),
    ("mixed-models", {"gpu.mixed", "cuda.device-order", "gpu.no-p2p"}),
    ("mig-enabled", {"gpu.mig-enabled", "tensorflow.fewer-gpus-mig"}),
    ("driver-without-gpus", {"gpu.none"}),
    ("cpu-only-tensorflow", {"tensorflow.cpu-only-build"}),
    ("sick-box", {"gpu.ecc-uncorrected", "gpu.throttling", "gpu.compute-prohibited",
                  "gpu.compute-exclusive", "gpu.pcie-width-degraded"}),
    ("no-driver-no-tensorflow", {"gpu.none", "tensorflow.not-installed"}),
    ("tensorflow-import-fails", {"tensorflow.import-failed", "libraries.missing"}),
])
def test_each_scenario_raises_exactly_its_problems(scenario, name, expected):
    assert problem_codes(scenario(name)) == expected


def test_memory_in_use_names_the_process(scenario):
    outcome = judge(BY_NAME["gpu-memory-in-use"], scenario("gpu-held-by-other-process"))
    [finding] = outcome.findings
    assert "GPU 2" in finding.title and any("pid 4242" in e for e in finding.evidence)
    assert "TF_FORCE_GPU_ALLOW_GROWTH" in finding.fix


def test_mig_on_a_single_gpu_is_a_warning_not_an_error(scenario):
    snap = scenario("mig-enabled")
    single = replace(snap, nvml=replace(snap.nvml, gpus=snap.nvml.gpus[:1], links=[]))
    found, _ = codes(single, "gpu-mig")
    assert found == {"gpu.mig-enabled": Severity.WARNING}


def test_import_failure_explains_the_error(scenario):
    outcome = judge(BY_NAME["tensorflow-import"], scenario("tensorflow-import-fails"))
    [finding] = outcome.findings
    assert "libcudnn.so.9" in "\n".join(finding.evidence)
    assert "tensorflow[and-cuda]" in finding.fix


@pytest.mark.parametrize("detail,cause,title,fix_part", [
    ("ImportError: numpy.core.multiarray failed to import", "exception:ImportError",
     "fails", "numpy<2"),
    ("TypeError: Descriptors cannot be created directly.", "exception:TypeError", "fails", "protobuf"),
    ("the TensorFlow probe crashed with SIGILL", "signal:SIGILL", "crashes the process (SIGILL)", "AVX"),
    ("`import tensorflow` did not finish", "timeout", "hangs", "nvidia-smi"),
    ("RuntimeError: something new", "exception:RuntimeError", "fails", "clean virtual environment"),
])
def test_import_failure_hints(scenario, detail, cause, title, fix_part):
    snap = replace(scenario("tensorflow-import-fails"), tensorflow=failed(detail, cause=cause))
    [finding] = judge(BY_NAME["tensorflow-import"], snap).findings
    assert finding.title.endswith(title) and fix_part in finding.fix


def test_quick_mode_skips_tensorflow_checks_with_the_reason(scenario):
    from mgpu_doctor.model.unavailable import skipped

    snap = replace(scenario("healthy-8gpu-nvlink"), tensorflow=skipped("--quick", cause="quick"))
    for name in ("tensorflow-import", "tensorflow-gpus"):
        outcome = judge(BY_NAME[name], snap)
        assert outcome.status is CheckStatus.SKIPPED and "--quick" in outcome.skip_reason


def test_missing_nvml_skips_gpu_checks_never_passes_them(scenario):
    snap = scenario("no-driver-no-tensorflow")
    for check in CHECKS:
        if check.name.startswith("gpu-"):
            outcome = judge(check, snap)
            assert outcome.status is CheckStatus.SKIPPED, check.name
            assert "NVML absent" in outcome.skip_reason


def test_tensorflow_sees_fewer_gpus_than_nvml(scenario):
    snap = scenario("healthy-8gpu-nvlink")
    tf = replace(snap.tensorflow, physical_devices=snap.tensorflow.physical_devices[:5],
                 warnings=["Cannot dlopen some GPU libraries."])
    found, outcome = codes(replace(snap, tensorflow=tf), "tensorflow-gpus")
    assert found == {"tensorflow.fewer-gpus-than-nvml": Severity.ERROR}
    assert "TensorFlow said: Cannot dlopen some GPU libraries." in outcome.findings[0].evidence


def test_tensorflow_sees_more_gpus_than_nvml(scenario):
    snap = scenario("gpu-held-by-other-process")
    snap = with_env(snap, CUDA_VISIBLE_DEVICES="0,1")
    found, _ = codes(snap, "tensorflow-gpus")
    assert found == {"tensorflow.more-gpus-than-nvml": Severity.WARNING}


def test_cuda_visible_devices_masking_is_expected_not_an_error(scenario):
    snap = scenario("healthy-8gpu-nvlink")
    tf = replace(snap.tensorflow, physical_devices=snap.tensorflow.physical_devices[:3])
    snap = with_env(replace(snap, tensorflow=tf), CUDA_VISIBLE_DEVICES="4,5")
    found, outcome = codes(snap, "tensorflow-gpus")
    assert found == {} and outcome.status is CheckStatus.PASSED


@pytest.mark.parametrize("value,code,severity", [
    ("", "cuda-visible-devices.empty", Severity.ERROR),
    ("-1", "cuda-visible-devices.hides-all", Severity.WARNING),
    ("0,9", "cuda-visible-devices.unknown-gpu", Severity.ERROR),
    ("GPU-deadbeef", "cuda-visible-devices.unknown-gpu", Severity.ERROR),
    ("1,1", "cuda-visible-devices.duplicate", Severity.WARNING),
    ("0,3", "cuda-visible-devices.ok", Severity.INFO),
])
def test_cuda_visible_devices(scenario, value, code, severity):
    found, _ = codes(with_env(scenario("sick-box"), CUDA_VISIBLE_DEVICES=value), "cuda-visible-devices")
    assert found == {code: severity}


def test_cuda_visible_devices_unset_is_skipped(scenario):
    _, outcome = codes(scenario("sick-box"), "cuda-visible-devices")
    assert outcome.status is CheckStatus.SKIPPED


def test_pci_bus_order_silences_the_device_order_warning(scenario):
    found, _ = codes(with_env(scenario("mixed-models"), CUDA_DEVICE_ORDER="PCI_BUS_ID"),
                     "cuda-device-order")
    assert found == {}


@pytest.mark.parametrize("versions,code,severity", [
    ({"tensorflow-cpu": "2.21.0"}, "packages.tensorflow-twins", Severity.WARNING),
    ({"tensorflow-gpu": "2.10.0"}, "packages.tensorflow-twins", Severity.ERROR),
    ({"tf-nightly": "2.22.0.dev20260301"}, "packages.tensorflow-twins", Severity.ERROR),
    ({"pynvml": "11.5.0", "nvidia-ml-py": "12.560.30"}, "packages.pynvml-twins", Severity.WARNING),
])
def test_conflicting_distributions(scenario, versions, code, severity):
    snap = replace(scenario("healthy-8gpu-nvlink"), packages=packages(**versions))
    found, _ = codes(snap, "tensorflow-distributions")
    assert found == {code: severity}


def test_one_tensorflow_distribution_passes(scenario):
    found, outcome = codes(scenario("healthy-8gpu-nvlink"), "tensorflow-distributions")
    assert found == {} and outcome.status is CheckStatus.PASSED


def test_shadowed_distribution(scenario):
    pk = replace(packages(), shadowed={"numpy": ["1.26.4 at /home/u/.local/lib/python3.11/site-packages"]})
    found, _ = codes(replace(scenario("healthy-8gpu-nvlink"), packages=pk), "tensorflow-distributions")
    assert found == {"packages.shadowed": Severity.WARNING}


@pytest.mark.parametrize("versions,env,expected", [
    ({}, {}, {"keras.in-use": Severity.INFO}),
    ({"tf-keras": "2.21.0"}, {"TF_USE_LEGACY_KERAS": "1"}, {"keras.in-use": Severity.INFO}),
    ({}, {"TF_USE_LEGACY_KERAS": "1"}, {"keras.legacy-without-tf-keras": Severity.ERROR}),
    ({"tf-keras": "2.19.0"}, {"TF_USE_LEGACY_KERAS": "1"}, {"keras.tf-keras-mismatch": Severity.ERROR}),
    ({"tf-keras": "2.19.0"}, {}, {"keras.tf-keras-mismatch": Severity.WARNING}),
    ({"keras": "2.15.0"}, {}, {"keras.keras2-with-tf216": Severity.ERROR}),
    ({"keras": ""}, {}, {"keras.missing": Severity.ERROR}),
    ({"tensorflow": "2.15.1", "keras": "2.15.0"}, {}, {"keras.in-use": Severity.INFO}),
    ({"tensorflow": "2.16.0rc0", "keras": "3.0.5"}, {}, {"keras.in-use": Severity.INFO}),
])
def test_keras_rules(scenario, versions, env, expected):
    # --quick: TensorFlow not imported, so the installed metadata is what the rules judge.
    snap = replace(scenario("healthy-8gpu-nvlink"), packages=packages(**versions),
                   tensorflow=skipped("--quick", cause="quick"))
    found, _ = codes(with_env(snap, **env), "keras")
    assert found == expected


def test_keras_in_use_names_which_keras(scenario):
    snap = replace(scenario("healthy-8gpu-nvlink"), packages=packages(**{"tf-keras": "2.21.0"}),
                   tensorflow=skipped("--quick", cause="quick"))
    [finding] = judge(BY_NAME["keras"], with_env(snap, TF_USE_LEGACY_KERAS="1")).findings
    assert finding.title == ("tf.keras is tf-keras 2.21.0 (predicted from TensorFlow's version: "
                             "TensorFlow 2.21.0 with TF_USE_LEGACY_KERAS=1)")
    imported = judge(BY_NAME["keras"], scenario("healthy-8gpu-nvlink")).findings[0]
    assert imported.title == ("tf.keras is Keras 3.15.1 (imported by the TensorFlow child: "
                              "tf.keras is the module keras)")


def test_a_check_that_raises_becomes_a_crash_finding(scenario):
    def broken(snapshot):
        raise KeyError("boom")

    outcome = judge(Check("broken", "Broken", broken), scenario("sick-box"))
    assert outcome.status is CheckStatus.CRASHED
    [finding] = outcome.findings
    assert finding.severity is Severity.CRASH and "KeyError" in finding.title


def test_select_checks_by_name():
    assert [c.name for c in select_checks(["gpu-ecc", "keras"], None)] == ["gpu-ecc", "keras"]
    assert "gpu-ecc" not in [c.name for c in select_checks(None, ["gpu-ecc"])]
    with pytest.raises(UnknownCheckError, match="unknown check 'gpu-eccs'"):
        select_checks(["gpu-eccs"], None)


def test_check_names_are_unique_and_stable():
    names = [c.name for c in CHECKS]
    assert len(names) == len(set(names))


# -- a check whose facts were not gathered skips, never passes --------------------------------

NVML_DOWN = failed("NVML_ERROR_UNKNOWN")
UNKNOWN_GPU_FACTS = {
    "gpu-compute-mode": ("compute_mode",),
    "gpu-pcie-link": ("pcie_width_current", "pcie_width_max", "pcie_gen_current", "pcie_gen_max"),
    "gpu-memory-in-use": ("memory_used_bytes", "processes"),
}


def _without(snapshot, fields, gpus=None):
    gpu_list = [replace(g, **{f: NVML_DOWN for f in fields}) if gpus is None or g.index in gpus else g
                for g in snapshot.nvml.gpus]
    return replace(snapshot, nvml=replace(snapshot.nvml, gpus=gpu_list))


@pytest.mark.parametrize("name", sorted(UNKNOWN_GPU_FACTS))
def test_gpu_checks_without_their_facts_skip_with_the_reason(scenario, name):
    # sick-box: each of these checks has a finding there, so a pass would be a lie twice over.
    outcome = judge(BY_NAME[name], _without(scenario("sick-box"), UNKNOWN_GPU_FACTS[name]))
    assert outcome.status is CheckStatus.SKIPPED and outcome.fact_failed
    assert "failed: NVML_ERROR_UNKNOWN" in outcome.skip_reason


@pytest.mark.parametrize("name", sorted(UNKNOWN_GPU_FACTS))
def test_gpu_checks_judge_the_gpus_they_know_and_name_the_others(scenario, name):
    snap = scenario("healthy-8gpu-nvlink")
    outcome = judge(BY_NAME[name], _without(snap, UNKNOWN_GPU_FACTS[name], gpus={3}))
    [finding] = outcome.findings
    assert outcome.status is CheckStatus.INFO and finding.severity is Severity.INFO
    assert "GPU 3 is not known" in finding.title


def test_most_checks_skipped_for_missing_facts_is_a_warning_that_says_so(scenario):
    from mgpu_doctor.checks.base import mostly_skipped, run_check
    from mgpu_doctor.environment.resolve import resolve
    from mgpu_doctor.model.report import new_report
    from mgpu_doctor.renderers.common import exit_code_for, summary_line

    broken = replace(scenario("sick-box"), nvml=failed("NVML did not answer in 10 s"),
                     tensorflow=failed("the child crashed"), packages=failed("no answer"),
                     libraries=failed("no answer"))
    outcomes = [run_check(c, resolve(broken)) for c in CHECKS]
    extra = mostly_skipped(outcomes)
    assert extra is not None and extra.findings[0].code == "facts.mostly-skipped"
    assert extra.findings[0].severity is Severity.WARNING and "NVML did not answer" in extra.findings[0].fix
    report = new_report("check", "t", outcomes + [extra], tool_version="0")
    assert "NOT VERIFIED" in summary_line(report) and exit_code_for(report, Severity.WARNING) == 1
    # Not applying is not failing: no GPU, TensorFlow not installed, --quick skip without it.
    cpu_box = scenario("no-driver-no-tensorflow")
    assert mostly_skipped([run_check(c, resolve(cpu_box)) for c in CHECKS]) is None
    quick = replace(scenario("sick-box"), tensorflow=skipped("--quick", cause="quick"))
    assert mostly_skipped([run_check(c, resolve(quick)) for c in CHECKS]) is None


def test_an_unknown_p2p_status_is_not_a_missing_peer_access() -> None:
    # NVML_P2P_STATUS_UNKNOWN says nothing; the matrix's peer_access reads the statuses the same way
    from mgpu_doctor.checks.gpus import check_gpu_interconnect
    from tests.fake_nvml import FakeMachine, gpus
    from tests.scenarios import nvml_of, snapshot, tf_view

    def codes(status: int) -> set[str]:
        snap = snapshot(nvml_of(FakeMachine(gpus=gpus(2), p2p={(0, 1): status, (1, 0): status})), tf_view(2))
        return {f.code for f in check_gpu_interconnect(snap)}

    assert "gpu.no-p2p" in codes(5) and "gpu.no-p2p" not in codes(6)
    assert "gpu.p2p-unknown" in codes(6) and "gpu.p2p-unknown" not in codes(5) | codes(0)  # said, not dropped

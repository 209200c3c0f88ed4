"""The collective set-up checks on snapshots of the fake machines (real probes, real checks)."""

from __future__ import annotations

from typing import Any

import pytest

from mgpu_doctor.checks import CHECKS, run_check
from mgpu_doctor.environment.resolve import resolve
from mgpu_doctor.model.collective_facts import CollectiveFacts, ShmFacts
from mgpu_doctor.model.findings import CheckOutcome, CheckStatus, Severity
from mgpu_doctor.model.snapshot import Snapshot, load_snapshot
from mgpu_doctor.model.unavailable import Unavailable, absent
from mgpu_doctor.record import replace
from tests import fake_host
from tests.fake_host import FakeRoot, nvml_for
from tests.scenarios import no_cuda_libraries, path_of, snapshot, tf_view

COLLECTIVE_CHECKS = ("pcie-p2p", "shared-memory", "cpu-affinity", "nccl-environment", "container-gpus")
NO_P2P = 5  # NVML's P2P status "not supported"


def machine(fake: FakeRoot, *, nvml: Any = None, env: dict[str, str] | None = None, **kw: Any) -> Snapshot:
    nvml = nvml_for(fake) if nvml is None else nvml
    n = 0 if isinstance(nvml, Unavailable) else len(nvml.gpus)
    return replace(snapshot(nvml, tf_view(n), env={**fake.environ, **(env or {})}, **kw),
                   collective=fake.gather())


def run(snap: Snapshot, name: str) -> CheckOutcome:
    return run_check(next(c for c in CHECKS if c.name == name), resolve(snap))


def codes(outcome: CheckOutcome) -> dict[str, Severity]:
    return {f.code: f.severity for f in outcome.findings}


def finding(outcome: CheckOutcome, code: str):
    return next(f for f in outcome.findings if f.code == code)


# -- pcie-p2p ------------------------------------------------------------------------------------

def test_workstation_acs_on_behind_a_plx_switch(tmp_path):
    fake = fake_host.workstation(tmp_path)
    out = run(machine(fake, nvml=nvml_for(fake, name="Quadro RTX 8000")), "pcie-p2p")
    assert codes(out) == {"pcie.acs-redirects-p2p": Severity.WARNING, "pcie.iommu-translates-p2p": Severity.WARNING}
    acs = finding(out, "pcie.acs-redirects-p2p")
    # Only the switch's downstream ports lie between the GPUs: the shared root port does not.
    assert "sudo setpci -s 0000:03:08.0 ECAP_ACS+0x6.w=0000; sudo setpci -s 0000:03:10.0 ECAP_ACS+0x6.w=0000" in acs.fix
    assert "0000:00:01.0" not in acs.fix
    assert "NCCL_P2P_LEVEL=NVL" in acs.fix and "NCCL_DEBUG=INFO" in acs.fix
    assert any("GPU 0 (0000:04:00.0) <-> GPU 1 (0000:05:00.0) (same PCIe switch)" in e for e in acs.evidence)
    assert any("ReqRedir+ CmpltRedir+" in e and "PEX 8747" in e for e in acs.evidence)
    assert "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html" \
           "#pci-access-control-services-acs" in acs.links
    assert "iommu=pt" in finding(out, "pcie.iommu-translates-p2p").fix


def test_acs_read_from_sysfs_gives_the_same_verdict(tmp_path):
    out = run(machine(fake_host.workstation(tmp_path, lspci=None)), "pcie-p2p")
    assert "pcie.acs-redirects-p2p" in codes(out)
    assert any("[sysfs config]" in e for e in finding(out, "pcie.acs-redirects-p2p").evidence)


def test_not_root_says_acs_is_unknown_and_how_to_read_it(tmp_path):
    fake = fake_host.workstation(tmp_path, lspci="workstation-plx-no-root.txt", root=False)
    out = run(machine(fake), "pcie-p2p")
    assert codes(out)["pcie.acs-unknown"] is Severity.INFO
    assert "sudo lspci -vvv" in finding(out, "pcie.acs-unknown").fix


def test_dgx_with_acs_off_and_no_iommu_passes(tmp_path):
    fake = fake_host.dgx(tmp_path)
    out = run(machine(fake, nvml=absent("NVML library not found")), "pcie-p2p")  # topology alone
    assert out.status is CheckStatus.PASSED and codes(out) == {"pcie.p2p-direct": Severity.OK}
    assert "IOMMU off" in out.findings[0].title
    nvlink = run(machine(fake, nvml=nvml_for(fake, nvlink=True)), "pcie-p2p")
    assert codes(nvlink) == {"pcie.no-pcie-p2p": Severity.OK}


def test_nvlinked_gpus_are_not_hurt_by_acs(tmp_path):
    fake = fake_host.workstation(tmp_path)
    out = run(machine(fake, nvml=nvml_for(fake, nvlink=True)), "pcie-p2p")
    assert codes(out) == {"pcie.no-pcie-p2p": Severity.OK}


def test_nvml_saying_no_p2p_wins_over_the_topology(tmp_path):
    fake = fake_host.workstation(tmp_path)
    out = run(machine(fake, nvml=nvml_for(fake, p2p={(0, 1): NO_P2P, (1, 0): NO_P2P})), "pcie-p2p")
    assert codes(out) == {"pcie.no-pcie-p2p": Severity.OK}


def test_vm_with_iommu_pt_passes(tmp_path):
    out = run(machine(fake_host.vm(tmp_path)), "pcie-p2p")
    assert out.status is CheckStatus.PASSED
    assert "IOMMU passthrough" in out.findings[0].title


def test_acs_in_a_vm_is_not_fixed_by_setpci(tmp_path):
    fake = fake_host.workstation(tmp_path)
    fake.write("proc/cpuinfo", "flags\t\t: fpu hypervisor\n")
    out = run(machine(fake), "pcie-p2p")
    acs = finding(out, "pcie.acs-redirects-p2p")
    assert "setpci" not in acs.fix and "NCCL_P2P_DISABLE=1" in acs.fix
    assert codes(out)["pcie.iommu-translates-p2p"] is Severity.INFO


def test_cuda_visible_devices_narrows_the_pairs(tmp_path):
    out = run(machine(fake_host.workstation(tmp_path), env={"CUDA_VISIBLE_DEVICES": "1"}), "pcie-p2p")
    assert out.status is CheckStatus.SKIPPED and "1 GPU(s) in use" in out.skip_reason


# -- shared-memory -------------------------------------------------------------------------------

def test_docker_with_64_mib_shm(tmp_path):
    out = run(machine(fake_host.docker(tmp_path)), "shared-memory")
    shm = finding(out, "shm.too-small")
    assert shm.severity is Severity.WARNING and "only 64 MiB" in shm.title
    assert "docker run --shm-size=1g" in shm.fix and "--ipc=host" in shm.fix
    assert "container: docker (/.dockerenv)" in shm.evidence


def test_kubernetes_gets_an_emptydir_and_a_host_gets_a_remount(tmp_path):
    fake = fake_host.docker(tmp_path)
    (tmp_path / ".dockerenv").unlink()
    fake.environ["KUBERNETES_SERVICE_HOST"] = "10.96.0.1"
    fix = finding(run(machine(fake), "shared-memory"), "shm.too-small").fix
    assert "emptyDir: {medium: Memory" in fix and "mountPath: /dev/shm" in fix
    bare = fake_host.two_socket(tmp_path / "bare")
    bare.write("proc/self/mounts", "tmpfs /dev/shm tmpfs rw,nosuid,nodev,size=524288k 0 0\n")
    out = run(machine(bare), "shared-memory")
    assert codes(out) == {"shm.small": Severity.INFO}
    assert "mount -o remount,size=2G /dev/shm" in out.findings[0].fix


def test_shm_filled_by_leftover_nccl_segments(tmp_path):
    fake = fake_host.dgx(tmp_path)
    fake.shm = (2 * 2**30, 10 * 2**20)
    (tmp_path / "dev/shm/nccl-d5rTd0").write_bytes(b"x" * 4096)
    out = run(machine(fake), "shared-memory")
    full = finding(out, "shm.nearly-full")
    assert "1 nccl-* segment(s)" in full.title and "rm /dev/shm/nccl-*" in full.fix


def test_a_roomy_shm_passes_with_its_size(tmp_path):
    out = run(machine(fake_host.dgx(tmp_path)), "shared-memory")
    assert out.status is CheckStatus.PASSED and out.findings[0].title == "32.0 GiB"


def test_no_shm_at_all(tmp_path):
    fake = fake_host.docker(tmp_path)
    (tmp_path / "dev/shm").rmdir()
    assert codes(run(machine(fake), "shared-memory")) == {"shm.missing": Severity.WARNING}


# -- cpu-affinity --------------------------------------------------------------------------------

def test_job_pinned_to_the_far_socket(tmp_path):
    out = run(machine(fake_host.two_socket(tmp_path)), "cpu-affinity")
    far = finding(out, "cpu.far-from-gpus")
    assert far.severity is Severity.WARNING and "pinned to the far socket" in far.title
    assert "numactl --cpunodebind=1 --membind=1" in far.fix
    assert "this process may run on CPUs 0-27,56-83 (NUMA node(s) 0)" in far.evidence
    assert "GPU 0 (0000:86:00.0): NUMA node 1, local CPUs 28-55,84-111" in far.evidence


def test_one_process_allowed_one_socket_of_two_with_gpus(tmp_path):
    out = run(machine(fake_host.two_socket(tmp_path, gpu_nodes=(0, 0, 1, 1))), "cpu-affinity")
    far = finding(out, "cpu.far-from-gpus")
    assert far.title.startswith("2 of 4 GPUs are on NUMA node(s) 1")


def test_job_allowed_the_right_socket_passes(tmp_path):
    out = run(machine(fake_host.two_socket(tmp_path, allowed="28-55,84-111")), "cpu-affinity")
    assert out.status is CheckStatus.PASSED
    assert out.findings[0].title == "56 CPU(s) for 4 GPU(s), on the NUMA node(s) 1 of the GPUs"


def test_a_cgroup_limit_far_below_the_gpus(tmp_path):
    fake = fake_host.docker(tmp_path)
    fake.write("sys/fs/cgroup/cpu.max", "300000 100000\n")
    out = run(machine(fake), "cpu-affinity")
    few = finding(out, "cpu.too-few-for-gpus")
    assert "only 3 CPU(s) for 4 GPU(s)" in few.title and "docker run --cpus=16" in few.fix
    assert few.evidence[0] == "cgroup limit 3 CPUs (/sys/fs/cgroup/cpu.max)"


# -- nccl-environment ----------------------------------------------------------------------------

def test_socket_ifname_naming_no_interface_here(tmp_path):
    out = run(machine(fake_host.docker(tmp_path), env={"NCCL_SOCKET_IFNAME": "ib0"}), "nccl-environment")
    bad = finding(out, "nccl.socket-ifname-matches-nothing")
    assert bad.severity is Severity.ERROR and "=eth0" in bad.fix
    assert "interfaces here: eth0, lo" in bad.evidence
    assert any("Docker's bridge network" in e for e in bad.evidence)


@pytest.mark.parametrize("value, ok", [("eth", True), ("=eth0", True), ("=eth", False), ("^docker,lo", True),
                                       ("^eth", False), ("ens,eth", True), ("^=eth0", False)])
def test_socket_ifname_syntax(tmp_path, value, ok):
    out = run(machine(fake_host.docker(tmp_path), env={"NCCL_SOCKET_IFNAME": value}), "nccl-environment")
    assert ("nccl.socket-ifname-matches-nothing" not in codes(out)) is ok


def test_ib_hca_naming_devices_that_are_not_here(tmp_path):
    out = run(machine(fake_host.vm(tmp_path), env={"NCCL_IB_HCA": "=mlx5_0:1"}), "nccl-environment")
    assert codes(out)["nccl.ib-hca-matches-nothing"] is Severity.WARNING
    dgx = run(machine(fake_host.dgx(tmp_path / "dgx"), env={"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1"}),
              "nccl-environment")
    assert "nccl.ib-hca-matches-nothing" not in codes(dgx)


def test_locked_memory_too_low_for_infiniband(tmp_path):
    out = run(machine(fake_host.docker(tmp_path)), "nccl-environment")
    low = finding(out, "nccl.memlock-too-low")
    assert "64 KiB" in low.title and "--ulimit memlock=-1" in low.fix
    off = run(machine(fake_host.docker(tmp_path / "off"), env={"NCCL_IB_DISABLE": "1"}), "nccl-environment")
    assert "nccl.memlock-too-low" not in codes(off)


def test_debug_knobs_cost_and_both_transports_off(tmp_path):
    out = run(machine(fake_host.dgx(tmp_path), env={"NCCL_ALGO": "Tree", "NCCL_P2P_DISABLE": "0"}),
              "nccl-environment")
    knobs = finding(out, "nccl.debug-knobs-set")
    assert knobs.severity is Severity.INFO and knobs.evidence == [
        "NCCL_ALGO=Tree (environment): forces the algorithms (Ring, Tree, ...): NCCL's tuning per message "
        "size is off"]
    both = run(machine(fake_host.dgx(tmp_path / "b"), env={"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}),
               "nccl-environment")
    assert finding(both, "nccl.debug-knobs-set").severity is Severity.WARNING


def test_nccl_conf_counts_and_the_environment_wins(tmp_path):
    fake = fake_host.dgx(tmp_path)  # /etc/nccl.conf: NCCL_IB_HCA=mlx5, which matches
    out = run(machine(fake), "nccl-environment")
    assert out.findings[0].title == "NCCL_IB_HCA=mlx5 (/etc/nccl.conf)"
    fake.write("etc/nccl.conf", "NCCL_IB_HCA=mlx4\n")
    assert "nccl.ib-hca-matches-nothing" in codes(run(machine(fake), "nccl-environment"))
    assert "nccl.ib-hca-matches-nothing" not in codes(run(machine(fake, env={"NCCL_IB_HCA": "mlx5_0"}),
                                                          "nccl-environment"))


def test_unknown_debug_level(tmp_path):
    out = run(machine(fake_host.dgx(tmp_path), env={"NCCL_DEBUG": "verbose"}), "nccl-environment")
    assert "NCCL_DEBUG=INFO" in finding(out, "nccl.debug-level-unknown").fix
    assert run(machine(fake_host.dgx(tmp_path / "i"), env={"NCCL_DEBUG": "info"}),
               "nccl-environment").status is CheckStatus.PASSED


# -- container-gpus ------------------------------------------------------------------------------

def test_container_with_its_gpus_passes(tmp_path):
    out = run(machine(fake_host.docker(tmp_path)), "container-gpus")
    assert out.status is CheckStatus.PASSED
    assert out.findings[0].title == "docker container: 4 GPU device(s) injected, NVML sees 4"


def test_container_started_without_the_nvidia_runtime(tmp_path):
    fake = fake_host.docker(tmp_path)
    for i in range(4):
        (tmp_path / f"dev/nvidia{i}").unlink()
    out = run(machine(fake, nvml=absent("NVML library (libnvidia-ml.so.1) not found")), "container-gpus")
    bad = finding(out, "container.no-gpu-injected")
    assert bad.severity is Severity.ERROR and "docker run --gpus all" in bad.fix
    fake.environ.pop("NVIDIA_VISIBLE_DEVICES")
    quiet = run(machine(fake, nvml=absent("NVML library (libnvidia-ml.so.1) not found")), "container-gpus")
    assert codes(quiet) == {"container.no-gpu-injected": Severity.INFO}


def test_visible_devices_void_and_a_count_that_differs(tmp_path):
    out = run(machine(fake_host.docker(tmp_path), env={"NVIDIA_VISIBLE_DEVICES": "void"}), "container-gpus")
    assert codes(out) == {"container.gpus-not-requested": Severity.WARNING}
    out = run(machine(fake_host.docker(tmp_path / "b"), env={"NVIDIA_VISIBLE_DEVICES": "0,1"}), "container-gpus")
    assert "NVML sees 4" in finding(out, "container.gpu-count-differs").title


def test_driver_capabilities_without_compute_or_utility(tmp_path):
    out = run(machine(fake_host.docker(tmp_path), env={"NVIDIA_DRIVER_CAPABILITIES": "utility"}), "container-gpus")
    assert codes(out) == {"container.no-compute-capability": Severity.ERROR}
    assert "NVIDIA_DRIVER_CAPABILITIES=compute,utility" in out.findings[0].fix
    out = run(machine(fake_host.docker(tmp_path / "b"), env={"NVIDIA_DRIVER_CAPABILITIES": "compute"}),
              "container-gpus")
    assert codes(out) == {"container.no-utility-capability": Severity.WARNING}
    assert run(machine(fake_host.docker(tmp_path / "c"), env={"NVIDIA_DRIVER_CAPABILITIES": "all"}),
               "container-gpus").status is CheckStatus.PASSED


def test_capabilities_unset_and_no_libcuda_mounted(tmp_path):
    fake = fake_host.docker(tmp_path)
    fake.environ.pop("NVIDIA_DRIVER_CAPABILITIES")
    out = run(machine(fake, libraries=no_cuda_libraries()), "container-gpus")
    missing = finding(out, "container.no-compute-capability")
    assert "utility only" in missing.title and "libcuda: not found on the library search path" in missing.evidence
    assert run(machine(fake_host.docker(tmp_path / "b")), "container-gpus").status is CheckStatus.PASSED


def test_not_in_a_container(tmp_path):
    out = run(machine(fake_host.dgx(tmp_path)), "container-gpus")
    assert out.status is CheckStatus.PASSED and out.findings[0].title == "not in a container"


# -- all of them ---------------------------------------------------------------------------------

def test_without_gpus_the_gpu_checks_skip_with_their_reason_and_the_others_run(tmp_path):
    bare = FakeRoot(tmp_path, lspci="")
    fake_host._host_basics(bare, "ro quiet")
    bare.numa({"0": "0-1"}, allowed="0-1", online="0-1")
    snap = machine(bare, nvml=absent("NVML library (libnvidia-ml.so.1) not found"))
    outcomes = {name: run(snap, name) for name in COLLECTIVE_CHECKS}
    for name in ("pcie-p2p", "cpu-affinity"):
        assert outcomes[name].status is CheckStatus.SKIPPED
        assert "no NVIDIA GPU on the PCI bus" in outcomes[name].skip_reason
    for name in ("shared-memory", "nccl-environment", "container-gpus"):
        assert outcomes[name].status is CheckStatus.PASSED, outcomes[name]


def test_an_older_snapshot_skips_them_all_saying_why():
    env = resolve(load_snapshot(path_of("healthy-8gpu-nvlink")))  # written without the host set-up facts
    for check in CHECKS:
        if check.name in COLLECTIVE_CHECKS:
            outcome = run_check(check, env)
            assert outcome.status is CheckStatus.SKIPPED and "not in this snapshot" in outcome.skip_reason


def test_every_finding_has_a_fix_and_a_source(tmp_path):
    """Each problem any of the fake machines shows carries what to do and where that comes from."""
    builds = [
        machine(fake_host.workstation(tmp_path / "w")),
        machine(fake_host.workstation(tmp_path / "n", lspci="workstation-plx-no-root.txt", root=False)),
        machine(fake_host.docker(tmp_path / "d"), env={"NCCL_SOCKET_IFNAME": "ib", "NCCL_IB_HCA": "mlx4",
                                                     "NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1",
                                                     "NCCL_DEBUG": "loud",
                                                     "NVIDIA_DRIVER_CAPABILITIES": "video"}),
        machine(fake_host.two_socket(tmp_path / "t", allowed="0-2")),
        machine(fake_host.docker(tmp_path / "v"), env={"NVIDIA_VISIBLE_DEVICES": "void"}),
    ]
    seen = set()
    for snap in builds:
        for name in COLLECTIVE_CHECKS:
            for f in run(snap, name).findings:
                if f.severity >= Severity.INFO:
                    seen.add(f.code)
                    assert f.fix and f.links, f.code
    assert len(seen) >= 12, seen


def test_facts_of_the_wrong_kind_make_no_crash(tmp_path):
    snap = machine(fake_host.docker(tmp_path))
    collective = snap.collective
    assert isinstance(collective, CollectiveFacts) and isinstance(collective.shm, ShmFacts)
    odd = replace(snap, collective=replace(collective, cpus=replace(collective.cpus, allowed="garbage")))
    assert run(odd, "cpu-affinity").status is CheckStatus.SKIPPED

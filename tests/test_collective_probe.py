"""The collective set-up probes on the /proc, /sys and lspci of real kinds of machines."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from mgpu_doctor import record as records
from mgpu_doctor.environment.cpulist import format_cpulist, parse_cpulist
from mgpu_doctor.model.collective_facts import CollectiveFacts, IommuFacts, PcieFacts, normalise_bus_id
from mgpu_doctor.model.serde import from_jsonable, to_jsonable
from mgpu_doctor.model.snapshot import load_snapshot
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.probes.collective import gather_collective
from mgpu_doctor.probes.commands import run_command
from mgpu_doctor.probes.hostsetup import cgroup_cpu_quota
from mgpu_doctor.probes.pcie import acs_from_config, iommu_mode, parse_lspci
from tests import fake_host
from tests.fake_host import ACS_ON, LSPCI, FakeRoot, config_space
from tests.scenarios import path_of


def pcie_of(facts: CollectiveFacts) -> PcieFacts:
    assert isinstance(facts.pcie, PcieFacts), facts.pcie
    return facts.pcie


def iommu_of(facts: CollectiveFacts) -> IommuFacts:
    assert isinstance(facts.iommu, IommuFacts), facts.iommu
    return facts.iommu


def acs(facts: CollectiveFacts) -> dict[str, object]:
    return {b.address: b.acs for b in pcie_of(facts).bridges}


# -- PCIe: GPUs, the bridges above them, ACS -----------------------------------------------------

def test_workstation_behind_a_plx_switch_with_acs_on_read_from_lspci(tmp_path):
    facts = fake_host.workstation(tmp_path).gather()
    pcie = pcie_of(facts)
    assert [g.address for g in pcie.gpus] == ["0000:04:00.0", "0000:05:00.0"]
    assert pcie.gpus[0].bridges == ["0000:00:01.0", "0000:02:00.0", "0000:03:08.0"]
    found = {b.address: b for b in pcie.bridges}
    assert found["0000:03:08.0"].acs == ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"]
    assert found["0000:03:08.0"].acs_source == "lspci -vvv"
    assert "PEX 8747" in found["0000:03:08.0"].description
    # The switch's upstream port has no ACS capability: it cannot redirect anything.
    assert isinstance(found["0000:02:00.0"].acs, Unavailable) and found["0000:02:00.0"].acs.cause == "no-acs"
    assert iommu_of(facts).mode == "translated" and iommu_of(facts).group_types == {"30": "DMA-FQ", "31": "DMA-FQ"}


def test_without_lspci_the_same_acs_is_read_from_sysfs_config_space(tmp_path):
    with_lspci = fake_host.workstation(tmp_path / "a").gather()
    without = fake_host.workstation(tmp_path / "b", lspci=None).gather()
    assert acs(without) == acs(with_lspci)
    assert {b.acs_source for b in pcie_of(without).bridges if isinstance(b.acs, list)} == {"sysfs config"}
    assert without.notes == ["ACS read from sysfs: lspci not found on PATH"]


def test_a_non_root_user_gets_acs_unknown_not_acs_off(tmp_path):
    facts = fake_host.workstation(tmp_path, lspci="workstation-plx-no-root.txt", root=False).gather()
    for bridge in pcie_of(facts).bridges:
        assert isinstance(bridge.acs, Unavailable) and bridge.acs.cause == "needs-root", bridge


def test_dgx_with_acs_off(tmp_path):
    facts = fake_host.dgx(tmp_path).gather()
    assert acs(facts)["0000:02:00.0"] == [] and acs(facts)["0000:00:01.1"] == []
    assert iommu_of(facts).mode == "off" and iommu_of(facts).hypervisor == ""


@pytest.mark.parametrize("control, expected", [
    (0x0000, []),
    (ACS_ON, ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"]),
    (0x007F, ["SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans"]),
])
def test_acs_control_bits_from_config_space(tmp_path, control, expected):
    path = tmp_path / "config"
    path.write_bytes(config_space(control))
    assert acs_from_config(path) == expected


def test_config_space_without_acs_and_truncated_config_space(tmp_path):
    path = tmp_path / "config"
    path.write_bytes(config_space(None))
    assert acs_from_config(path).cause == "no-acs"
    path.write_bytes(config_space(ACS_ON, root=False))
    assert acs_from_config(path).cause == "needs-root"
    path.write_bytes(b"\xff" * 4096)  # a device that fell off the bus reads all ones
    assert acs_from_config(path).cause == "no-acs"


def test_lspci_parsing_names_every_device_and_its_acs():
    found = parse_lspci((LSPCI / "workstation-plx-acs-on.txt").read_text())
    assert sorted(found) == ["0000:00:01.0", "0000:02:00.0", "0000:03:08.0", "0000:03:10.0",
                             "0000:04:00.0", "0000:05:00.0"]
    denied = parse_lspci((LSPCI / "workstation-plx-no-root.txt").read_text())
    assert all(b.acs.cause == "needs-root" for b in denied.values())


def test_lspci_runs_only_when_there_are_gpus_and_with_a_timeout(tmp_path):
    fake = fake_host.workstation(tmp_path / "gpus")
    fake.gather()
    assert fake.runs == [["lspci", "-D", "-vvv"]]
    bare = FakeRoot(tmp_path / "none", lspci="")
    fake_host._host_basics(bare, "ro quiet")
    bare.numa({"0": "0-1"}, allowed="0-1", online="0-1")
    facts = bare.gather()
    assert bare.runs == []
    assert facts.pcie.cause == "no-gpu" and "no NVIDIA GPU" in facts.pcie.detail
    assert not isinstance(facts.shm, Unavailable) and not isinstance(facts.network, Unavailable)


# -- IOMMU ---------------------------------------------------------------------------------------

def test_vm_with_iommu_pt_is_passthrough_and_a_vm(tmp_path):
    facts = fake_host.vm(tmp_path).gather()
    iommu = iommu_of(facts)
    assert iommu.mode == "passthrough" and iommu.kernel_params == ["intel_iommu=on", "iommu=pt"]
    assert "hypervisor flag" in iommu.hypervisor and "QEMU" in iommu.hypervisor
    assert all(isinstance(g.numa_node, Unavailable) for g in pcie_of(facts).gpus)


@pytest.mark.parametrize("params, units, groups, has_groups, mode", [
    ([], [], {}, False, "off"),
    (["intel_iommu=on"], ["dmar0"], {}, True, "translated"),
    (["intel_iommu=on", "iommu=pt"], ["dmar0"], {}, True, "passthrough"),
    (["amd_iommu=on", "iommu.passthrough=1"], ["ivhd0"], {}, True, "passthrough"),
    (["intel_iommu=off"], ["dmar0"], {}, False, "off"),
    ([], ["ivhd0"], {}, True, "on"),  # AMD IOMMU on by default, mode not on the command line
    ([], ["ivhd0"], {"12": "DMA"}, True, "translated"),  # the group's type decides
    (["iommu=pt"], ["dmar0"], {"12": "DMA-FQ"}, True, "translated"),  # what the kernel does wins
    ([], ["dmar0"], {"12": "unmanaged"}, True, "vfio"),
])
def test_iommu_mode(params, units, groups, has_groups, mode):
    assert iommu_mode(params, units, groups, has_groups)[0] == mode


# -- /dev/shm, CPUs, network, container ---------------------------------------------------------

def test_docker_container_with_default_shm_and_memlock(tmp_path):
    facts = fake_host.docker(tmp_path).gather()
    assert facts.shm.size_bytes == 64 * 2**20 and facts.shm.fs_type == "tmpfs"  # size= of the mount
    assert facts.shm.available_bytes == 63 * 2**20
    assert facts.container.runtime == "docker" and facts.container.evidence == ["docker (/.dockerenv)"]
    assert facts.container.device_nodes == [f"/dev/nvidia{i}" for i in range(4)]  # not nvidiactl
    assert facts.network.memlock_bytes == 65536 and facts.network.interfaces == ["eth0", "lo"]
    assert [d.name for d in facts.network.ib_devices] == ["mlx5_0"]


def test_leftover_nccl_segments_are_counted(tmp_path):
    fake = fake_host.docker(tmp_path)
    (tmp_path / "dev/shm/nccl-03v824").write_bytes(b"x" * 8192)
    (tmp_path / "dev/shm/sem.mp-1").write_bytes(b"x")
    shm = fake.gather().shm
    assert shm.nccl_segments == 1 and shm.nccl_segment_bytes >= 8192


def test_kubernetes_and_podman_are_told_apart(tmp_path):
    fake = fake_host.docker(tmp_path)
    (tmp_path / ".dockerenv").unlink()
    fake.environ["KUBERNETES_SERVICE_HOST"] = "10.96.0.1"
    fake.write("proc/self/cgroup", "0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-ab12.scope\n")
    assert fake.gather().container.runtime == "kubernetes"
    del fake.environ["KUBERNETES_SERVICE_HOST"]
    fake.write("proc/self/cgroup", "0::/\n")
    fake.write("run/.containerenv", "")
    assert fake.gather().container.runtime == "podman"


def test_two_socket_box_pinned_to_socket_0(tmp_path):
    facts = fake_host.two_socket(tmp_path).gather()
    assert facts.cpus.allowed == "0-27,56-83" and facts.cpus.numa_nodes["1"] == "28-55,84-111"
    assert {g.numa_node for g in pcie_of(facts).gpus} == {1}


@pytest.mark.parametrize("layout, expected", [
    ({"sys/fs/cgroup/cgroup.controllers": "cpu", "proc/self/cgroup": "0::/job/step",
      "sys/fs/cgroup/job/cpu.max": "400000 100000", "sys/fs/cgroup/job/step/cpu.max": "max 100000"}, 4.0),
    ({"sys/fs/cgroup/cgroup.controllers": "cpu", "proc/self/cgroup": "0::/",
      "sys/fs/cgroup/cpu.max": "150000 100000"}, 1.5),
    ({"proc/self/cgroup": "4:cpu,cpuacct:/docker/ab12", "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "200000",
      "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000"}, 2.0),  # v1, no cgroup namespace
    ({"proc/self/cgroup": "1:cpu:/", "sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1",
      "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000"}, None),
])
def test_cgroup_cpu_limit(tmp_path, layout, expected):
    fake = FakeRoot(tmp_path)
    for rel, text in layout.items():
        fake.write(rel, text + "\n")
    quota, source = cgroup_cpu_quota(tmp_path)
    if expected is None:
        assert isinstance(quota, Unavailable) and source == ""
    else:
        assert quota == expected and source.startswith("/sys/fs/cgroup/")


def test_nccl_conf_values_are_read_and_masked(tmp_path):
    fake = fake_host.dgx(tmp_path)
    fake.write("etc/nccl.conf", "NCCL_SOCKET_IFNAME=ib\nNCCL_DEBUG=WARN\n#NCCL_ALGO=Tree\nNCCL_IB_PASSWORD=hunter2\n")
    conf = fake.gather().network.nccl_conf
    assert conf == {"NCCL_SOCKET_IFNAME": "ib", "NCCL_DEBUG": "WARN", "NCCL_IB_PASSWORD": "***"}


def test_a_probe_that_raises_is_a_failed_fact_not_a_traceback(tmp_path):
    fake = fake_host.docker(tmp_path)

    def broken(_path: str):
        raise OSError(5, "Input/output error")

    facts = gather_collective(tmp_path, fake.run, fake.environ, broken)
    assert facts.shm.available_bytes.reason == "failed" and facts.shm.size_bytes == 64 * 2**20


# -- the facts in the snapshot -------------------------------------------------------------------

def test_collective_facts_survive_the_json_round_trip(tmp_path):
    for build in (fake_host.workstation, fake_host.docker, fake_host.vm):
        facts = build(tmp_path / build.__name__).gather()
        data = json.loads(json.dumps(to_jsonable(facts)))
        assert from_jsonable(CollectiveFacts, data) == records.replace(facts)


def test_an_older_snapshot_has_them_as_not_in_this_snapshot():
    snap = load_snapshot(path_of("healthy-8gpu-nvlink"))
    assert isinstance(snap.collective, Unavailable)
    assert snap.collective.reason == "skipped" and "not in this snapshot" in snap.collective.detail


def test_the_live_probe_reads_this_machine_quickly():
    start = time.monotonic()
    facts = gather_collective()
    assert time.monotonic() - start < 1.0
    assert not isinstance(facts.shm, Unavailable) or facts.shm.cause == "no-shm"
    assert not isinstance(facts.cpus, Unavailable)
    assert facts.cpus.allowed == format_cpulist(frozenset(os.sched_getaffinity(0)))


# -- helpers -------------------------------------------------------------------------------------

@pytest.mark.parametrize("nvml, sysfs", [("00000000:3B:00.0", "0000:3b:00.0"), ("0000:3b:00.0", "0000:3b:00.0"),
                                         ("3b:00.0", "0000:3b:00.0"), ("00000001:04:00.0", "0001:04:00.0")])
def test_bus_ids_in_one_spelling(nvml, sysfs):
    assert normalise_bus_id(nvml) == sysfs


def test_cpulists():
    assert parse_cpulist("0-3,8,10-11\n") == frozenset({0, 1, 2, 3, 8, 10, 11})
    assert format_cpulist(parse_cpulist("28-55,84-111")) == "28-55,84-111"
    with pytest.raises(ValueError):
        parse_cpulist("3-1")


def test_the_real_runner_runs_times_out_and_reports_a_missing_command():
    assert run_command(["sh", "-c", "echo hello"], 5).stdout == "hello\n"
    assert run_command(["sh", "-c", "exit 3"], 5).error == "sh exited with status 3"
    missing = run_command(["no-such-command-mgpu"], 5)
    assert missing.returncode is None and "not found" in missing.error
    start = time.monotonic()
    slow = run_command(["sh", "-c", "sleep 30 & sleep 30"], 0.3)
    assert time.monotonic() - start < 3 and "did not finish within 0.3 s" in slow.error


def test_fixture_files_are_what_the_readme_says():
    assert {p.name for p in Path(LSPCI).glob("*.txt")} == {
        "workstation-plx-acs-on.txt", "workstation-plx-no-root.txt", "dgx-acs-off.txt"}

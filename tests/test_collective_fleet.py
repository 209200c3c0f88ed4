"""``fleet`` over the host set-up facts: /dev/shm, IOMMU, ACS, memlock, containers, NCCL tuning."""

from __future__ import annotations

import json

from mgpu_doctor import record as records
from mgpu_doctor.cli import main
from mgpu_doctor.fleet.checks import FLEET_CHECKS, fleet_report
from mgpu_doctor.fleet.compare import build_fleet
from mgpu_doctor.fleet.facts import COMPARED_FACTS
from mgpu_doctor.model.findings import Severity
from mgpu_doctor.model.snapshot import Snapshot
from mgpu_doctor.record import replace
from tests import fake_host
from tests.test_collective_checks import machine


def node(name: str, snap: Snapshot) -> Snapshot:
    return replace(snap, host=replace(snap.host, hostname=name))


def report_of(*snaps: Snapshot):
    fleet = build_fleet([(f"/snaps/{s.host.hostname}.json", s) for s in snaps], COMPARED_FACTS)
    return fleet_report(fleet, FLEET_CHECKS, tool_version="0.1.0")


def codes(report) -> dict[str, Severity]:
    return {f.code: f.severity for f in report.findings if f.code != "fleet.node-problems"}


def finding(report, code):
    return next(f for f in report.findings if f.code == code)


def test_identical_nodes_with_host_facts_give_no_host_finding(tmp_path):
    snap = machine(fake_host.dgx(tmp_path))
    report = report_of(node("a", snap), node("b", snap))
    assert codes(report) == {}
    shm = report.fleet.row("host.shm")
    assert shm.status == "same" and shm.values == {"a": "32.0 GiB", "b": "32.0 GiB"}
    assert report.fleet.row("nccl-conf.NCCL_IB_HCA").values == {"a": "mlx5", "b": "mlx5"}


def test_a_node_with_a_small_shm(tmp_path):
    big = machine(fake_host.dgx(tmp_path / "a"))
    small_root = fake_host.dgx(tmp_path / "b")
    small_root.shm = (64 * 2**20, 64 * 2**20)
    report = report_of(node("gpu-01", big), node("gpu-02", machine(small_root)))
    shm = finding(report, "fleet.shm-differs")
    assert shm.severity is Severity.WARNING and "small on gpu-02" in shm.title
    assert "/dev/shm: 32.0 GiB on gpu-01" in shm.evidence and "/dev/shm: 64 MiB on gpu-02" in shm.evidence


def test_shm_sizes_that_differ_but_are_all_large_are_fine(tmp_path):
    other = fake_host.dgx(tmp_path / "b")
    other.shm = (512 * 2**30, 512 * 2**30)
    report = report_of(node("a", machine(fake_host.dgx(tmp_path / "a"))), node("b", machine(other)))
    assert "fleet.shm-differs" not in codes(report)


def test_iommu_and_acs_on_one_node_only(tmp_path):
    good = fake_host.workstation(tmp_path / "a")
    good.write("proc/cmdline", "ro quiet intel_iommu=on iommu=pt\n")
    for group in ("30", "31"):
        good.group_type(group, "identity")
    good.lspci = good.lspci.replace("ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n",
                                    "ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-\n")
    bad = fake_host.workstation(tmp_path / "b")
    report = report_of(node("ws-1", machine(good)), node("ws-2", machine(bad)))
    pcie = finding(report, "fleet.pcie-setup-differs")
    assert "redirected on ws-2" in pcie.title
    assert "IOMMU mode: translated on ws-2" in pcie.evidence
    assert "ACS redirect between GPUs: on 2 bridge(s) between GPUs on ws-2" in pcie.evidence


def test_memlock_and_containers_that_differ(tmp_path):
    host = machine(fake_host.dgx(tmp_path / "a"))
    container = machine(fake_host.docker(tmp_path / "b"))
    found = codes(report_of(node("a", host), node("b", container)))
    assert found["fleet.memlock-differs"] is Severity.WARNING
    assert found["fleet.container-differs"] is Severity.INFO


def test_nccl_algo_or_proto_forced_on_some_ranks_only_is_an_error(tmp_path):
    plain = machine(fake_host.dgx(tmp_path / "a"))
    forced = machine(fake_host.dgx(tmp_path / "b"), env={"NCCL_PROTO": "Simple"})
    report = report_of(node("a", plain), node("b", forced))
    tuning = finding(report, "fleet.nccl-tuning-differs")
    assert tuning.severity is Severity.ERROR
    assert tuning.evidence == ["NCCL_PROTO: Simple on b; not set on a"]
    # Reported once: the generic NCCL-settings warning leaves it to this rule.
    assert "fleet.nccl-env-differs" not in codes(report)


def test_nccl_conf_counts_for_the_tuning_and_is_compared(tmp_path):
    conf = fake_host.dgx(tmp_path / "b")
    conf.write("etc/nccl.conf", "NCCL_IB_HCA=mlx5\nNCCL_ALGO=Ring\nNCCL_MAX_NCHANNELS=4\n")
    report = report_of(node("a", machine(fake_host.dgx(tmp_path / "a"))), node("b", machine(conf)))
    found = codes(report)
    assert found["fleet.nccl-tuning-differs"] is Severity.ERROR
    assert found["fleet.nccl-conf-differs"] is Severity.WARNING
    assert finding(report, "fleet.nccl-conf-differs").evidence == [
        "/etc/nccl.conf NCCL_MAX_NCHANNELS: 4 on b", "/etc/nccl.conf NCCL_MAX_NCHANNELS: not set on a"]
    assert finding(report, "fleet.nccl-tuning-differs").evidence == ["NCCL_ALGO: Ring on b; not set on a"]


def test_old_snapshots_skip_the_host_rule(tmp_path):
    from mgpu_doctor.model.snapshot import load_snapshot
    from tests.scenarios import path_of

    old = load_snapshot(path_of("healthy-8gpu-nvlink"))
    report = report_of(node("a", old), node("b", old))
    outcome = next(c for c in report.checks if c.name == "fleet-host-setup")
    assert outcome.status.value == "skipped" and "older mgpu-doctor" in outcome.skip_reason


def test_fleet_cli_over_saved_snapshots(tmp_path, capsys):
    files = []
    for name, build in (("n1", fake_host.dgx), ("n2", fake_host.docker)):
        path = tmp_path / f"{name}.json"
        path.write_text(node(name, machine(build(tmp_path / name))).to_json())
        files.append(str(path))
    code = main(["fleet", *files, "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1
    keys = {r["key"] for r in data["fleet"]["rows"]}
    assert {"host.shm", "host.iommu", "host.memlock", "host.container"} <= keys
    found = {f["code"] for c in data["checks"] for f in c["findings"]}
    assert {"fleet.shm-differs", "fleet.memlock-differs", "fleet.container-differs"} <= found


# -- the JSON schema -----------------------------------------------------------------------------

def report_schema() -> dict:
    from importlib import resources
    return json.loads(resources.files("mgpu_doctor").joinpath("schemas/report.schema.json").read_text())


def test_the_schema_describes_every_collective_fact_field():

    from mgpu_doctor.model import collective_facts as cf

    defs = report_schema()["$defs"]
    pairs = {"collective": cf.CollectiveFacts, "pcie": cf.PcieFacts, "pci_gpu": cf.PciGpu,
             "pci_bridge": cf.PciBridge, "iommu": cf.IommuFacts, "shm": cf.ShmFacts, "cpus": cf.CpuFacts,
             "network": cf.NetworkFacts, "ib_device": cf.IbDevice, "container": cf.ContainerFacts}
    for name, cls in pairs.items():
        assert {f.name for f in records.fields(cls)} == set(defs[name]["properties"]), name
    assert "collective" in defs["snapshot"]["properties"]


def test_check_from_a_snapshot_with_collective_facts_fits_the_schema(tmp_path, capsys):
    import jsonschema

    validator = jsonschema.Draft202012Validator(report_schema())
    for build in (fake_host.workstation, fake_host.docker, fake_host.vm, fake_host.two_socket, fake_host.dgx):
        path = tmp_path / f"{build.__name__}.json"
        path.write_text(machine(build(tmp_path / build.__name__)).to_json())
        main(["check", "--from", str(path), "--format", "json", "--checks",
              "pcie-p2p,shared-memory,cpu-affinity,nccl-environment,container-gpus"])
        data = json.loads(capsys.readouterr().out)
        validator.validate(data)
        assert data["snapshot"]["collective"]["pcie"]["gpus"], build.__name__
        data["snapshot"]["collective"]["iommu"]["mode"] = "sideways"
        assert not validator.is_valid(data)

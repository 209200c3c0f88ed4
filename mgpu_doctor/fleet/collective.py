"""``fleet`` over the host, container and NCCL set-up facts: what is compared, and the rules.

A node with a 64 MiB /dev/shm, an IOMMU that remaps DMA, ACS redirect on its switches or a
locked-memory limit too low for InfiniBand hangs or fails the whole synchronous job; NCCL
settings that choose algorithms and protocols must be the same on every rank.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.checks.nccl_env import nccl_settings
from mgpu_doctor.checks.shm import SHM_RECOMMENDED
from mgpu_doctor.environment.pcie_paths import redirecting_bridges
from mgpu_doctor.environment.resolve import ResolvedEnvironment
from mgpu_doctor.fleet.compare import (
    Fact,
    FactFamily,
    FactRow,
    Fleet,
    Value,
    list_nodes,
    row_evidence,
)
from mgpu_doctor.model.collective_facts import CollectiveFacts, NetworkFacts, ShmFacts
from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.model.unavailable import Unavailable

T = TypeVar("T")
NCCL_TUNING_THREAD = "https://github.com/NVIDIA/nccl/issues/1136"
NCCL_ENV_DOC = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
NCCL_ACS_DOC = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html" \
               "#pci-access-control-services-acs"
# Every rank must pick the same algorithm and protocol for a collective, or the ranks wait for
# each other forever (NVIDIA/nccl#1136: ranks that tuned differently hung).
MUST_MATCH = ("NCCL_ALGO", "NCCL_PROTO")


def _collective(read: Callable[[CollectiveFacts], Value]) -> Callable[[ResolvedEnvironment], Value]:
    def extract(env: ResolvedEnvironment) -> Value:
        assert env.snapshot is not None
        facts = env.snapshot.collective
        return facts if isinstance(facts, Unavailable) else read(facts)
    return extract


def _shm(c: CollectiveFacts) -> Value:
    return c.shm if isinstance(c.shm, Unavailable) else size_text(c.shm.size_bytes)


def _iommu(c: CollectiveFacts) -> Value:
    return c.iommu if isinstance(c.iommu, Unavailable) else c.iommu.mode


def _acs(c: CollectiveFacts) -> Value:
    if isinstance(c.pcie, Unavailable):
        return c.pcie
    found = redirecting_bridges(c.pcie)
    return f"on {len(found)} bridge(s) between GPUs" if found else "off"


def _container(c: CollectiveFacts) -> Value:
    return c.container if isinstance(c.container, Unavailable) else (c.container.runtime or "none")


def _memlock(c: CollectiveFacts) -> Value:
    if isinstance(c.network, Unavailable):
        return c.network
    limit = c.network.memlock_bytes
    if isinstance(limit, Unavailable | str):
        return limit
    return size_text(limit)


def _nccl_conf(env: ResolvedEnvironment) -> Mapping[str, str] | Unavailable:
    assert env.snapshot is not None
    facts = env.snapshot.collective
    if isinstance(facts, Unavailable):
        return facts
    if isinstance(facts.network, Unavailable):
        return facts.network
    conf = facts.network.nccl_conf
    if isinstance(conf, Unavailable):
        return {} if conf.cause == "no-file" else conf
    return conf


COLLECTIVE_FACTS: tuple[Fact | FactFamily, ...] = (
    Fact("host.shm", "/dev/shm", _collective(_shm)),
    Fact("host.iommu", "IOMMU mode", _collective(_iommu)),
    Fact("host.acs", "ACS redirect between GPUs", _collective(_acs)),
    Fact("host.memlock", "locked memory (ulimit -l)", _collective(_memlock)),
    Fact("host.container", "container", _collective(_container)),
    FactFamily("nccl-conf", "/etc/nccl.conf", _nccl_conf, missing="not set"),
)


def check_fleet_host_setup(fleet: Fleet) -> list[Finding]:
    rows = {k: fleet.row(k) for k in ("host.shm", "host.iommu", "host.acs", "host.memlock", "host.container")}
    if all(r is None or r.status == "unavailable" for r in rows.values()):
        raise CheckSkipped("no node's snapshot has host set-up facts (written by an older mgpu-doctor?)")
    findings = []
    small = [n.name for n in fleet.nodes if isinstance(shm := _part(n.snapshot.collective, "shm"), ShmFacts)
             and shm.size_bytes < SHM_RECOMMENDED]
    if (row := _differs(rows["host.shm"])) is not None and small:
        findings.append(Finding(
            "fleet.shm-differs", Severity.WARNING,
            f"/dev/shm is small on {list_nodes(small)}: NCCL fails at init there, and the whole job with it",
            row_evidence(row),
            fix=f"Give every node's job the same /dev/shm of at least 1 GiB (docker --shm-size=1g, a "
            f"Kubernetes emptyDir with medium: Memory); `mgpu-doctor check --from` on {list_nodes(small)} "
            "shows how there.",
            links=["https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html#shared-memory"],
        ))
    iommu, acs = _differs(rows["host.iommu"]), _differs(rows["host.acs"])
    if iommu is not None or acs is not None:
        odd = sorted({n for r in (iommu, acs) if r is not None for n, v in r.values.items()
                      if isinstance(v, str) and v not in ("off", "passthrough")})
        findings.append(Finding(
            "fleet.pcie-setup-differs", Severity.WARNING,
            "The IOMMU or PCIe ACS is set up differently on some nodes: GPU peer-to-peer traffic is "
            f"redirected on {list_nodes(odd) if odd else 'some of them'}, where NCCL can hang or slow "
            "every rank down",
            [line for r in (iommu, acs) if r is not None for line in row_evidence(r)],
            fix="Set the nodes up alike (BIOS VT-d / ACS settings, iommu=pt on the kernel command line); "
            "`mgpu-doctor check --from FILE` on the odd nodes names the bridges and the fix.",
            links=[NCCL_ACS_DOC],
        ))
    if (row := _differs(rows["host.memlock"])) is not None:
        findings.append(Finding(
            "fleet.memlock-differs", Severity.WARNING,
            "The locked-memory limit differs between nodes: where it is low, InfiniBand / GPUDirect RDMA "
            "cannot register NCCL's buffers and that node fails or falls back to sockets",
            row_evidence(row),
            fix="Give every node the same `ulimit -l unlimited` (limits.conf, LimitMEMLOCK=infinity for "
            "slurmd or the container runtime, docker --ulimit memlock=-1).",
            links=["https://github.com/NVIDIA/nccl-tests/issues/206"],
        ))
    if (row := _differs(rows["host.container"])) is not None:
        findings.append(Finding(
            "fleet.container-differs", Severity.INFO,
            "Some nodes run the job in a container and others do not (or in different ones): libraries, "
            "/dev/shm and limits differ by construction",
            row_evidence(row),
            fix="Run every worker from the same container image with the same options.",
            links=["https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/"
                   "docker-specialized.html"],
        ))
    return findings


def check_fleet_nccl_tuning(fleet: Fleet) -> list[Finding]:
    """NCCL settings that must be identical on every rank, from the environment and /etc/nccl.conf."""
    per_node = {n.name: nccl_settings(n.snapshot, _network(n.snapshot.collective)) for n in fleet.nodes}
    findings = []
    differing = []
    for name in MUST_MATCH:
        values = {node: s[name].value if name in s else "not set" for node, s in per_node.items()}
        if len(set(values.values())) > 1:
            differing.append((name, values))
    if differing:
        findings.append(Finding(
            "fleet.nccl-tuning-differs", Severity.ERROR,
            "The nodes force different NCCL algorithms or protocols: ranks that choose differently wait for "
            "each other forever, and the job hangs at a collective",
            [f"{name}: " + "; ".join(f"{v} on {list_nodes(sorted(n for n, x in values.items() if x == v))}"
                                     for v in sorted(set(values.values())))
             for name, values in differing],
            fix="Set " + ", ".join(name for name, _ in differing) + " the same for every rank (in the job "
            "script or pod spec) or nowhere, and take them out of /etc/nccl.conf and shell profiles.",
            links=[NCCL_TUNING_THREAD, NCCL_ENV_DOC],
        ))
    conf_rows = [r for r in fleet.rows_under("nccl-conf.") if r.status == "differs"
                 and r.key.split(".", 1)[1] not in MUST_MATCH]
    if conf_rows:
        findings.append(Finding(
            "fleet.nccl-conf-differs", Severity.WARNING,
            "/etc/nccl.conf sets NCCL differently on some nodes: NCCL reads it on every rank, under the "
            "job's own environment",
            [line for r in conf_rows for line in row_evidence(r)],
            fix="Make /etc/nccl.conf the same on every node (or empty), and set NCCL_* for the job itself.",
            links=[NCCL_ENV_DOC],
        ))
    return findings


def size_text(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def _part(facts: CollectiveFacts | Unavailable, name: str) -> object:
    return facts if isinstance(facts, Unavailable) else getattr(facts, name)


def _network(facts: CollectiveFacts | Unavailable) -> NetworkFacts | Unavailable:
    return facts if isinstance(facts, Unavailable) else facts.network


def _differs(row: FactRow | None) -> FactRow | None:
    return row if row is not None and row.status == "differs" else None

"""NCCL's environment: interfaces and HCAs that exist, debugging knobs left set, locked memory.

NCCL reads ``NCCL_*`` from the environment and from ``/etc/nccl.conf`` (the environment wins).
Its documentation files most of the knobs below under "Debugging": not for production, "may
result in sub-optimal behavior, crashes, or hangs" when kept.
"""

from __future__ import annotations

from collections.abc import Iterable

from mgpu_doctor.checks.collective_access import (
    NCCL_DEBUG_HINT,
    NCCL_ENV_DOC,
    NCCL_TROUBLESHOOTING,
    need_collective,
)
from mgpu_doctor.model.collective_facts import ContainerFacts, IbDevice, NetworkFacts
from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.model.snapshot import Snapshot
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.record import record

MEMLOCK_TOO_LOW = 2**30
MEMLOCK_THREAD = "https://github.com/NVIDIA/nccl-tests/issues/206"
DEBUG_LEVELS = ("VERSION", "WARN", "INFO", "TRACE")
# What each knob costs when left set (NCCL environment variable documentation).
KNOB_COSTS = {
    "NCCL_P2P_DISABLE": "no direct GPU-to-GPU copies over NVLink or PCIe: traffic goes through host "
                        "memory, intra-node all-reduce several times slower",
    "NCCL_P2P_LEVEL": "limits the distance at which GPUs copy directly (LOC: never, NVL: NVLink only)",
    "NCCL_SHM_DISABLE": "no shared-memory transport: GPUs that cannot copy directly talk over the network "
                        "stack even inside one node",
    "NCCL_IB_DISABLE": "no InfiniBand / RoCE: traffic between nodes goes over TCP sockets",
    "NCCL_NET_GDR_LEVEL": "limits GPUDirect RDMA between GPUs and NICs",
    "NCCL_ALGO": "forces the algorithms (Ring, Tree, ...): NCCL's tuning per message size is off",
    "NCCL_PROTO": "forces the protocols (LL, LL128, Simple): NCCL's tuning per message size is off",
    "NCCL_MAX_NCHANNELS": "caps the channels: less bandwidth", "NCCL_MIN_NCHANNELS": "forces channels",
    "NCCL_NTHREADS": "changes the threads per block", "NCCL_BUFFSIZE": "changes the buffer per channel",
    "NCCL_NVLS_ENABLE": "turns NVLink SHARP on or off",
    "NCCL_CUMEM_ENABLE": "changes how buffers are allocated",
}
DISABLE_KNOBS = ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_IB_DISABLE")  # "0" means not disabled


@record
class NcclSetting:
    name: str
    value: str
    source: str  # "environment" or "/etc/nccl.conf"

    def __str__(self) -> str:
        return f"{self.name}={self.value} ({self.source})"


def nccl_settings(snapshot: Snapshot, network: NetworkFacts | Unavailable) -> dict[str, NcclSetting]:
    """The NCCL variables NCCL will see: /etc/nccl.conf, overridden by the environment."""
    settings = {}
    if isinstance(network, NetworkFacts) and isinstance(network.nccl_conf, dict):
        settings = {k: NcclSetting(k, v, "/etc/nccl.conf") for k, v in network.nccl_conf.items()}
    settings.update({k: NcclSetting(k, v, "environment")
                     for k, v in snapshot.env.items() if k.startswith("NCCL_")})
    return settings


CODES = (
    "nccl.env-ok",
    "nccl.socket-ifname-matches-nothing",
    "nccl.ib-hca-matches-nothing",
    "nccl.memlock-too-low",
    "nccl.debug-knobs-set",
    "nccl.debug-level-unknown",
    "nccl.names-not-checked",
)


def check_nccl_environment(snapshot: Snapshot) -> list[Finding]:
    collective = need_collective(snapshot)
    network = collective.network
    settings = nccl_settings(snapshot, network)
    findings: list[Finding] = []
    if isinstance(network, NetworkFacts):
        findings += _socket_ifname(settings.get("NCCL_SOCKET_IFNAME"), network, collective.container)
        findings += _ib_hca(settings.get("NCCL_IB_HCA"), network)
        findings += _memlock(settings, network, collective.container)
    elif named := [str(settings[n]) for n in ("NCCL_SOCKET_IFNAME", "NCCL_IB_HCA") if n in settings]:
        findings.append(Finding(
            "nccl.names-not-checked", Severity.INFO,
            "Cannot tell whether the interfaces / devices NCCL is pointed at exist here",
            named + [f"network facts {network}"],
        ))
    findings += _knobs(settings)
    findings += _debug(settings.get("NCCL_DEBUG"))
    if not findings:
        shown = ", ".join(str(s) for s in settings.values()) or "no NCCL variable set, NCCL chooses"
        findings.append(Finding("nccl.env-ok", Severity.OK, shown))
    return findings


def parse_name_list(value: str) -> tuple[bool, list[tuple[str, bool]]]:
    """NCCL's interface / HCA list: (exclude?, [(name or prefix, exact?)]), ports (``:1``) dropped."""
    exclude = value.startswith("^")
    items = []
    for part in value.lstrip("^").split(","):
        part = part.strip()
        if not part:
            continue
        exact = part.startswith("=")
        items.append((part.lstrip("=").split(":", 1)[0], exact))
    return exclude, items


def matching(names: Iterable[str], value: str) -> list[str]:
    """The names NCCL would use for ``value`` (prefix match, ``=`` exact, ``^`` exclude)."""
    exclude, items = parse_name_list(value)
    def hit(name: str) -> bool:
        return any(name == item if exact else name.startswith(item) for item, exact in items)
    return [n for n in names if hit(n) != exclude]


def _socket_ifname(setting: NcclSetting | None, net: NetworkFacts,
                   container: ContainerFacts | Unavailable) -> list[Finding]:
    if setting is None:
        return []
    used = [n for n in matching(net.interfaces, setting.value) if n != "lo" or "lo" in setting.value]
    if used:
        return []
    candidates = [n for n in net.interfaces if n != "lo" and not n.startswith(("docker", "veth", "virbr"))]
    in_container = isinstance(container, ContainerFacts) and bool(container.runtime)
    return [Finding(
        "nccl.socket-ifname-matches-nothing", Severity.ERROR,
        f"NCCL_SOCKET_IFNAME={setting.value} matches no usable network interface here: NCCL cannot "
        "bootstrap ('no socket interface found') and the job fails at start-up",
        [str(setting), "interfaces here: " + (", ".join(net.interfaces) or "none")]
        + (["in a container: its interfaces are not the host's (Docker's bridge network gives eth0)"]
           if in_container else []),
        fix=(f"Set NCCL_SOCKET_IFNAME to an interface that exists here, e.g. ={candidates[0]} "
             f"(candidates: {', '.join(candidates)})" if candidates else
             "Start the job where the interface exists (a container on the host network: --network=host)")
        + ", or unset it and let NCCL choose. Where nodes name their interfaces differently, "
        f"list prefixes (eth,ens). {NCCL_DEBUG_HINT}",
        links=[NCCL_ENV_DOC],
    )]


def _ib_hca(setting: NcclSetting | None, net: NetworkFacts) -> list[Finding]:
    if setting is None or setting.value.startswith("^"):
        return []
    devices = net.ib_devices
    if isinstance(devices, list) and matching([d.name for d in devices], setting.value):
        return []
    here = ", ".join(d.name for d in devices) if isinstance(devices, list) else str(devices)
    return [Finding(
        "nccl.ib-hca-matches-nothing", Severity.WARNING,
        f"NCCL_IB_HCA={setting.value} names InfiniBand devices that are not here: NCCL finds no IB "
        "device and falls back to TCP sockets, many times slower between nodes",
        [str(setting), f"InfiniBand devices here: {here or 'none'}"],
        fix="Name devices of `ls /sys/class/infiniband` (e.g. =mlx5_0,mlx5_1), unset it, or in a "
        "container pass the devices in (--device=/dev/infiniband, the RDMA device plugin on Kubernetes).",
        links=[NCCL_ENV_DOC],
    )]


def _memlock(settings: dict[str, NcclSetting], net: NetworkFacts,
             container: ContainerFacts | Unavailable) -> list[Finding]:
    devices = net.ib_devices
    limit = net.memlock_bytes
    ib_off = _on(settings.get("NCCL_IB_DISABLE"))
    if not isinstance(devices, list) or not devices or ib_off or not isinstance(limit, int) \
            or limit >= MEMLOCK_TOO_LOW:
        return []
    docker = isinstance(container, ContainerFacts) and container.runtime in ("docker", "podman")
    return [Finding(
        "nccl.memlock-too-low", Severity.WARNING,
        f"The locked-memory limit is {_size(limit)}: too low for InfiniBand / GPUDirect RDMA, NCCL fails "
        "to register its buffers ('ibv_reg_mr failed: Cannot allocate memory') or falls back to sockets",
        [f"ulimit -l: {_size(limit)} (/proc/self/limits)",
         "InfiniBand devices: " + ", ".join(_ib(d) for d in devices)],
        fix=("Start the container with --ulimit memlock=-1. " if docker else "")
        + "Raise it to unlimited for the job: `ulimit -l unlimited` in the job script where allowed, "
        "`* soft memlock unlimited` and `* hard memlock unlimited` in /etc/security/limits.conf (new "
        "logins), LimitMEMLOCK=infinity for slurmd / the container runtime's service; check with "
        "`srun bash -c 'ulimit -l'`.",
        links=[NCCL_TROUBLESHOOTING, MEMLOCK_THREAD],
    )]


def _knobs(settings: dict[str, NcclSetting]) -> list[Finding]:
    set_knobs = [s for name, s in settings.items()
                 if name in KNOB_COSTS and (name not in DISABLE_KNOBS or _on(s))]
    if not set_knobs:
        return []
    both_off = all(_on(settings.get(n)) for n in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE"))
    return [Finding(
        "nccl.debug-knobs-set", Severity.WARNING if both_off else Severity.INFO,
        ("NCCL_P2P_DISABLE and NCCL_SHM_DISABLE are both set: GPUs of one node exchange gradients over "
         "the network stack" if both_off else
         f"{len(set_knobs)} NCCL setting(s) from NCCL's debugging list are set: each costs speed if "
         "kept after the problem it worked around is gone"),
        [f"{s}: {KNOB_COSTS[s.name]}" for s in set_knobs],
        fix="Keep them only while they work around a problem you have (an ACS or IOMMU hang: see "
        "pcie-p2p), and set them for the whole job, the same on every node. Remove them from shell "
        "profiles and /etc/nccl.conf otherwise.",
        links=[NCCL_ENV_DOC],
    )]


def _debug(setting: NcclSetting | None) -> list[Finding]:
    if setting is None:
        return []
    level = setting.value.strip().upper()
    if level not in DEBUG_LEVELS:
        return [Finding(
            "nccl.debug-level-unknown", Severity.INFO,
            f"NCCL_DEBUG={setting.value} is not a level NCCL knows: it prints nothing useful",
            [str(setting)],
            fix=f"Use one of {', '.join(DEBUG_LEVELS)}. {NCCL_DEBUG_HINT}",
            links=[NCCL_ENV_DOC],
        )]
    return []


def _on(setting: NcclSetting | None) -> bool:
    return setting is not None and setting.value.strip() not in ("", "0")


def _ib(device: IbDevice) -> str:
    states = ", ".join(f"port {p} {s}" for p, s in device.ports.items())
    return f"{device.name} ({states})" if states else device.name


def _size(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} bytes"

"""Fake /proc, /sys, /dev and lspci of real kinds of machines, for the collective set-up probes.

Only the filesystem root and the command runner are fake: the probes read them exactly as they
read a real machine. The machines:

- ``dgx``: a DGX A100-style node, GPUs behind Broadcom PCIe switches, ACS off, no IOMMU, NVSwitch;
- ``workstation``: two Quadro RTX 8000 behind a PLX PEX 8747 switch, ``intel_iommu=on`` (DMA-FQ
  groups) and ACS redirect on (``tests/data/lspci``);
- ``docker``: a Docker container with the default 64 MiB /dev/shm and 64 KiB locked memory on a
  host with InfiniBand;
- ``vm``: a KVM guest (QEMU q35) with ``intel_iommu=on iommu=pt`` and two passed-through GPUs;
- ``two_socket``: a 2-socket Xeon with its GPUs on socket 1 and the job bound to socket 0.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mgpu_doctor.model.collective_facts import CollectiveFacts
from mgpu_doctor.probes.collective import gather_collective
from mgpu_doctor.probes.commands import CommandResult
from tests.fake_nvml import FakeGpu, FakeMachine, FakeNvml

LSPCI = Path(__file__).parent / "data" / "lspci"
BRIDGE_CLASS = "0x060400"
GPU_CLASS_3D = "0x030200"
GPU_CLASS_VGA = "0x030000"
ACS_ON = 0x001D  # SrcValid ReqRedir CmpltRedir UpstreamFwd: what Linux enables with the IOMMU on


def config_space(acs_control: int | None, *, root: bool = True) -> bytes:
    """A PCIe function's configuration space: AER at 0x100, then ACS at 0x148 (or no ACS).

    Without ``root`` only the first 64 bytes, as sysfs gives them to other users.
    """
    data = bytearray(4096)
    struct.pack_into("<HH", data, 0, 0x10B5, 0x8747)  # PLX PEX 8747
    if acs_control is None:
        struct.pack_into("<I", data, 0x100, 0x0001 | 1 << 16)  # AER, last capability
    else:
        struct.pack_into("<I", data, 0x100, 0x0001 | 1 << 16 | 0x148 << 20)
        struct.pack_into("<IHH", data, 0x148, 0x000D | 1 << 16, 0x007F, acs_control)
    return bytes(data if root else data[:64])


@dataclass
class FakeRoot:
    """A directory laid out like /: write files, PCI devices and IOMMU groups into it."""

    root: Path
    lspci: str | None = None  # the output of `lspci -D -vvv`; None: lspci is not installed
    environ: dict[str, str] = field(default_factory=dict)
    shm: tuple[int, int] = (32 * 2**30, 32 * 2**30)  # statvfs of /dev/shm: (size, free) bytes
    runs: list[list[str]] = field(default_factory=list)

    def write(self, rel: str, content: str | bytes) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        return path

    def pci(self, host_bridge: str, chain: Sequence[str], *, vendor: str = "0x10b5", cls: str = BRIDGE_CLASS,
            numa_node: int = 0, local_cpulist: str = "", config: bytes | None = None,
            iommu_group: str | None = None) -> None:
        """The last device of ``chain`` (and, as bridges, the ones above it that are not there yet)."""
        for depth, address in enumerate(chain):
            rel = "/".join(["sys/devices", host_bridge, *chain[:depth + 1]])
            last = depth == len(chain) - 1
            if not last and (self.root / rel).is_dir():
                continue
            self.write(f"{rel}/vendor", (vendor if last else "0x10b5") + "\n")
            self.write(f"{rel}/class", (cls if last else BRIDGE_CLASS) + "\n")
            self.write(f"{rel}/numa_node", f"{numa_node}\n")
            if local_cpulist:
                self.write(f"{rel}/local_cpulist", local_cpulist + "\n")
            if last and config is not None:
                self.write(f"{rel}/config", config)
            link = self.root / "sys/bus/pci/devices" / address
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.is_symlink():
                os.symlink("../../../" + rel[len("sys/"):], link)
            if last and iommu_group is not None:
                group = self.root / "sys/kernel/iommu_groups" / iommu_group
                (group / "devices").mkdir(parents=True, exist_ok=True)
                os.symlink(f"../../../../devices/{host_bridge}/{'/'.join(chain)}", group / "devices" / address)
                os.symlink(f"../../../kernel/iommu_groups/{iommu_group}", self.root / rel / "iommu_group")

    def gpu(self, host_bridge: str, chain: Sequence[str], **kw: Any) -> None:
        kw.setdefault("cls", GPU_CLASS_3D)
        self.pci(host_bridge, chain, vendor="0x10de", **kw)

    def group_type(self, group: str, kind: str) -> None:
        self.write(f"sys/kernel/iommu_groups/{group}/type", kind + "\n")

    def numa(self, nodes: dict[str, str], allowed: str, online: str) -> None:
        for node, cpus in nodes.items():
            self.write(f"sys/devices/system/node/node{node}/cpulist", cpus + "\n")
        self.write("sys/devices/system/cpu/online", online + "\n")
        self.write("proc/self/status", f"Name:\tpython3\nCpus_allowed:\tffff\nCpus_allowed_list:\t{allowed}\n")

    def memlock(self, soft: str) -> None:
        self.write("proc/self/limits",
                   "Limit                     Soft Limit           Hard Limit           Units     \n"
                   "Max open files            1048576              1048576              files     \n"
                   f"Max locked memory         {soft:<21}{soft:<21}bytes     \n")

    def ib(self, *names: str) -> None:
        for name in names:
            self.write(f"sys/class/infiniband/{name}/ports/1/state", "4: ACTIVE\n")

    def interfaces(self, *names: str) -> None:
        for name in names:
            self.write(f"sys/class/net/{name}/operstate", "up\n")

    # -- the boundaries the probes are given
    def run(self, argv: Sequence[str], timeout_s: float) -> CommandResult:
        self.runs.append(list(argv))
        assert timeout_s <= 10
        if self.lspci is None:
            return CommandResult("", None, f"{argv[0]} not found on PATH")
        return CommandResult(self.lspci, 0)

    def statvfs(self, path: str) -> Any:
        size, free = self.shm
        return os.statvfs_result((4096, 4096, size // 4096, free // 4096, free // 4096, 0, 0, 0, 0, 255))

    def gather(self) -> CollectiveFacts:
        return gather_collective(self.root, self.run, self.environ, self.statvfs)


def _host_basics(fake: FakeRoot, cmdline: str, shm_mount: str = "tmpfs /dev/shm tmpfs rw,nosuid,nodev,inode64 0 0",
                 cgroup: str = "0::/user.slice/user-1000.slice/session-4.scope") -> None:
    fake.write("proc/cmdline", cmdline + "\n")
    fake.write("proc/self/mounts", "sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0\n"
               "proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0\n" + shm_mount + "\n")
    (fake.root / "dev/shm").mkdir(parents=True, exist_ok=True)
    fake.write("proc/self/cgroup", cgroup + "\n")
    fake.write("proc/1/cgroup", "0::/init.scope\n")
    fake.write("sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n")
    fake.write("proc/cpuinfo", "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu vme de pse tsc msr\n\n")
    fake.memlock("unlimited")
    fake.interfaces("lo", "eno1")


def dgx(tmp: Path) -> FakeRoot:
    """DGX A100-style: EPYC Rome root port, Broadcom PEX880xx switch, two A100 (of eight), ACS off."""
    fake = FakeRoot(tmp, lspci=(LSPCI / "dgx-acs-off.txt").read_text())
    _host_basics(fake, "BOOT_IMAGE=/boot/vmlinuz-5.15.0-1042-nvidia root=/dev/mapper/vg-root ro quiet")
    nodes = {"0": "0-63,128-191", "1": "64-127,192-255"}
    fake.numa(nodes, allowed="0-255", online="0-255")
    up = ["0000:00:01.1", "0000:01:00.0"]
    for port, gpu in (("0000:02:00.0", "0000:03:00.0"), ("0000:02:01.0", "0000:04:00.0")):
        fake.gpu("pci0000:00", [*up, port, gpu], numa_node=0, local_cpulist=nodes["0"])
    fake.ib(*(f"mlx5_{i}" for i in range(8)))
    fake.interfaces("ibp12s0", "enp225s0f0")
    fake.write("etc/nccl.conf", "NCCL_IB_HCA=mlx5\n# NCCL_DEBUG=INFO\n")
    return fake


def workstation(tmp: Path, *, lspci: str | None = "workstation-plx-acs-on.txt", root: bool = True) -> FakeRoot:
    """Two Quadro RTX 8000 behind a PLX PEX 8747; intel_iommu=on; ACS redirect on."""
    fake = FakeRoot(tmp, lspci=(LSPCI / lspci).read_text() if lspci else None)
    _host_basics(fake, "BOOT_IMAGE=/boot/vmlinuz-6.5.0-35-generic root=UUID=4f0c1b2e ro quiet splash "
                       "intel_iommu=on")
    fake.numa({"0": "0-19"}, allowed="0-19", online="0-19")
    for unit in ("dmar0", "dmar1"):
        (tmp / "sys/class/iommu" / unit).mkdir(parents=True)
    fake.pci("pci0000:00", ["0000:00:01.0"], numa_node=-1, config=config_space(ACS_ON, root=root))
    fake.pci("pci0000:00", ["0000:00:01.0", "0000:02:00.0"], numa_node=-1, config=config_space(None, root=root))
    for n, (port, gpu) in enumerate((("0000:03:08.0", "0000:04:00.0"), ("0000:03:10.0", "0000:05:00.0"))):
        fake.pci("pci0000:00", ["0000:00:01.0", "0000:02:00.0", port], numa_node=-1,
                 config=config_space(ACS_ON, root=root))
        fake.gpu("pci0000:00", ["0000:00:01.0", "0000:02:00.0", port, gpu], numa_node=-1,
                 cls=GPU_CLASS_VGA, iommu_group=str(30 + n))
        fake.group_type(str(30 + n), "DMA-FQ")
    return fake


def docker(tmp: Path) -> FakeRoot:
    """`docker run --gpus all` without --shm-size or --ulimit memlock, on a host with InfiniBand."""
    fake = FakeRoot(tmp, lspci=None, environ={"NVIDIA_VISIBLE_DEVICES": "all",
                                              "NVIDIA_DRIVER_CAPABILITIES": "compute,utility"},
                    shm=(64 * 2**20, 63 * 2**20))
    _host_basics(fake, "BOOT_IMAGE=/boot/vmlinuz-5.15.0-105-generic root=UUID=0a1b ro",
                 shm_mount="shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size=65536k 0 0", cgroup="0::/")
    fake.write(".dockerenv", "")
    fake.write("proc/1/cgroup", "0::/\n")
    fake.write("sys/fs/cgroup/cpu.max", "max 100000\n")
    fake.numa({"0": "0-31"}, allowed="0-31", online="0-31")
    fake.memlock("65536")
    (tmp / "sys/class/net/eno1/operstate").unlink()  # its own network namespace: lo and eth0
    (tmp / "sys/class/net/eno1").rmdir()
    fake.interfaces("eth0")
    for i in range(4):  # as root in a container without CAP_SYS_ADMIN: 64 bytes of config space
        fake.pci("pci0000:00", [f"0000:00:0{i + 1}.0"], numa_node=0, config=config_space(ACS_ON, root=False))
        fake.gpu("pci0000:00", [f"0000:00:0{i + 1}.0", f"0000:0{i + 1}:00.0"], numa_node=0, local_cpulist="0-31")
        fake.write(f"dev/nvidia{i}", "")
        fake.write(f"proc/driver/nvidia/gpus/0000:0{i + 1}:00.0/information", "Model: NVIDIA A10\n")
    fake.write("dev/nvidiactl", "")
    fake.ib("mlx5_0")
    return fake


def vm(tmp: Path) -> FakeRoot:
    """A KVM guest (QEMU q35, vIOMMU with iommu=pt), two GPUs on their own virtual root ports."""
    fake = FakeRoot(tmp, lspci=None)
    _host_basics(fake, "BOOT_IMAGE=/boot/vmlinuz-5.15.0-105-generic root=/dev/vda1 ro console=ttyS0 "
                       "intel_iommu=on iommu=pt")
    fake.write("proc/cpuinfo", "processor\t: 0\nvendor_id\t: GenuineIntel\n"
               "flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic hypervisor lahf_lm\n\n")
    fake.write("sys/class/dmi/id/sys_vendor", "QEMU\n")
    fake.write("sys/class/dmi/id/product_name", "Standard PC (Q35 + ICH9, 2009)\n")
    fake.numa({"0": "0-15"}, allowed="0-15", online="0-15")
    (tmp / "sys/class/iommu/dmar0").mkdir(parents=True)
    for n, (port, gpu) in enumerate((("0000:00:02.0", "0000:01:00.0"), ("0000:00:02.1", "0000:02:00.0"))):
        fake.pci("pci0000:00", [port], numa_node=-1, vendor="0x1b36", config=config_space(None))
        fake.gpu("pci0000:00", [port, gpu], numa_node=-1, iommu_group=str(8 + n))
        fake.group_type(str(8 + n), "identity")
    return fake


def two_socket(tmp: Path, *, gpu_nodes: Sequence[int] = (1, 1, 1, 1), allowed: str = "0-27,56-83") -> FakeRoot:
    """2x Xeon (28 cores each, HT): node 0 0-27,56-83, node 1 28-55,84-111 (NVIDIA/nccl#667's box)."""
    fake = FakeRoot(tmp, lspci=None)
    _host_basics(fake, "BOOT_IMAGE=/boot/vmlinuz-5.4.0-150-generic root=UUID=77aa ro")
    nodes = {"0": "0-27,56-83", "1": "28-55,84-111"}
    fake.numa(nodes, allowed=allowed, online="0-111")
    hosts = {0: ("pci0000:17", 0x18), 1: ("pci0000:85", 0x86)}
    for i, node in enumerate(gpu_nodes):
        host, bus = hosts[node]
        port = f"0000:{bus - 1:02x}:{i:02x}.0"
        fake.pci(host, [port], numa_node=node, local_cpulist=nodes[str(node)], config=config_space(None))
        fake.gpu(host, [port, f"0000:{bus + i:02x}:00.0"], numa_node=node, local_cpulist=nodes[str(node)])
    return fake


def nvml_for(fake: FakeRoot, name: str = "NVIDIA A100-SXM4-40GB", nvlink: bool = False,
             p2p: dict[tuple[int, int], int] | None = None) -> Any:
    """NVML's view of the GPUs on the fake PCI bus (the real NVML probe over the fake binding)."""
    from mgpu_doctor.probes.nvml import gather_nvml

    addresses = sorted(p.name for p in (fake.root / "sys/bus/pci/devices").iterdir()
                       if (p / "vendor").read_text().strip() == "0x10de")
    gpus = [FakeGpu(name=name, uuid=f"GPU-{i:08x}-1111-2222-3333-444455556666",
                    bus_id="0000" + a.upper()) for i, a in enumerate(addresses)]
    if nvlink:
        for g in gpus:
            g.nvlink_peers = [o.bus_id for o in gpus if o is not g for _ in range(2)]
    return gather_nvml(FakeNvml(FakeMachine(gpus=gpus, p2p=p2p or {})))

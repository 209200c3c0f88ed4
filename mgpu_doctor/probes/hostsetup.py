"""Shared memory, CPUs and cgroup limits, network devices and limits, and the container.

Read from files under a filesystem root (``/`` or a test's fake one): ``/proc/self/mounts``,
``/proc/self/status``, ``/proc/self/cgroup``, ``/proc/self/limits``, ``/sys/fs/cgroup``,
``/sys/devices/system``, ``/sys/class/net``, ``/sys/class/infiniband``, ``/etc/nccl.conf``,
``/dev``, ``/proc/driver/nvidia``. The process whose limits are read is the doctor: run it the
way the training job runs (same container, same ``srun`` / ``numactl`` / ``taskset``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from mgpu_doctor.model.collective_facts import ContainerFacts, CpuFacts, IbDevice, NetworkFacts, ShmFacts
from mgpu_doctor.model.unavailable import Unavailable, absent, failed
from mgpu_doctor.probes.host import container_hints
from mgpu_doctor.process.grpc_proxy import NAMES, PROXY_NAMES, reduce_proxy_value
from mgpu_doctor.process.masking import mask_credentials, mask_env_value

MAX_SHM_ENTRIES = 10000
Statvfs = Callable[[str], Any]


def gather_shm(root: Path, statvfs: Statvfs = os.statvfs) -> ShmFacts | Unavailable:
    path = root / "dev/shm"
    if not path.is_dir():
        return absent("/dev/shm does not exist", "no-shm")
    mount = _mount_of(root, "/dev/shm")
    size = _size_option(mount[2]) if mount else None
    available: int | Unavailable
    try:
        st = statvfs(str(path))
        available = st.f_bavail * st.f_frsize
        if size is None:
            size = st.f_blocks * st.f_frsize
    except OSError as exc:
        available = failed(f"statvfs /dev/shm: {exc.strerror or exc}", "unreadable")
    if size is None:
        return failed("/dev/shm: no size in /proc/self/mounts and statvfs failed", "unreadable")
    segments, segment_bytes = _nccl_segments(path)
    fs_type: str | Unavailable = mount[1] if mount else absent("/dev/shm is not a mount point here")
    return ShmFacts("/dev/shm", size, available, fs_type, segments, segment_bytes)


def gather_cpus(root: Path) -> CpuFacts | Unavailable:
    allowed = _status_field(root / "proc/self/status", "Cpus_allowed_list")
    if not allowed:
        return failed("no Cpus_allowed_list in /proc/self/status", "unreadable")
    online: str | Unavailable = _read(root / "sys/devices/system/cpu/online") or absent(
        "no /sys/devices/system/cpu/online")
    nodes = {}
    node_dir = root / "sys/devices/system/node"
    try:
        names = sorted(os.listdir(node_dir))
    except OSError:
        names = []
    for name in names:
        if name.startswith("node") and name[4:].isdigit():
            nodes[name[4:]] = _read(node_dir / name / "cpulist")
    quota, source = cgroup_cpu_quota(root)
    return CpuFacts(allowed, online, nodes, quota, source)


def cgroup_cpu_quota(root: Path) -> tuple[float | Unavailable, str]:
    """The tightest CPU limit of this process's cgroup and its ancestors (v2 ``cpu.max``, v1 CFS)."""
    lines = _read(root / "proc/self/cgroup").splitlines()
    limits: list[tuple[float, str]] = []
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "" and (root / "sys/fs/cgroup/cgroup.controllers").exists():
            for directory in _cgroup_dirs(root / "sys/fs/cgroup", path):
                limit = _v2_limit(directory / "cpu.max")
                if limit is not None:
                    limits.append((limit, "/" + str(directory.relative_to(root)) + "/cpu.max"))
        elif "cpu" in controllers.split(","):
            for mount in ("cpu,cpuacct", "cpu", "cpuacct,cpu"):
                base = root / "sys/fs/cgroup" / mount
                if base.is_dir():
                    for directory in _cgroup_dirs(base, path):
                        limit = _v1_limit(directory)
                        if limit is not None:
                            limits.append((limit, "/" + str(directory.relative_to(root))
                                           + "/cpu.cfs_quota_us"))
                    break
    if not limits:
        return absent("no cgroup CPU limit", "no-limit"), ""
    return min(limits)


def gather_network(root: Path, environ: Mapping[str, str]) -> NetworkFacts:
    try:
        interfaces = sorted(os.listdir(root / "sys/class/net"))
    except OSError:
        interfaces = []
    return NetworkFacts(interfaces, _ib_devices(root), _memlock(root), _nccl_conf(root / "etc/nccl.conf"),
                        proxy_env(environ))


def proxy_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The proxy variables gRPC reads: the proxies' scheme only, the bypass lists as set."""
    return {name: reduce_proxy_value(value) if name in PROXY_NAMES else mask_credentials(value)
            for name in NAMES if (value := environ.get(name)) is not None}


def gather_container(root: Path, environ: Mapping[str, str]) -> ContainerFacts:
    evidence = container_hints(root, environ)
    self_cgroup = _read(root / "proc/self/cgroup")
    for marker in ("docker", "kubepods", "containerd", "libpod", "lxc"):
        if marker in self_cgroup and not any(marker in e for e in evidence):
            evidence.append(f"{marker} (/proc/self/cgroup)")
            break
    runtime = ""
    for word, name in (("kubernetes", "kubernetes"), ("kubepods", "kubernetes"), ("docker", "docker"),
                       ("podman", "podman"), ("libpod", "podman"), ("containerd", "containerd"),
                       ("lxc", "lxc")):
        if any(e.startswith(word) or f"{word} (" in e for e in evidence):
            runtime = name
            break
    if not runtime:  # systemd-nspawn, podman and others set $container
        runtime = next((e.split("=", 1)[1] for e in evidence if e.startswith("container=")), "")
    try:
        nodes = sorted(f"/dev/{n}" for n in os.listdir(root / "dev")
                       if n.startswith("nvidia") and n[6:].isdigit())
    except OSError:
        nodes = []
    driver_gpus: list[str] | Unavailable
    try:
        driver_gpus = sorted(os.listdir(root / "proc/driver/nvidia/gpus"))
    except OSError:
        driver_gpus = absent("no /proc/driver/nvidia/gpus (no NVIDIA kernel driver visible here)",
                             "no-driver")
    return ContainerFacts(runtime, [e for e in evidence if not e.startswith("slurm")], nodes, driver_gpus)


def _mount_of(root: Path, mountpoint: str) -> tuple[str, str, str] | None:
    """(source, type, options) of the last mount at ``mountpoint`` in /proc/self/mounts."""
    found = None
    for line in _read(root / "proc/self/mounts").splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[1] == mountpoint:
            found = (fields[0], fields[2], fields[3])
    return found


def _size_option(options: str) -> int | None:
    for option in options.split(","):
        if option.startswith("size="):
            return _bytes(option[5:])
    return None


def _bytes(text: str) -> int | None:
    units = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
    try:
        if text and text[-1].lower() in units:
            return int(text[:-1]) * units[text[-1].lower()]
        return int(text)
    except ValueError:
        return None


def _nccl_segments(path: Path) -> tuple[int, int]:
    count = total = 0
    try:
        with os.scandir(path) as entries:
            for i, entry in enumerate(entries):
                if i >= MAX_SHM_ENTRIES:
                    break
                if entry.name.startswith("nccl-"):
                    count += 1
                    try:
                        total += entry.stat(follow_symlinks=False).st_blocks * 512
                    except OSError:
                        pass
    except OSError:
        pass
    return count, total


def _status_field(path: Path, name: str) -> str:
    for line in _read(path).splitlines():
        key, _, value = line.partition(":")
        if key == name:
            return value.strip()
    return ""


def _cgroup_dirs(base: Path, path: str) -> list[Path]:
    """The cgroup directory and its ancestors up to the mount's root, as they exist here."""
    parts = [p for p in path.strip().split("/") if p and p != ".."]
    dirs = [base.joinpath(*parts[:i]) for i in range(len(parts), -1, -1)]
    return [d for d in dirs if d.is_dir()]


def _v2_limit(path: Path) -> float | None:
    fields = _read(path).split()
    if len(fields) == 2 and fields[0] != "max":
        try:
            quota, period = int(fields[0]), int(fields[1])
        except ValueError:
            return None
        return quota / period if period > 0 else None
    return None


def _v1_limit(directory: Path) -> float | None:
    try:
        quota = int(_read(directory / "cpu.cfs_quota_us"))
        period = int(_read(directory / "cpu.cfs_period_us"))
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def _ib_devices(root: Path) -> list[IbDevice] | Unavailable:
    base = root / "sys/class/infiniband"
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return absent("no /sys/class/infiniband (no InfiniBand / RoCE device)", "no-ib")
    devices = []
    for name in names:
        try:
            ports = sorted(os.listdir(base / name / "ports"))
        except OSError:
            ports = []
        devices.append(IbDevice(name, {p: _read(base / name / "ports" / p / "state") for p in ports}))
    return devices


def _memlock(root: Path) -> int | Literal["unlimited"] | Unavailable:
    for line in _read(root / "proc/self/limits").splitlines():
        if line.startswith("Max locked memory"):
            soft = line[len("Max locked memory"):].split()[0]
            if soft == "unlimited":
                return "unlimited"
            try:
                return int(soft)
            except ValueError:
                return failed(f"/proc/self/limits: cannot read {line.strip()!r}", "unreadable")
    return failed("no 'Max locked memory' in /proc/self/limits", "unreadable")


def _nccl_conf(path: Path) -> dict[str, str] | Unavailable:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return absent(f"no {path.name}", "no-file")
    except OSError as exc:
        return failed(f"cannot read /etc/nccl.conf: {exc.strerror or exc}", "unreadable")
    values = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key.strip().startswith("NCCL_") and not key.strip().startswith("#"):
            values[key.strip()] = mask_env_value(key.strip(), value.strip())
    return values


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""

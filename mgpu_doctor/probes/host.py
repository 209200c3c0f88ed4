"""Facts about the host: OS, kernel, libc, CPUs, memory, container hints."""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping
from pathlib import Path

from mgpu_doctor.model.snapshot import HostFacts
from mgpu_doctor.model.unavailable import Unavailable, absent, failed


def gather_host(root: Path = Path("/"), environ: Mapping[str, str] | None = None) -> HostFacts:
    env = os.environ if environ is None else environ
    return HostFacts(
        hostname=platform.node(),  # what gethostname() says, without importing socket
        os_name=platform.system(),
        os_release=_os_release(root / "etc/os-release"),
        kernel=platform.release(),
        machine=platform.machine(),
        libc=_libc(),
        cpu_count=os.cpu_count() or 0,
        memory_total_bytes=_memory_total(root / "proc/meminfo"),
        container_hints=container_hints(root, env),
    )


def _os_release(path: Path) -> str | Unavailable:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return absent(f"{path} not found")
    except OSError as exc:
        return failed(f"cannot read {path}: {exc}")
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key.strip()] = value.strip().strip('"')
    return fields.get("PRETTY_NAME") or fields.get("NAME") or absent("no PRETTY_NAME")


def _libc() -> str | Unavailable:
    try:
        value = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError, AttributeError):
        value = None
    if value:
        return value
    name, version = platform.libc_ver()
    return f"{name} {version}".strip() or absent("libc version not reported (not glibc?)")


def _memory_total(path: Path) -> int | Unavailable:
    try:
        for line in path.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError) as exc:
        return failed(f"cannot read {path}: {exc}")
    return absent(f"no MemTotal in {path}")


def container_hints(root: Path, environ: Mapping[str, str]) -> list[str]:
    """Signs that this runs in a container or under a scheduler; each says where it came from."""
    hints = []
    if (root / ".dockerenv").exists():
        hints.append("docker (/.dockerenv)")
    if (root / "run/.containerenv").exists():
        hints.append("podman (/run/.containerenv)")
    if "KUBERNETES_SERVICE_HOST" in environ:
        hints.append("kubernetes (KUBERNETES_SERVICE_HOST)")
    if "SLURM_JOB_ID" in environ:
        hints.append("slurm job (SLURM_JOB_ID)")
    if environ.get("container"):
        hints.append(f"container={environ['container']}")
    try:
        cgroup = (root / "proc/1/cgroup").read_text(errors="replace")
    except OSError:
        cgroup = ""
    for marker in ("docker", "kubepods", "containerd", "lxc"):
        if marker in cgroup:
            hints.append(f"{marker} (/proc/1/cgroup)")
            break
    return hints

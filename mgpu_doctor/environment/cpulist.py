"""Linux CPU lists ("0-27,56-83"), as the kernel writes them in sysfs and /proc."""

from __future__ import annotations


def parse_cpulist(text: str) -> frozenset[int]:
    """The CPUs of a list such as ``0-3,8,10-11``; raises ValueError on anything else."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        first, sep, last = part.partition("-")
        if sep:
            low, high = int(first), int(last)
            if high < low or high - low > 65536:
                raise ValueError(f"bad CPU range {part!r}")
            cpus.update(range(low, high + 1))
        else:
            cpus.add(int(first))
    return frozenset(cpus)


def format_cpulist(cpus: frozenset[int] | set[int]) -> str:
    """``{0, 1, 2, 5}`` -> ``0-2,5``."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)

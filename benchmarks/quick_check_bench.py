"""How fast and how small is `mgpu-doctor check --quick` next to the pitfall it replaces?

The pitfall: `device_lib.list_local_devices()`, which imports TensorFlow and initialises every
device (on GPUs: a context and memory on each) just to count them.

Run: python benchmarks/quick_check_bench.py [--runs N]   (or call ``main(argv)``: it returns
the figures). Targets (issue 16), on the 2-core machine, measured alone, median of 3:
quick check <= 0.30 s wall, >= 12x faster than the pitfall measured in the same run, and a
peak RSS <= 40 MiB (the pitfall: about 540 MiB).

Each command runs in a fresh process, the two interleaved so a busy moment of the machine hits
both; a warm-up run of each comes first (file cache, bytecode, the parsed-matrix cache). Peak
RSS is ``ru_maxrss`` from ``wait4``: the largest resident set of the process or of any child
it waited for (the quick check's package probe is one). One more quick run with an empty
parse cache shows what the first run after an install or upgrade costs (not a target).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass

QUICK = [sys.executable, "-m", "mgpu_doctor", "check", "--quick"]
PITFALL = [sys.executable, "-c",
           "from tensorflow.python.client import device_lib; device_lib.list_local_devices()"]
QUICK_MAX_S = 0.30
MIN_RATIO = 12.0
QUICK_MAX_RSS_MIB = 40.0

# pip byte-compiles what it installs, TensorFlow included; an editable checkout has no .pyc until
# Python may write them. Both sides run as installed: bytecode allowed, written by the warm-up.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


@dataclass(frozen=True)
class Run:
    wall_s: float
    cpu_s: float  # user + system, its waited-for children included: what other load inflates least
    peak_rss_mib: float
    returncode: int


@dataclass(frozen=True)
class Figures:
    """Every run, and the medians the targets are judged on."""

    quick: list[Run]
    pitfall: list[Run]
    quick_cold: Run  # with an empty parsed-matrix cache
    load: float  # the 1-minute load average when the runs ended: the targets assume an idle machine

    @property
    def quick_s(self) -> float:
        return statistics.median(r.wall_s for r in self.quick)

    @property
    def pitfall_s(self) -> float:
        return statistics.median(r.wall_s for r in self.pitfall)

    @property
    def quick_cpu_s(self) -> float:
        return statistics.median(r.cpu_s for r in self.quick)

    @property
    def pitfall_cpu_s(self) -> float:
        return statistics.median(r.cpu_s for r in self.pitfall)

    @property
    def ratio(self) -> float:
        return self.pitfall_s / self.quick_s

    @property
    def quick_rss_mib(self) -> float:
        return statistics.median(r.peak_rss_mib for r in self.quick)

    @property
    def pitfall_rss_mib(self) -> float:
        return statistics.median(r.peak_rss_mib for r in self.pitfall)

    @property
    def targets(self) -> dict[str, bool]:
        return {f"quick <= {QUICK_MAX_S:.2f} s": self.quick_s <= QUICK_MAX_S,
                f">= {MIN_RATIO:g}x faster than the pitfall": self.ratio >= MIN_RATIO,
                f"quick peak RSS <= {QUICK_MAX_RSS_MIB:g} MiB": self.quick_rss_mib <= QUICK_MAX_RSS_MIB}


def run_once(cmd: Sequence[str], env: dict[str, str] | None = None) -> Run:
    """One fresh process: its wall time, and its peak RSS from the kernel (``wait4``)."""
    start = time.perf_counter()
    proc = subprocess.Popen(list(cmd), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env or ENV)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024,  # Linux: KiB
               proc.returncode)


def measure(runs: int) -> Figures:
    run_once(QUICK)  # warm-up: file cache, bytecode and the parse cache for both
    run_once(PITFALL)
    quick, pitfall = [], []
    for _ in range(runs):  # interleaved, so a busy moment of the machine hits both
        quick.append(run_once(QUICK))
        pitfall.append(run_once(PITFALL))
    with tempfile.TemporaryDirectory(prefix="mgpu-bench-cache-") as empty:
        cold = run_once(QUICK, {**ENV, "MGPU_DOCTOR_CACHE_DIR": empty})
    return Figures(quick, pitfall, cold, os.getloadavg()[0])


def report(figures: Figures) -> str:
    def runs(rs: list[Run]) -> str:
        return ", ".join(f"{r.wall_s:.3f}" for r in rs)

    def row(name: str, rs: list[Run], wall: float, cpu: float, rss: float) -> str:
        return (f"{name:33}median {wall:.3f} s  CPU {cpu:.3f} s  peak RSS {rss:6.1f} MiB  "
                f"(runs: {runs(rs)})")

    lines = [
        row("mgpu-doctor check --quick", figures.quick, figures.quick_s, figures.quick_cpu_s,
            figures.quick_rss_mib),
        row("device_lib.list_local_devices()", figures.pitfall, figures.pitfall_s, figures.pitfall_cpu_s,
            figures.pitfall_rss_mib),
        f"ratio: the quick check is {figures.ratio:.1f}x faster",
        f"quick check with an empty parse cache (first run after an install): "
        f"{figures.quick_cold.wall_s:.3f} s, CPU {figures.quick_cold.cpu_s:.3f} s",
    ]
    if figures.load > 0.5 * (os.cpu_count() or 1):
        lines.append(f"note: load average {figures.load:.1f} on {os.cpu_count()} CPUs: the machine was "
                     "busy, the wall times are inflated (the CPU times much less)")
    failed = [r.returncode for r in figures.quick + figures.pitfall if r.returncode not in (0, 1)]
    if failed:
        lines.append(f"warning: runs exited with {sorted(set(failed))}: the figures may mean nothing")
    lines += [f"target {name}: {'met' if ok else 'MISSED'}" for name, ok in figures.targets.items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> Figures:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each command (default: 3)")
    parser.add_argument("--no-write", action="store_true",
                        help="do not replace benchmarks/results/quick_check.json")
    parser.add_argument("--write-busy", action="store_true",
                        help="write the figures even when the machine was busy (load above its CPUs)")
    args = parser.parse_args(argv)
    figures = measure(max(1, args.runs))
    print(report(figures))
    # The docs' claims are the quick check on a quiet machine: a busy one's wall times are not them.
    busy = figures.load > (os.cpu_count() or 1)
    if busy and not args.no_write and not args.write_busy:
        print("figures not written: the machine was busy (--write-busy writes them anyway)")
    elif not args.no_write:
        from figures import write_figures  # benchmarks/, beside this script

        write_figures("quick_check", {"quick_s": figures.quick_s, "pitfall_s": figures.pitfall_s,
                                      "quick_peak_rss_mib": figures.quick_rss_mib},
                      f"python benchmarks/quick_check_bench.py --runs {args.runs}")
    return figures


if __name__ == "__main__":
    main()

"""How fast and how small is `mgpu-doctor check --quick` next to the pitfall it replaces?

The pitfall: `device_lib.list_local_devices()`, which imports TensorFlow and initialises every
device (on GPUs: a context and memory on each) just to count them.

Run: python benchmarks/quick_check_bench.py [--runs N]   (or call ``main(argv)``: it returns
the figures). Targets, on the 2-core machine, measured alone, medians: quick check <= 0.11 s
wall, >= 20x faster than the pitfall measured in the same run, a peak RSS <= 40 MiB (the
pitfall: about 540 MiB), and <= 0.15 s with 5,000 synthetic known issues on top of the bundled
ones (the quick check's cost must not grow with the matrix).

The synthetic entries are generated into a temporary folder and given with ``--matrix DIR`` (a
team's own known issues, read on top of the bundled ones). Like real entries, each names a
TensorFlow range of one to five minor releases bounded by real release numbers, spread evenly over
1.0 to 2.22 (so distinct ranges repeat, as they do in the bundled matrix, and a few per cent of
the entries fall on any one release), some a Keras, CUDA or NCCL range too, some a usage or
strategy condition.
The import share is the wall time of a process that only imports the modules a quick check
imports (listed from a real run), less Python's own start, over the quick check's wall time.

Each command runs in a fresh process, the two interleaved so a busy moment of the machine hits
both; a warm-up run of each comes first (file cache, bytecode, the parsed-matrix cache). Peak
RSS is ``ru_maxrss`` from ``wait4``: the largest resident set of the process or of any child
it waited for (the quick check's package probe is one). One more quick run with an empty
parse cache shows what the first run after an install or upgrade costs (not a target).
"""

from __future__ import annotations

import argparse
import json
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
QUICK_MAX_S = 0.11
MIN_RATIO = 20.0
QUICK_MAX_RSS_MIB = 40.0
SYNTHETIC_SIZES = (1000, 5000)
SYNTHETIC_MAX_S = 0.15  # with the largest synthetic matrix
BARE = [sys.executable, "-c", "pass"]
# Lists the modules the quick check imports, in the order it imports them.
LIST_MODULES = [sys.executable, "-c",
                "import io, json, sys, contextlib\n"
                "from mgpu_doctor.cli import main\n"
                "with contextlib.redirect_stdout(io.StringIO()): main(['check', '--quick'])\n"
                "print(json.dumps(list(sys.modules)))"]

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
    imports: list[Run]  # a process importing what the quick check imports, nothing else
    bare: list[Run]  # `python -c pass`
    beside: list[Run]  # quick checks run between those two
    synthetic: dict[int, list[Run]]  # entries added -> the quick check's runs with them

    @property
    def import_share(self) -> float:
        """The imports' part of the quick check's wall time (Python's own start left out)."""
        start = statistics.median(r.wall_s for r in self.bare)
        return (statistics.median(r.wall_s for r in self.imports) - start) / \
            statistics.median(r.wall_s for r in self.beside)

    @property
    def import_cpu_share(self) -> float:
        start = statistics.median(r.cpu_s for r in self.bare)
        return (statistics.median(r.cpu_s for r in self.imports) - start) / \
            statistics.median(r.cpu_s for r in self.beside)

    def synthetic_s(self, entries: int) -> float:
        return statistics.median(r.wall_s for r in self.synthetic[entries])

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
        largest = max(self.synthetic)
        return {f"quick <= {QUICK_MAX_S:.2f} s": self.quick_s <= QUICK_MAX_S,
                f">= {MIN_RATIO:g}x faster than the pitfall": self.ratio >= MIN_RATIO,
                f"quick peak RSS <= {QUICK_MAX_RSS_MIB:g} MiB": self.quick_rss_mib <= QUICK_MAX_RSS_MIB,
                f"quick with {largest:,} synthetic entries <= {SYNTHETIC_MAX_S:.2f} s":
                    self.synthetic_s(largest) <= SYNTHETIC_MAX_S}


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


def synthetic_matrix(directory: str, entries: int) -> None:
    """``entries`` valid known issues in ``directory``/known-issues/synthetic.toml (see above)."""
    from mgpu_doctor.matrix import vocabulary

    usages, strategies = sorted(vocabulary.USAGES), sorted(vocabulary.STRATEGIES)
    lines = ["schema_version = 1", ""]
    for n in range(entries):
        series, width = n % 39, n // 39 % 5  # 1.0 to 1.15, then 2.0 to 2.22; one to five minors
        major, low = (1, series) if series < 16 else (2, series - 16)
        affects = [f'tensorflow = ">={major}.{low},<={major}.{min(low + width, 22)}.{n % 3}"']
        if n % 4 == 1:
            affects.append(f'keras = ">={2 + n % 2}.{n % 9},<={2 + n % 2}.{n % 9 + 2}.0"')
        elif n % 4 == 2:
            affects.append(f'cuda = ">=11.{n % 9},<=12.{n % 7}.0"')
        elif n % 4 == 3:
            affects.append(f'nccl = ">=2.{n % 20 + 4},<=2.{n % 20 + 6}.0"')
        conditions = ([f'usage = ["{usages[n % len(usages)]}"]'] if n % 3 == 0 else
                      [f'strategy = ["{strategies[n % len(strategies)]}"]'] if n % 3 == 1 else [])
        lines += ["[[issue]]", f'id = "synthetic-{n:05d}"', f'title = "Synthetic known issue {n}"',
                  'symptom = "hang"', 'confidence = "reported"',
                  'summary = "Generated for the benchmark: a hang under the conditions named."',
                  'workaround = "None posted. Generic advice: none, this entry is generated."',
                  f"affects = {{ {', '.join(affects)} }}", f"conditions = {{ {', '.join(conditions)} }}",
                  "[[issue.sources]]", f'url = "https://github.com/example/synthetic/issues/{n + 1}"',
                  'kind = "issue"', ""]
    os.makedirs(os.path.join(directory, "known-issues"))
    with open(os.path.join(directory, "known-issues", "synthetic.toml"), "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines))


def imported_modules() -> list[str]:
    done = subprocess.run(LIST_MODULES, env=ENV, capture_output=True, text=True, check=True,
                          stdin=subprocess.DEVNULL)
    return [m for m in json.loads(done.stdout.splitlines()[-1]) if m != "__main__"]


def measure(runs: int) -> Figures:
    run_once(QUICK)  # warm-up: file cache, bytecode and the parse cache for both
    run_once(PITFALL)
    quick, pitfall = [], []
    for _ in range(runs):  # interleaved, so a busy moment of the machine hits both
        quick.append(run_once(QUICK))
        pitfall.append(run_once(PITFALL))
    with tempfile.TemporaryDirectory(prefix="mgpu-bench-cache-") as empty:
        cold = run_once(QUICK, {**ENV, "MGPU_DOCTOR_CACHE_DIR": empty})
    # A module loaded from a file rather than by name (the package probe's code) is left out. The
    # collector is paused, as the console script pauses it while it imports its command.
    only_imports = [sys.executable, "-c", "import gc, importlib\ngc.disable()\n"
                    f"for m in {imported_modules()!r}:\n"
                    "    try: importlib.import_module(m)\n    except ImportError: pass"]
    run_once(only_imports)
    imports, bare, beside = [], [], []
    for _ in range(max(runs, 5)):  # interleaved with quick checks: the share compares like with like
        imports.append(run_once(only_imports))
        bare.append(run_once(BARE))
        beside.append(run_once(QUICK))
    synthetic = {}
    for entries in SYNTHETIC_SIZES:
        with tempfile.TemporaryDirectory(prefix="mgpu-bench-matrix-") as directory:
            synthetic_matrix(directory, entries)
            command = [*QUICK, "--matrix", directory]
            run_once(command)  # warm-up: parse, index and candidates, once per matrix version
            synthetic[entries] = [run_once(command) for _ in range(runs)]
    return Figures(quick, pitfall, cold, os.getloadavg()[0], imports, bare, beside, synthetic)


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
        f"imports: {figures.import_share:.0%} of the quick check's wall time, {figures.import_cpu_share:.0%} "
        f"of its CPU time (Python's own start: {statistics.median(r.wall_s for r in figures.bare):.3f} s)",
        *(f"with {n:,} synthetic known issues on top of the bundled ones: "
          f"median {figures.synthetic_s(n):.3f} s  CPU {statistics.median(r.cpu_s for r in rs):.3f} s  "
          f"(runs: {runs(rs)})"
          for n, rs in figures.synthetic.items()),
        f"quick check with an empty parse cache (first run after an install): "
        f"{figures.quick_cold.wall_s:.3f} s, CPU {figures.quick_cold.cpu_s:.3f} s",
    ]
    if figures.load > 0.5 * (os.cpu_count() or 1):
        lines.append(f"note: load average {figures.load:.1f} on {os.cpu_count()} CPUs: the machine was "
                     "busy, the wall times are inflated (the CPU times much less)")
    failed = [r.returncode for r in figures.quick + figures.pitfall + sum(figures.synthetic.values(), [])
              if r.returncode not in (0, 1)]
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

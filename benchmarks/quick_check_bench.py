"""How fast is `mgpu-doctor check --quick` next to the pitfall it replaces?

The pitfall: `device_lib.list_local_devices()`, which imports TensorFlow and initialises every
device (on GPUs: a context and memory on each) just to count them.

Run: python benchmarks/quick_check_bench.py [--runs N]
Target (issue 2): quick check <= 0.5 s wall and >= 10x faster than the pitfall, on 2 cores.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

QUICK = [sys.executable, "-m", "mgpu_doctor", "check", "--quick"]
PITFALL = [sys.executable, "-c",
           "from tensorflow.python.client import device_lib; device_lib.list_local_devices()"]


def wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def _list(times: list[float]) -> str:
    return ", ".join(f"{t:.3f}" for t in times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    wall(QUICK)  # warm the file cache for both, so neither pays a cold start alone
    wall(PITFALL)
    quick = [wall(QUICK) for _ in range(runs)]
    pitfall = [wall(PITFALL) for _ in range(runs)]
    q, p = statistics.median(quick), statistics.median(pitfall)
    print(f"mgpu-doctor check --quick        median {q:.3f} s  (runs: {_list(quick)})")
    print(f"device_lib.list_local_devices()  median {p:.3f} s  (runs: {_list(pitfall)})")
    print(f"ratio: the quick check is {p / q:.1f}x faster")
    print(f"targets: quick <= 0.5 s: {'met' if q <= 0.5 else 'MISSED'}; "
          f">= 10x: {'met' if p / q >= 10 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How long does `mgpu-doctor hang` take on an 8-process job, and how long is each process paused?

Run: python benchmarks/hang_bench.py [--processes N] [--tensorflow]   (or call ``main(argv)``: it
returns the figures). Target (on the 2-core machine): the whole reading of 8 processes, dumped in
parallel threads, under 5 s; each process paused no longer than py-spy's own dump (the longest
dump is printed: an upper bound of the pause, which is only the part of it spent reading memory).

The processes are Python programs that hang the way a job does: a main thread joined on a thread
that waits on a lock nobody releases, two more threads asleep in an Event. ``--tensorflow`` has each
import TensorFlow first (a realistic address space for py-spy to search: slower to start, about
500 MiB each). The reading includes the CPU interval of 1 s.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mgpu_doctor.hang.section import HangRequest, read_hang  # noqa: E402

TARGET_S = 5.0
JOB = """
import threading, sys
if sys.argv[1] == "tf":
    import tensorflow  # noqa: F401
lock, never = threading.Lock(), threading.Event()
lock.acquire()
for _ in range(2):
    threading.Thread(target=never.wait, daemon=True).start()
consumer = threading.Thread(target=lock.acquire)
consumer.start()
print("ready", flush=True)
consumer.join()
"""


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--tensorflow", action="store_true")
    args = parser.parse_args(argv)
    procs = [subprocess.Popen([sys.executable, "-c", JOB, "tf" if args.tensorflow else "plain"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              start_new_session=True) for _ in range(args.processes)]
    try:
        for proc in procs:
            assert proc.stdout is not None and "ready" in proc.stdout.readline()
        begun = time.monotonic()
        reading = read_hang(HangRequest(tuple(p.pid for p in procs)))
        took = time.monotonic() - begun
    finally:
        for proc in procs:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    read = sum(isinstance(p.threads, list) for p in reading.processes)
    longest = max(p.dump_s for p in reading.processes)
    figures = {"processes": float(args.processes), "read": float(read), "total_s": round(took, 2),
               "longest_dump_s": round(longest, 3)}
    print(f"{args.processes} processes{' (TensorFlow imported)' if args.tensorflow else ''}: "
          f"{read} read in {took:.2f} s (interval 1 s included; target < {TARGET_S:g} s); "
          f"longest py-spy dump {longest * 1000:.0f} ms; {reading.tool}")
    return figures


if __name__ == "__main__":
    figures = main()
    sys.exit(0 if figures["total_s"] < TARGET_S and figures["read"] == figures["processes"] else 1)

"""What do the smoke trainings and a full `check` cost, next to the same trainings done by hand?

Measures, each --runs times (default 3; the medians are what counts), one after the other:
  1. bare: every training the level plans, each in a fresh plain Python process that imports
     TensorFlow and trains that one spec with the doctor's own model code
     (`child_scripts/smoke_worker.train`), no supervision: what one would do by hand with a
     `train.py` per case. A fresh process per training is the honest baseline: in one process,
     with TF 2.21, every MirroredStrategy training after the synchronized BatchNormalization
     model fails (tensorflow/tensorflow#62790), and failed runs are cheap, which made the old
     one-process baseline look faster than it was;
  2. smoke: `mgpu-doctor smoke --level LEVEL` (a supervised worker, one fork per run);
  3. check: `mgpu-doctor check --level LEVEL` (every check, the TensorFlow probe and the smoke
     trainings), unless --no-check.
For each it prints wall seconds and the CPU seconds (user + sys) of the processes it started
and their children, the statuses of the runs, and the issue's targets met or MISSED.

Targets (issue 16), on the 2-core CPU machine with 2 virtual devices, measured alone, median of
3, at the standard level: smoke <= 60 s wall and <= 1.3x the bare cost of the same trainings;
check <= 70 s wall. Other processes sharing the CPU inflate every wall time; the CPU seconds
are less sensitive to them, and their ratio compares the work done.

Run: python benchmarks/smoke_bench.py [--runs 3] [--level standard|long] [--layers a,b]
     [--virtual-devices N] [--no-check]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mgpu_doctor.smoke.plan import SMOKE_LEVELS, SmokeOptions, parse_layers, plan_runs  # noqa: E402

SMOKE_WALL_TARGET_S = 60.0
SMOKE_RATIO_TARGET = 1.3
CHECK_WALL_TARGET_S = 70.0
CHILD_SCRIPTS = ROOT / "mgpu_doctor" / "child_scripts"

# One training by hand: a fresh interpreter, TensorFlow imported, the devices configured (the
# worker's own configure_devices), the model trained. Prints the status on its last line.
BARE = r"""
import json, sys
sys.path.insert(0, sys.argv[2])
import smoke_worker
import tensorflow as tf
spec = json.load(open(sys.argv[1]))
result = {}
try:
    smoke_worker.train(tf, spec, result)
    status = result.get("status", "error")
except Exception as exc:
    status = "error"
print(json.dumps({"status": status}))
"""


@dataclass
class Sample:
    wall_s: float
    cpu_s: float
    statuses: list[str] = field(default_factory=list)
    note: str = ""


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(action: Callable[[], tuple[list[str], str]]) -> Sample:
    """Wall and CPU seconds of ``action`` (CPU: every child it waited for, and theirs)."""
    cpu, start = children_cpu_s(), time.perf_counter()
    statuses, note = action()
    return Sample(time.perf_counter() - start, children_cpu_s() - cpu, statuses, note)


def env() -> dict[str, str]:
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(ROOT)}


def bare(specs: list[dict], tmp: Path) -> tuple[list[str], str]:
    statuses = []
    for spec in specs:
        one = tmp / "one.json"
        one.write_text(json.dumps(spec))
        done = subprocess.run([sys.executable, "-c", BARE, str(one), str(CHILD_SCRIPTS)],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              check=False, env=env())
        last = done.stdout.strip().splitlines()[-1:] if done.stdout.strip() else []
        statuses.append(json.loads(last[0])["status"] if last else
                        f"crash ({done.returncode})")
    return statuses, ""


def smoke(args: argparse.Namespace, tmp: Path) -> tuple[list[str], str]:
    results = tmp / "results.jsonl"
    results.unlink(missing_ok=True)
    done = subprocess.run(doctor("smoke", args) + ["--results", str(results)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False,
                          env=env())
    statuses = [json.loads(line)["status"] for line in results.read_text().splitlines()] \
        if results.exists() else []
    return statuses, f"exit {done.returncode}"


def check(args: argparse.Namespace, tmp: Path) -> tuple[list[str], str]:
    done = subprocess.run(doctor("check", args), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, check=False, env=env())
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        return [], f"exit {done.returncode}, no JSON: {done.stderr.strip()[-200:]}"
    return [r["status"] for r in report["smoke_runs"]], f"exit {done.returncode}, level {report.get('level')}"


def doctor(command: str, args: argparse.Namespace) -> list[str]:
    cmd = [sys.executable, "-m", "mgpu_doctor", command, "--level", args.level, "--format", "json",
           "--virtual-devices", str(args.virtual_devices)]
    return cmd + (["--layers", args.layers] if args.layers else [])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="times to measure each (default 3: medians)")
    parser.add_argument("--level", choices=SMOKE_LEVELS, default="standard")
    parser.add_argument("--layers", default=None)
    parser.add_argument("--virtual-devices", type=int, default=2)
    parser.add_argument("--no-check", action="store_true", help="leave out the full `check`")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    layers = parse_layers(args.layers)
    specs = plan_runs(SmokeOptions(layers=layers, virtual_devices=args.virtual_devices,
                                   level=args.level), gpu_count=0)
    print(f"level {args.level}: {len(specs)} trainings ({', '.join(layers)}; 1 and "
          f"{args.virtual_devices} virtual CPU devices), {args.runs} time(s) each; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start")
    measured: dict[str, list[Sample]] = {"bare": [], "smoke": [], "check": []}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        children = [s.to_child() for s in specs]
        for i in range(args.runs):  # interleaved: a busy spell on the machine hits all of them
            steps: list[tuple[str, Callable[[], tuple[list[str], str]]]] = [
                ("bare", lambda: bare(children, tmp)), ("smoke", lambda: smoke(args, tmp))]
            if not args.no_check:
                steps.append(("check", lambda: check(args, tmp)))
            for what, action in steps:
                sample = timed(action)
                measured[what].append(sample)
                print(f"  run {i + 1} {what:<5}: {sample.wall_s:6.1f} s wall, {sample.cpu_s:6.1f} s CPU"
                      f"  {count(sample.statuses)}{'  ' + sample.note if sample.note else ''}",
                      flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end "
          "(above 0 means other processes shared the CPUs: wall times are inflated)")
    labels = {"bare": "bare, a fresh process per training",
              "smoke": f"mgpu-doctor smoke --level {args.level}",
              "check": f"mgpu-doctor check --level {args.level}"}
    medians = {what: (statistics.median(s.wall_s for s in samples),
                      statistics.median(s.cpu_s for s in samples))
               for what, samples in measured.items() if samples}
    print(f"\n{'median':<40} {'wall s':>8} {'CPU s':>8}")
    for what, (wall, cpu) in medians.items():
        print(f"{labels[what]:<40} {wall:8.1f} {cpu:8.1f}")
    if args.level != "standard" or args.layers or args.virtual_devices != 2:
        print("\n(the targets are for the standard level, every layer, 2 virtual devices)")
        return 0
    smoke_wall, smoke_cpu = medians["smoke"]
    bare_wall, bare_cpu = medians["bare"]
    print("\ntargets (issue 16; the machine alone, median of 3):")
    verdict("smoke wall", smoke_wall, SMOKE_WALL_TARGET_S, "s")
    verdict("smoke / bare, wall", smoke_wall / bare_wall, SMOKE_RATIO_TARGET, "x")
    print(f"  {'smoke / bare, CPU (no target)':<32} {smoke_cpu / bare_cpu:7.2f}x")
    if "check" in medians:
        verdict("check wall", medians["check"][0], CHECK_WALL_TARGET_S, "s")
    return 0


def verdict(what: str, value: float, target: float, unit: str) -> None:
    figure = f"{value:7.2f}x" if unit == "x" else f"{value:7.1f} s"
    bound = f"{target:g}x" if unit == "x" else f"{target:g} s"
    print(f"  {what + ' <= ' + bound:<32} {figure}  {'met' if value <= target else 'MISSED'}")


def count(statuses: list[str]) -> str:
    counts: dict[str, int] = {}
    for s in statuses:
        counts[s] = counts.get(s, 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no runs"


if __name__ == "__main__":
    sys.exit(main())

"""GPU day one: on a machine with a real NVIDIA GPU, prove (or disprove) the doctor's GPU claims in one call.

    python benchmarks/gpu_day_one.py --out DIR [--wheels WHEEL_DIR]

Runs from this source tree (no install, no network) with the packages the machine has, saying what
is missing and going on without it: `devices`, `check --quick`, `snapshot` (redacted), `libs`,
`check --from` the snapshot, `check --backend jax` with the JAX smoke where Keras and a GPU are
there, and `pytest -m gpu`. Meanwhile NVML's memory used on every GPU is sampled before, during
and after each command (the doctor must take 0 MiB: no CUDA context in its process), and a child
that imports JAX with its default settings shows the preallocation pitfall next to `check --quick`.

Everything lands in DIR, at most 8 files:

    summary.txt            one line per claim: met / MISSED / not testable here, and what was missing
    commands.json          every command: argv, exit status, seconds, memory per GPU before/peak/after,
                           the GPU processes that belonged to it, stdout (devices, libs) and stderr tails
    snapshot.json          `mgpu-doctor snapshot` (redacted: host, user, home and GPU UUIDs replaced)
    check-quick.json       `check --quick --format json`
    check.json             `check --backend jax --format json` (with the smoke), else `check --from`
    check.junit.xml        the same as JUnit
    pytest-gpu.junit.xml   `pytest -m gpu tests/test_gpu.py`

It finishes within 8 minutes (each command gets what is left of the budget). Without a GPU (here)
it runs everything that needs none in well under a minute and says "not testable here" for the rest.
``--wheels DIR`` puts every pure-Python wheel in DIR on the commands' PYTHONPATH (pytest and its
few dependencies travel that way to a machine without them).
"""

from __future__ import annotations

import argparse
import getpass
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = 480.0  # 8 minutes for everything
MAX_FILES = 8
SAMPLE_S = 0.1
UUID = re.compile(r"(GPU|MIG)-[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")
PITFALL_SHARE = 0.70  # JAX's default takes 75 % of each GPU (docs.jax.dev, GPU memory allocation)
PROBE_MAX_SHARE = 0.10  # the JAX probe without preallocation: a CUDA context, never a pool
SMOKE_LAYERS = "dense,batchnorm,lstm,attention"
MET, MISSED, UNTESTABLE = "met", "MISSED", "not testable here"
# A child that imports JAX as a user would (no preallocation setting) and waits for the sampler.
PITFALL = ("import jax, jax.numpy as jnp, sys, time; jnp.zeros(1).block_until_ready(); "
           "print('ready', flush=True); time.sleep(float(sys.argv[1]))")
JAX_SETTINGS = ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION",
                "XLA_PYTHON_CLIENT_ALLOCATOR")


# ----------------------------------------------------------------------------- NVML


class Gpus:
    """NVML's memory used per GPU and its compute processes (NVML creates no CUDA context)."""

    def __init__(self) -> None:
        self.why_not = ""
        self.nvml: Any = None
        self.handles: list[Any] = []
        try:
            import pynvml  # nvidia-ml-py

            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
            self.nvml, self.handles = pynvml, [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
            if not count:
                self.why_not = "NVML finds no GPU"
        except ImportError:
            self.why_not = "pynvml (nvidia-ml-py) is not installed"
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            self.why_not = f"no NVIDIA driver ({type(exc).__name__}: {exc})"

    @property
    def present(self) -> bool:
        return bool(self.handles)

    def used_mib(self) -> list[int]:
        return [self.nvml.nvmlDeviceGetMemoryInfo(h).used // 2**20 for h in self.handles]

    def total_mib(self) -> list[int]:
        return [self.nvml.nvmlDeviceGetMemoryInfo(h).total // 2**20 for h in self.handles]

    def pids(self) -> set[int]:
        out: set[int] = set()
        for h in self.handles:
            for get in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
                try:
                    out.update(p.pid for p in getattr(self.nvml, get)(h))
                except Exception:
                    pass
        return out


@dataclass
class Memory:
    before: list[int] = field(default_factory=list)
    peak: list[int] = field(default_factory=list)
    after: list[int] = field(default_factory=list)
    own_gpu_pids: list[int] = field(default_factory=list)  # GPU processes of the command's session

    def taken(self) -> int:
        """The most MiB the command added on any GPU while it ran."""
        return max((p - b for p, b in zip(self.peak, self.before, strict=False)), default=0)

    def left(self) -> int:
        return max((a - b for a, b in zip(self.after, self.before, strict=False)), default=0)


class Sampler(threading.Thread):
    def __init__(self, gpus: Gpus, session: int) -> None:
        super().__init__(daemon=True)
        self.gpus, self.session = gpus, session
        self.peak = gpus.used_mib()
        self.own: set[int] = set()
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.sample()
            self.stop.wait(SAMPLE_S)

    def sample(self) -> None:
        self.peak = [max(a, b) for a, b in zip(self.peak, self.gpus.used_mib(), strict=False)]
        for pid in self.gpus.pids():
            try:
                if os.getsid(pid) == self.session:
                    self.own.add(pid)
            except OSError:  # gone, or in another PID namespace
                pass


# ----------------------------------------------------------------------------- commands


@dataclass
class Command:
    name: str
    argv: list[str]
    rc: int | None = None
    seconds: float = 0.0
    timed_out: bool = False
    memory: Memory = field(default_factory=Memory)
    stdout_tail: str = ""
    stderr_tail: str = ""


class DayOne:
    def __init__(self, out: Path, gpus: Gpus, env: dict[str, str], started: float) -> None:
        self.out, self.gpus, self.env, self.started = out, gpus, env, started
        self.commands: list[Command] = []

    def left_s(self) -> float:
        return BUDGET_S - (time.monotonic() - self.started)

    def run(self, name: str, argv: list[str], limit_s: float, stdout_to: Path | None = None,
            keep_stdout: bool = False, ready_line: str = "") -> Command:
        cmd = Command(name, argv)
        self.commands.append(cmd)
        limit = max(5.0, min(limit_s, self.left_s() - 20))
        print(f"gpu-day-one: {name} (up to {limit:.0f} s)", file=sys.stderr, flush=True)
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            if self.gpus.present:
                cmd.memory.before = self.gpus.used_mib()
            start = time.monotonic()
            proc = subprocess.Popen(argv, cwd=ROOT, env=self.env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=err, start_new_session=True)
            sampler = Sampler(self.gpus, proc.pid) if self.gpus.present else None
            if sampler is not None:
                sampler.start()
            try:
                proc.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                cmd.timed_out = True
                os.killpg(proc.pid, 9)
                proc.wait()
            cmd.seconds = round(time.monotonic() - start, 2)
            cmd.rc = proc.returncode
            if sampler is not None:
                sampler.sample()
                sampler.stop.set()
                sampler.join()
                time.sleep(1.0)  # the driver frees a context shortly after its process exits
                cmd.memory.peak, cmd.memory.own_gpu_pids = sampler.peak, sorted(sampler.own)
                cmd.memory.after = self.gpus.used_mib()
            out.seek(0)
            data = out.read()
            err.seek(0)
            cmd.stderr_tail = scrub(err.read()[-3000:].decode("utf-8", "replace"))
        if stdout_to is not None:
            stdout_to.write_bytes(data)
        if keep_stdout or stdout_to is None:
            cmd.stdout_tail = scrub(data[-20000:].decode("utf-8", "replace"))
        return cmd


def scrub(text: str) -> str:
    """What the doctor's own outputs redact, for the captured text it does not (`devices`, stderr):
    GPU UUIDs, the host name, the user's home and name."""
    text = UUID.sub("GPU-<redacted>", text)
    secrets = ((str(Path.home()), "~"), (socket.gethostname(), "<host>"), (getpass.getuser(), "<user>"))
    for secret, mark in secrets:
        if len(secret) > 1:
            text = re.sub(rf"(?<![\w.-]){re.escape(secret)}(?![\w-])", mark, text)
    return text


# ----------------------------------------------------------------------------- claims


@dataclass
class Claim:
    verdict: str
    text: str
    detail: str = ""

    def line(self) -> str:
        return f"[{self.verdict}] {self.text}" + (f": {self.detail}" if self.detail else "")


def zero_claim(gpus: Gpus, cmd: Command | None, what: str) -> Claim:
    text = f"`{what}` takes 0 MiB on every GPU (no CUDA context in the doctor)"
    if not gpus.present:
        return Claim(UNTESTABLE, text, gpus.why_not)
    if cmd is None or cmd.rc is None:
        return Claim(MISSED, text, "the command did not run")
    m = cmd.memory
    deltas = [f"GPU {i} {p - b:+d} MiB" for i, (p, b) in enumerate(zip(m.peak, m.before, strict=False))]
    detail = (f"peak - before: {', '.join(deltas)}"
              f"; GPU processes of its own: {m.own_gpu_pids or 'none'}; exit {cmd.rc}")
    ok = m.taken() == 0 and not m.own_gpu_pids and cmd.rc in (0, 1)
    return Claim(MET if ok else MISSED, text, detail)


def available(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def packages_line(env_path: list[str]) -> tuple[str, dict[str, bool]]:
    wanted = {"pynvml": "nvidia-ml-py", "packaging": "packaging", "tabulate": "tabulate",
              "pytest": "pytest", "jax": "jax", "keras": "keras", "tensorflow": "tensorflow"}
    sys.path[:0] = env_path  # wheels given with --wheels count as present
    have = {mod: available(mod) for mod in wanted}
    missing = [wanted[m] for m, ok in have.items() if not ok]
    return (f"packages missing (going on without them): {', '.join(missing) or 'none'}", have)


def junit_counts(path: Path) -> tuple[int, int, int]:
    """(tests, failures + errors, skipped) of a JUnit file; (0, 0, 0) when it cannot be read."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return 0, 0, 0
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = sum(int(s.get("tests", 0)) for s in suites)
    bad = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
    skipped = sum(int(s.get("skipped", 0)) for s in suites)
    return total, bad, skipped


def jax_against_nvml(snapshot: Path) -> tuple[str, str]:
    """(verdict, detail) of "JAX sees NVML's GPUs", from the snapshot."""
    try:
        data = json.loads(snapshot.read_text())
    except (OSError, ValueError) as exc:
        return MISSED, f"no snapshot to read ({exc})"
    jax, nvml = data.get("jax") or {}, data.get("nvml") or {}
    if "unavailable" in jax:
        return UNTESTABLE, f"JAX {jax['unavailable']}: {str(jax.get('detail', ''))[:120]}"
    devices = jax.get("devices")
    if not isinstance(devices, list):
        return MISSED, f"JAX's devices: {devices}"
    gpus = [d for d in devices if d.get("platform") in ("gpu", "cuda")]
    count = len(nvml.get("gpus", []))
    return (MET if len(gpus) == count else MISSED,
            f"JAX: {len(gpus)} GPU(s) ({', '.join(sorted({d.get('device_kind', '') for d in gpus}))}), "
            f"NVML: {count}; plugin {jax.get('plugins')}")


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path,
                        help="directory for every output (at most 8 files)")
    parser.add_argument("--wheels", type=Path, help="directory of pure-Python wheels to put on PYTHONPATH")
    parser.add_argument("--layers", default=SMOKE_LAYERS, help=f"JAX smoke layers (default: {SMOKE_LAYERS})")
    args = parser.parse_args(argv)
    started = time.monotonic()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    wheels = sorted(str(p) for p in args.wheels.glob("*.whl")) if args.wheels else []
    env = {k: v for k, v in os.environ.items() if k not in JAX_SETTINGS}  # the user's defaults for JAX
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *wheels, *filter(None, [os.environ.get("PYTHONPATH")])])
    missing_line, have = packages_line(wheels)
    gpus = Gpus()
    day = DayOne(out, gpus, env, started)
    py = [sys.executable]
    doctor = [*py, "-m", "mgpu_doctor"]

    devices = day.run("devices", [*doctor, "devices", "--format", "json"], 60, keep_stdout=True)
    quick = day.run("check --quick", [*doctor, "check", "--quick", "--format", "json"], 60,
                    stdout_to=out / "check-quick.json")
    snap = day.run("snapshot", [*doctor, "snapshot", "-o", str(out / "snapshot.json")], 240)
    # Without a GPU `libs` reads the snapshot back: loading every library again proves nothing here.
    libs_source = [] if gpus.present else ["--from", str(out / "snapshot.json")]
    libs = day.run("libs", [*doctor, "libs", *libs_source, "--format", "json"], 120, keep_stdout=True)
    smoke_ran = gpus.present and have["keras"] and have["jax"]
    if smoke_ran:
        full = day.run("check --backend jax", [*doctor, "check", "--backend", "jax", "--layers", args.layers,
                                               "--format", "json", "--junit", str(out / "check.junit.xml")],
                       300, stdout_to=out / "check.json")
    else:
        full = day.run("check --from snapshot", [*doctor, "check", "--from", str(out / "snapshot.json"),
                                                 "--format", "json", "--junit", str(out / "check.junit.xml")],
                       60, stdout_to=out / "check.json")
    pitfall = None
    if gpus.present and have["jax"]:
        pitfall = day.run("JAX with default settings", [*py, "-c", PITFALL, "3"], 90)
    pytest_cmd = None
    if have["pytest"]:
        junit = f"--junitxml={out / 'pytest-gpu.junit.xml'}"
        pytest_cmd = day.run("pytest -m gpu", [*py, "-m", "pytest", "-m", "gpu", "-q", "-p",
                                               "no:cacheprovider", "tests/test_gpu.py", junit], 180)

    junit_file = out / "pytest-gpu.junit.xml"
    if junit_file.exists():  # pytest writes the host name into it
        junit_file.write_text(re.sub(r'hostname="[^"]*"', 'hostname="redacted"', junit_file.read_text()))
    claims = [
        zero_claim(gpus, devices, "devices"),
        zero_claim(gpus, quick, "check --quick"),
        zero_claim(gpus, libs, "libs"),
    ]
    text = "`snapshot` lists JAX's GPUs without preallocating (a context at most) and leaves nothing behind"
    if not gpus.present:
        claims.append(Claim(UNTESTABLE, text, gpus.why_not))
    else:
        total = min(gpus.total_mib())
        ok = snap.rc == 0 and snap.memory.taken() <= PROBE_MAX_SHARE * total and snap.memory.left() <= 0
        claims.append(Claim(MET if ok else MISSED, text, f"took {snap.memory.taken()} MiB of {total} at "
                            f"most, {snap.memory.left()} MiB left after; exit {snap.rc}"))
    text = (f"JAX's default preallocation takes >= {PITFALL_SHARE:.0%} of a GPU where `check --quick` "
            "takes 0 MiB")
    if pitfall is None:
        claims.append(Claim(UNTESTABLE, text, gpus.why_not or "JAX is not installed"))
    else:
        total = gpus.total_mib()[0]
        taken = pitfall.memory.peak[0] - pitfall.memory.before[0]
        ok = taken >= PITFALL_SHARE * total and quick.memory.taken() == 0
        claims.append(Claim(MET if ok else MISSED, text, f"JAX took {taken} MiB of {total} on GPU 0 "
                            f"({taken / max(total, 1):.0%}); check --quick: {quick.memory.taken()} MiB"))
    text = "JAX sees the GPUs NVML sees"
    if not gpus.present:
        claims.append(Claim(UNTESTABLE, text, gpus.why_not))
    else:
        verdict, detail = jax_against_nvml(out / "snapshot.json")
        claims.append(Claim(verdict, text, detail))
    text = "`check` with the JAX smoke runs and leaves no GPU memory behind"
    if not smoke_ran:
        claims.append(Claim(UNTESTABLE, text, gpus.why_not or "Keras 3 or JAX is not installed"))
    else:
        claims.append(Claim(MET if full.rc in (0, 1) and full.memory.left() <= 0 else MISSED, text,
                            f"exit {full.rc}, {full.seconds} s, {full.memory.left()} MiB left after"))
    text = "the snapshot round-trips through `check --from`"
    if not (out / "snapshot.json").exists():
        claims.append(Claim(MISSED, text, "`snapshot` wrote no file"))
    elif smoke_ran:
        rt = day.run("check --from snapshot", [*doctor, "check", "--from", str(out / "snapshot.json"),
                                               "--format", "json"], 60)
        claims.append(Claim(MET if rt.rc in (0, 1) else MISSED, text, f"exit {rt.rc}"))
    else:
        claims.append(Claim(MET if full.rc in (0, 1) else MISSED, text, f"exit {full.rc}"))
    text = "`pytest -m gpu` passes"
    if pytest_cmd is None:
        claims.append(Claim(UNTESTABLE, text, "pytest is not installed (carry its wheels: --wheels DIR)"))
    else:
        tests, bad, skipped = junit_counts(out / "pytest-gpu.junit.xml")
        verdict = (UNTESTABLE if tests and skipped == tests
                   else MET if tests and pytest_cmd.rc == 0 and not bad else MISSED)
        claims.append(Claim(verdict, text, f"{tests} test(s), {bad} failed, {skipped} skipped; "
                            f"exit {pytest_cmd.rc}"
                            + (f" ({gpus.why_not})" if verdict == UNTESTABLE else "")))
    crashed = [c.name for c in day.commands
               if c.rc not in (0, 1) or "Traceback (most recent call last)" in c.stderr_tail]
    claims.append(Claim(MISSED if crashed else MET, "every command ends without a traceback",
                        ", ".join(crashed) if crashed else f"{len(day.commands)} commands"))

    (out / "commands.json").write_text(json.dumps([asdict(c) for c in day.commands], indent=2) + "\n")
    wall = time.monotonic() - started
    claims.append(Claim(MET if wall <= BUDGET_S else MISSED, "finishes within 8 minutes", f"{wall:.0f} s"))
    files = sorted(p.name for p in out.iterdir())
    claims.append(Claim(MET if len(files) + 1 <= MAX_FILES else MISSED, f"at most {MAX_FILES} files in {out}",
                        f"{len(files) + 1}: {', '.join(files + ['summary.txt'])}"))
    gpu_line = (f"GPUs: {len(gpus.handles)}, memory total {gpus.total_mib()} MiB" if gpus.present
                else f"GPUs: none ({gpus.why_not})")
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    summary = [f"gpu-day-one: {when}, Python {sys.version.split()[0]}",
               gpu_line, missing_line, *(c.line() for c in claims)]
    (out / "summary.txt").write_text("\n".join(summary) + "\n")
    print("\n".join(summary))
    return 1 if any(c.verdict == MISSED for c in claims) else 0


if __name__ == "__main__":
    sys.exit(main())

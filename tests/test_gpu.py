"""What only a real NVIDIA GPU can prove (`pytest -m gpu`; skipped without one).

- enumerating the GPUs (`devices`, `check --quick`) takes 0 MiB on every GPU;
- NVML's GPUs, the doctor's CUDA ordinals and PCI bus ids agree with `nvidia-smi` and with the
  CUDA driver's own numbering (cuDeviceGetPCIBusId in a child: cuInit creates no context);
- the `libs` table's "in use" copy is the file the dynamic loader maps in a child that loads it;
- the devices JAX sees are NVML's GPUs;
- a snapshot taken here round-trips through `check --from`.

benchmarks/gpu_day_one.py runs these with the rest of the GPU claims in one call.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from mgpu_doctor.environment.visibility import cuda_enumeration_order
from mgpu_doctor.model.snapshot import JaxFacts, NvmlFacts, PackageFacts, load_snapshot
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.probes.jax_view import gather_jax
from mgpu_doctor.probes.nvml import gather_nvml
from mgpu_doctor.process.interpreter import Interpreter

ROOT = Path(__file__).resolve().parents[1]
NVML = gather_nvml()
HAS_GPU = isinstance(NVML, NvmlFacts) and bool(NVML.gpus)
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not HAS_GPU, reason=f"no NVIDIA GPU here ({NVML})"
                                                  if isinstance(NVML, Unavailable) else "no NVIDIA GPU here")]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def doctor(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mgpu_doctor", *args], cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def bus_key(text: str) -> tuple[int, int, int, int]:
    """00000000:27:00.0, 0000:27:00.0 -> (0, 0x27, 0, 0)."""
    domain, bus, rest = text.strip().lower().split(":")
    device, function = rest.split(".")
    return int(domain, 16), int(bus, 16), int(device, 16), int(function, 16)


def used_mib() -> list[int]:
    import pynvml

    pynvml.nvmlInit()
    return [pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i)).used // 2**20
            for i in range(pynvml.nvmlDeviceGetCount())]


@pytest.mark.parametrize("command", [("devices", "--format", "json"), ("check", "--quick", "--format", "json")])
def test_enumeration_takes_no_gpu_memory(command):
    before = used_mib()
    peak = list(before)
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[:] = [max(a, b) for a, b in zip(peak, used_mib(), strict=True)]
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        done = doctor(*command)
    finally:
        stop.set()
        sampler.join()
    assert done.returncode in (0, 1), done.stderr
    assert [p - b for p, b in zip(peak, before, strict=True)] == [0] * len(before)


CUDA_ORDINALS = r"""
import ctypes, json
cuda = ctypes.CDLL("libcuda.so.1")
assert cuda.cuInit(0) == 0
count = ctypes.c_int()
assert cuda.cuDeviceGetCount(ctypes.byref(count)) == 0
out = []
for i in range(count.value):
    dev = ctypes.c_int()
    cuda.cuDeviceGet(ctypes.byref(dev), i)
    buf = ctypes.create_string_buffer(32)
    cuda.cuDeviceGetPCIBusId(buf, 32, dev)
    out.append(buf.value.decode())
print(json.dumps(out))
"""


def test_nvml_cuda_ordinals_and_bus_ids_agree_with_nvidia_smi_and_cuda():
    assert isinstance(NVML, NvmlFacts)
    smi = shutil.which("nvidia-smi")
    if smi is None:
        pytest.skip("nvidia-smi is not on PATH")
    lines = subprocess.run([smi, "--query-gpu=index,pci.bus_id,uuid", "--format=csv,noheader"], capture_output=True,
                           text=True, timeout=60, check=True).stdout.strip().splitlines()
    listed = [[cell.strip() for cell in line.split(",")] for line in lines]
    assert [(int(i), bus_key(b), u) for i, b, u in listed] == \
        [(g.index, bus_key(g.pci_bus_id), g.uuid) for g in NVML.gpus]
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")}
    cuda = json.loads(subprocess.run([sys.executable, "-c", CUDA_ORDINALS], capture_output=True, text=True,
                                     timeout=120, check=True, env=env).stdout)
    by_bus = {bus_key(b): ordinal for ordinal, b in enumerate(cuda)}
    order, certain = cuda_enumeration_order(NVML.gpus, None)
    by_index = {g.index: g for g in NVML.gpus}
    predicted = {bus_key(by_index[i].pci_bus_id): ordinal for ordinal, i in enumerate(order)}
    assert set(predicted) == set(by_bus)  # the same GPUs
    if certain:  # mixed models: CUDA's default FASTEST_FIRST order is not predicted
        assert predicted == by_bus


LOAD_AND_MAP = r"""
import ctypes, json, os, sys
name = sys.argv[1]
ctypes.CDLL(name)
with open("/proc/self/maps") as fh:
    paths = sorted({line.split()[-1] for line in fh if name.split(".so")[0] in line and "/" in line})
print(json.dumps([os.path.realpath(p) for p in paths]))
"""
BY_THE_LOADER = ("LD_LIBRARY_PATH", "ldconfig cache", "system directory")


def test_libs_in_use_is_what_the_loader_maps():
    done = doctor("libs", "--format", "json", "--no-redact")
    assert done.returncode in (0, 1), done.stderr
    rows = json.loads(done.stdout)["libraries"]["rows"]
    compared = 0
    for row in rows:
        copy = next((c for c in row["copies"] if c["in_use"]), None)
        if copy is None or copy["found_by"] not in BY_THE_LOADER:
            continue  # found through TensorFlow's RUNPATH or a toolkit: a bare child would not see it
        mapped = json.loads(subprocess.run([sys.executable, "-c", LOAD_AND_MAP, copy["soname"]], capture_output=True,
                                           text=True, timeout=60, check=True).stdout)
        assert os.path.realpath(copy["real_path"]) in mapped, (row["name"], copy, mapped)
        compared += 1
    if not compared:
        pytest.skip("no library in use is found by the dynamic loader alone here")


def test_jax_devices_are_nvmls_gpus():
    facts = gather_jax(Interpreter(sys.executable), PackageFacts({"jax": "?"}, {}, {}))
    if isinstance(facts, Unavailable) and facts.reason == "failed" and "ModuleNotFoundError" in facts.detail:
        pytest.skip("JAX is not installed")
    assert isinstance(facts, JaxFacts), facts
    assert isinstance(NVML, NvmlFacts) and not isinstance(facts.devices, Unavailable)
    gpus = [d for d in facts.devices if d.platform in ("gpu", "cuda")]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    expected = len(NVML.gpus) if visible is None else len([v for v in visible.split(",") if v.strip()])
    assert len(gpus) == expected, (facts.plugins, facts.backend_errors)
    assert sorted(d.local_hardware_id for d in gpus) == list(range(expected))


def test_a_snapshot_taken_here_round_trips_through_check_from(tmp_path):
    path = tmp_path / "snapshot.json"
    done = doctor("snapshot", "-o", str(path))
    assert done.returncode == 0, done.stderr
    snap = load_snapshot(path)
    assert isinstance(snap.nvml, NvmlFacts) and len(snap.nvml.gpus) == len(NVML.gpus)
    again = doctor("check", "--from", str(path), "--format", "json")
    assert again.returncode in (0, 1), again.stderr
    report = json.loads(again.stdout)
    assert report["snapshot"]["nvml"] == json.loads(path.read_text())["nvml"]

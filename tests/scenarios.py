"""Recorded-style snapshots for tests: the real NVML probe over the fake, plus TF/package facts.

`python -m tests.scenarios` rewrites tests/data/*.json; tests/test_scenarios.py checks that the
files still load and match what this module builds.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from mgpu_doctor.facts import absent, failed
from mgpu_doctor.probes.nvml import gather_nvml
from mgpu_doctor.snapshot import (
    KIND,
    SCHEMA_VERSION,
    HostFacts,
    PackageFacts,
    PythonFacts,
    Snapshot,
    TensorFlowFacts,
    TfDevice,
)
from tests.fake_nvml import FakeGpu, FakeMachine, FakeNvml, bus, gpus, uuid

DATA = Path(__file__).parent / "data"

HOST = HostFacts(
    hostname="gpu-node-07", os_name="Linux", os_release="Ubuntu 22.04.4 LTS",
    kernel="5.15.0-105-generic", machine="x86_64", libc="glibc 2.35", cpu_count=64,
    memory_total_bytes=512 * 2**30, container_hints=[],
)
PYTHON = PythonFacts(
    version="3.11.9", executable="/opt/envs/train/bin/python", implementation="CPython",
    prefix="/opt/envs/train", site_packages=["/opt/envs/train/lib/python3.11/site-packages"],
    is_doctor_interpreter=True,
)
SITE = "/opt/envs/train/lib/python3.11/site-packages"
TF_BUILD = {
    "cpu_compiler": "clang", "cuda_compute_capabilities": "['sm_60', 'sm_70', 'sm_80', 'sm_89', 'compute_90']",
    "cuda_version": "12.5.1", "cudnn_version": "9", "is_cuda_build": "True",
    "is_rocm_build": "False", "is_tensorrt_build": "False",
}


def packages(**versions: str) -> PackageFacts:
    base = {"tensorflow": "2.21.0", "keras": "3.15.1", "numpy": "2.1.3", "protobuf": "5.29.4"}
    base.update(versions)
    base = {k: v for k, v in base.items() if v}
    return PackageFacts(versions=base, locations={k: SITE for k in base}, requires={})


def tf_view(n_gpus: int, cc: str = "8.0", name: str = "NVIDIA A100-SXM4-80GB", **kw: Any) -> TensorFlowFacts:
    devices = [TfDevice("/physical_device:CPU:0", "CPU", {})] + [
        TfDevice(f"/physical_device:GPU:{i}", "GPU", {"device_name": name, "compute_capability": f"({cc.replace('.', ', ')})"})
        for i in range(n_gpus)
    ]
    base = dict(
        version="2.21.0", module_path=f"{SITE}/tensorflow", keras_module="keras",
        keras_version="3.15.1", build_info=dict(TF_BUILD), built_with_cuda=True,
        physical_devices=devices, loaded_libraries=[], import_seconds=4.2, warnings=[],
    )
    base.update(kw)
    return TensorFlowFacts(**base)  # type: ignore[arg-type]


def snapshot(nvml: Any, tf: Any, pkgs: Any = None, env: dict[str, str] | None = None) -> Snapshot:
    return Snapshot(
        schema_version=SCHEMA_VERSION, kind=KIND, tool_version="0.1.0",
        created="2026-11-20T10:00:00+00:00", host=HOST, python=PYTHON,
        packages=pkgs if pkgs is not None else packages(), env=env or {}, nvml=nvml, tensorflow=tf,
    )


def nvml_of(machine: FakeMachine) -> Any:
    return gather_nvml(FakeNvml(machine))


def healthy_8gpu_nvlink() -> Snapshot:
    fleet = gpus(8)
    for i, g in enumerate(fleet):  # NVSwitch-style: two links to every other GPU
        g.nvlink_peers = [bus(j) for j in range(8) if j != i for _ in range(2)]
    machine = FakeMachine(gpus=fleet, topology={(a, b): 0 for a in range(8) for b in range(8)})
    return snapshot(nvml_of(machine), tf_view(8))


def gpu_held_by_other_process() -> Snapshot:
    fleet = gpus(4, name="NVIDIA RTX A6000", memory_total=48 * 2**30, cc=(8, 6))
    fleet[2].memory_used = 21 * 2**30
    fleet[2].processes = [(4242, 21 * 2**30 - 300 * 2**20)]
    return snapshot(nvml_of(FakeMachine(gpus=fleet)), tf_view(4, cc="8.6", name="NVIDIA RTX A6000"))


def mixed_models() -> Snapshot:
    fleet = [
        FakeGpu(name="NVIDIA GeForce RTX 2080 Ti", uuid=uuid(0), bus_id=bus(0), memory_total=11 * 2**30,
                cc=(7, 5), ecc=None, ecc_uncorrected=None, mig=None),
        FakeGpu(name="NVIDIA GeForce RTX 3090", uuid=uuid(1), bus_id=bus(1), memory_total=24 * 2**30,
                cc=(8, 6), ecc=None, ecc_uncorrected=None, mig=None),
    ]
    machine = FakeMachine(gpus=fleet, p2p={(0, 1): 5}, topology={(0, 1): 30})
    return snapshot(nvml_of(machine), tf_view(2, cc="8.6", name="NVIDIA GeForce RTX 3090"))


def mig_enabled() -> Snapshot:
    fleet = gpus(2)
    fleet[0].mig = 1
    return snapshot(nvml_of(FakeMachine(gpus=fleet)), tf_view(1))


def driver_without_gpus() -> Snapshot:
    return snapshot(nvml_of(FakeMachine(gpus=[])), tf_view(0))


def cpu_only_tensorflow() -> Snapshot:
    build = dict(TF_BUILD, is_cuda_build="False")
    build.pop("cuda_version")
    build.pop("cudnn_version")
    build.pop("cuda_compute_capabilities")
    tf = tf_view(0, build_info=build, built_with_cuda=False)
    return snapshot(nvml_of(FakeMachine(gpus=gpus(2))), tf, packages(tensorflow="", **{"tensorflow-cpu": "2.21.0"}))


def sick_box() -> Snapshot:
    fleet = gpus(4)
    fleet[0].compute_mode = 3  # exclusive process
    fleet[1].ecc_uncorrected = 3
    fleet[2].throttle_mask = 0x40 | 0x4  # hw thermal slowdown + sw power cap
    fleet[2].temperature = 91
    fleet[3].pcie_width = (8, 16)
    fleet[3].compute_mode = 2  # prohibited
    return snapshot(nvml_of(FakeMachine(gpus=fleet)), tf_view(4))


def no_driver_no_tensorflow() -> Snapshot:
    nvml = nvml_of(FakeMachine(init_error=12))
    tf = absent("no TensorFlow distribution is installed for /usr/bin/python3", cause="not-installed")
    return snapshot(nvml, tf, packages(tensorflow="", keras=""))


def tensorflow_import_fails() -> Snapshot:
    tf = failed("ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory",
                cause="exception:ImportError")
    return snapshot(nvml_of(FakeMachine(gpus=gpus(2))), tf)


SCENARIOS = {
    "healthy-8gpu-nvlink": healthy_8gpu_nvlink,
    "gpu-held-by-other-process": gpu_held_by_other_process,
    "mixed-models": mixed_models,
    "mig-enabled": mig_enabled,
    "driver-without-gpus": driver_without_gpus,
    "cpu-only-tensorflow": cpu_only_tensorflow,
    "sick-box": sick_box,
    "no-driver-no-tensorflow": no_driver_no_tensorflow,
    "tensorflow-import-fails": tensorflow_import_fails,
}


def path_of(name: str) -> Path:
    return DATA / f"{name}.json"


def write_all() -> None:
    DATA.mkdir(exist_ok=True)
    for name, build in SCENARIOS.items():
        path_of(name).write_text(build().to_json())


def with_env(snap: Snapshot, **env: str) -> Snapshot:
    return replace(snap, env={**snap.env, **env})


if __name__ == "__main__":
    write_all()
    print(f"wrote {len(SCENARIOS)} snapshots to {DATA}")

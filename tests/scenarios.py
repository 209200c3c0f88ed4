"""Recorded-style snapshots for tests: the real NVML probe over the fake, plus TF/package facts.

`python -m tests.scenarios` rewrites tests/data/*.json; tests/test_scenarios.py checks that the
files still load and match what this module builds.
"""

from __future__ import annotations

import site
from pathlib import Path
from typing import Any

from mgpu_doctor.model.snapshot import (
    KIND,
    SCHEMA_VERSION,
    HostFacts,
    LibraryCopy,
    LibraryFacts,
    PackageFacts,
    PythonFacts,
    SearchDir,
    Snapshot,
    TensorFlowFacts,
    TfDevice,
)
from mgpu_doctor.model.unavailable import absent, failed
from mgpu_doctor.probes.nvml import gather_nvml
from mgpu_doctor.record import replace
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


# tensorflow[and-cuda] 2.21.0 as its METADATA pins it, and the wheels pip installs for it.
AND_CUDA = {
    "nvidia-cublas-cu12": (">=12.5.3.2,<13.0", "12.5.3.2"),
    "nvidia-cuda-cupti-cu12": (">=12.5.82,<13.0", "12.5.82"),
    "nvidia-cuda-nvcc-cu12": (">=12.5.82,<13.0", "12.5.82"),
    "nvidia-cuda-nvrtc-cu12": (">=12.5.82,<13.0", "12.5.82"),
    "nvidia-cuda-runtime-cu12": (">=12.5.82,<13.0", "12.5.82"),
    "nvidia-cudnn-cu12": (">=9.3.0.75,<10.0", "9.3.0.75"),
    "nvidia-cufft-cu12": (">=11.2.3.61,<12.0", "11.2.3.61"),
    "nvidia-curand-cu12": (">=10.3.6.82,<11.0", "10.3.6.82"),
    "nvidia-cusolver-cu12": (">=11.6.3.83,<12.0", "11.6.3.83"),
    "nvidia-cusparse-cu12": (">=12.5.1.3,<13.0", "12.5.1.3"),
    "nvidia-nccl-cu12": (">=2.27.7,<3.0", "2.27.7"),
    "nvidia-nvjitlink-cu12": (">=12.5.82,<13.0", "12.5.82"),
}
# tensorflow 2.21.0's Requires-Dist: the packages it imports (matrices/compat/tensorflow-requires.toml)
# and the [and-cuda] extra.
TF_REQUIRES = ["protobuf<8.0.0,>=6.31.1", "numpy>=1.26.0", "h5py<3.15.0,>=3.11.0", "ml_dtypes<1.0.0,>=0.5.1",
               *(f'{name}{spec}; extra == "and-cuda"' for name, (spec, _) in AND_CUDA.items())]
# (library, wheel, soname, ctypes version) of a `pip install tensorflow[and-cuda]==2.21.0`.
WHEEL_LIBS = (
    ("cudart", "nvidia-cuda-runtime-cu12", "libcudart.so.12", "12.5"),
    ("cublas", "nvidia-cublas-cu12", "libcublas.so.12", "12.5.3"),
    ("cublasLt", "nvidia-cublas-cu12", "libcublasLt.so.12", "12.5.3"),
    ("cufft", "nvidia-cufft-cu12", "libcufft.so.11", "11.2.3"),
    ("curand", "nvidia-curand-cu12", "libcurand.so.10", "10.3.6"),
    ("cusolver", "nvidia-cusolver-cu12", "libcusolver.so.11", "11.6.3"),
    ("cusparse", "nvidia-cusparse-cu12", "libcusparse.so.12", "12.5.1"),
    ("cudnn", "nvidia-cudnn-cu12", "libcudnn.so.9", "9.3.0"),
    ("nccl", "nvidia-nccl-cu12", "libnccl.so.2", "2.27.7"),
    ("nvrtc", "nvidia-cuda-nvrtc-cu12", "libnvrtc.so.12", "12.5"),
    ("nvJitLink", "nvidia-nvjitlink-cu12", "libnvJitLink.so.12", "12.5"),
)
WHEEL_DIRS = {"nvidia-cuda-runtime-cu12": "cuda_runtime", "nvidia-cublas-cu12": "cublas",
              "nvidia-cufft-cu12": "cufft", "nvidia-curand-cu12": "curand", "nvidia-cusolver-cu12": "cusolver",
              "nvidia-cusparse-cu12": "cusparse", "nvidia-cudnn-cu12": "cudnn", "nvidia-nccl-cu12": "nccl",
              "nvidia-cuda-nvrtc-cu12": "cuda_nvrtc", "nvidia-nvjitlink-cu12": "nvjitlink"}
DRIVER = "560.35.03"


def wheel_copy(name: str, wheel: str, soname: str, loaded: str, wheel_version: str = "") -> LibraryCopy:
    directory = f"{SITE}/nvidia/{WHEEL_DIRS[wheel]}/lib"
    version = wheel_version or AND_CUDA[wheel][1]
    return LibraryCopy(
        name=name, soname=soname, path=f"{directory}/{soname}", real_path=f"{directory}/{soname}",
        found_by="pip wheel (TensorFlow's RUNPATH)", on_search_path=True,
        versions={"soname": soname.rsplit(".so.", 1)[1], "wheel": version, "ctypes": loaded}, wheel=wheel,
    )


def libcuda_copy(driver: str = DRIVER) -> LibraryCopy:
    real = f"/usr/lib/x86_64-linux-gnu/libcuda.so.{driver}"
    return LibraryCopy(
        name="cuda", soname="libcuda.so.1", path="/usr/lib/x86_64-linux-gnu/libcuda.so.1", real_path=real,
        found_by="ldconfig cache", on_search_path=True,
        versions={"soname": "1", "filename": driver, "ctypes": "12.6"},
    )


def ptxas_copy(version: str = "12.5.82") -> LibraryCopy:
    path = f"{SITE}/nvidia/cuda_nvcc/bin/ptxas"
    return LibraryCopy(name="ptxas", soname="ptxas", path=path, real_path=path, found_by="pip wheel",
                       on_search_path=False, versions={"--version": version})


def pip_cuda_libraries(driver: str = DRIVER) -> LibraryFacts:
    """What the library probe records for tensorflow[and-cuda] 2.21 from pip on a driver-only host."""
    copies = [libcuda_copy(driver)] + [wheel_copy(*row) for row in WHEEL_LIBS] + [ptxas_copy()]
    dirs = sorted({c.path.rsplit("/", 1)[0] for c in copies if c.found_by.startswith("pip wheel (")})
    return LibraryFacts(
        copies=copies,
        search_dirs=[SearchDir(d, "pip wheel (TensorFlow's RUNPATH)", True, True) for d in dirs]
        + [SearchDir("/usr/lib/x86_64-linux-gnu", "ldconfig cache", True, True)],
        toolkits=[], versions_loaded=True, probe_seconds=0.31,
    )


def no_cuda_libraries() -> LibraryFacts:
    return LibraryFacts(copies=[], search_dirs=[SearchDir("/usr/lib/x86_64-linux-gnu", "system directory",
                                                          True, True)],
                        toolkits=[],
                        versions_loaded=True, probe_seconds=0.01)


def packages(**versions: str) -> PackageFacts:
    base = {"tensorflow": "2.21.0", "keras": "3.15.1", "numpy": "2.1.3", "protobuf": "6.31.1"}
    base.update({name: version for name, (_, version) in AND_CUDA.items()})
    base.update(versions)
    base = {k: v for k, v in base.items() if v}
    return PackageFacts(versions=base, locations={k: SITE for k in base},
                        requires={"tensorflow": list(TF_REQUIRES)} if "tensorflow" in base else {})


def tf_view(n_gpus: int, cc: str = "8.0", name: str = "NVIDIA A100-SXM4-80GB", **kw: Any) -> TensorFlowFacts:
    devices = [TfDevice("/physical_device:CPU:0", "CPU", {})] + [
        TfDevice(f"/physical_device:GPU:{i}", "GPU", {"device_name": name, "compute_capability": f"({cc.replace('.', ', ')})"})
        for i in range(n_gpus)
    ]
    base = dict(
        version="2.21.0", module_path=f"{SITE}/tensorflow", keras_module="keras",
        keras_version="3.15.1", build_info=dict(TF_BUILD), built_with_cuda=True,
        physical_devices=devices, loaded_libraries=[c.real_path for c in pip_cuda_libraries().copies
                                                     if c.name not in ("ptxas", "nvrtc", "nvJitLink")],
        import_seconds=4.2, warnings=[],
    )
    base.update(kw)
    return TensorFlowFacts(**base)  # type: ignore[arg-type]


def snapshot(nvml: Any, tf: Any, pkgs: Any = None, env: dict[str, str] | None = None,
             libraries: Any = None) -> Snapshot:
    return Snapshot(
        schema_version=SCHEMA_VERSION, kind=KIND, tool_version="0.1.0",
        created="2026-11-20T10:00:00+00:00", host=HOST, python=PYTHON,
        packages=pkgs if pkgs is not None else packages(), env=env or {}, nvml=nvml, tensorflow=tf,
        libraries=libraries if libraries is not None else pip_cuda_libraries(),
        jax=absent(f"JAX is not installed for {PYTHON.executable}", cause="not-installed"),
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
    tf = tf_view(0, build_info=build, built_with_cuda=False, loaded_libraries=[])
    no_wheels = {name: "" for name in AND_CUDA}
    return snapshot(nvml_of(FakeMachine(gpus=gpus(2))), tf,
                    packages(tensorflow="", **{"tensorflow-cpu": "2.21.0"}, **no_wheels),
                    libraries=no_cuda_libraries())


def sick_box() -> Snapshot:
    fleet = gpus(4)
    fleet[0].compute_mode = 3  # exclusive process
    fleet[1].ecc_uncorrected = 3
    fleet[2].throttle_mask = 0x40 | 0x4  # hw thermal slowdown + sw power cap
    fleet[2].temperature = 91
    fleet[3].pcie_width = (8, 16)
    fleet[3].compute_mode = 2  # prohibited
    return replace(snapshot(nvml_of(FakeMachine(gpus=fleet)), tf_view(4)), collective=server_setup(4))


def server_setup(n: int) -> Any:
    """The host set-up facts (PCIe, IOMMU, /dev/shm, CPUs, network, container) of a two-socket
    server with ``n`` GPUs at the bus ids of ``gpus(n)``, read by the real probes from a fake /."""
    import tempfile

    from tests import fake_host

    with tempfile.TemporaryDirectory(prefix="mgpu-scenario-") as tmp:
        fake = fake_host.FakeRoot(Path(tmp), lspci=None)
        fake_host._host_basics(fake, "BOOT_IMAGE=/boot/vmlinuz-5.15.0-105-generic root=/dev/sda1 ro quiet")
        nodes = {"0": "0-31", "1": "32-63"}
        fake.numa(nodes, allowed="0-63", online="0-63")
        for i in range(n):
            node = 2 * i // n
            port = f"0000:00:{i + 1:02x}.0"  # a root port each, ACS off
            fake.pci("pci0000:00", [port], numa_node=node, config=fake_host.config_space(0))
            fake.gpu("pci0000:00", [port, bus(i)[4:].lower()], numa_node=node, local_cpulist=nodes[str(node)])
            fake.write(f"proc/driver/nvidia/gpus/{bus(i)[4:].lower()}/information", "Model: NVIDIA A100\n")
            fake.write(f"dev/nvidia{i}", "")
        return replace(fake.gather(), probe_seconds=0.01)


def no_driver_no_tensorflow() -> Snapshot:
    nvml = nvml_of(FakeMachine(init_error=12))
    tf = absent("no TensorFlow distribution is installed for /usr/bin/python3", cause="not-installed")
    no_wheels = {name: "" for name in AND_CUDA}
    return snapshot(nvml, tf, packages(tensorflow="", keras="", **no_wheels), libraries=no_cuda_libraries())


def tensorflow_import_fails() -> Snapshot:
    tf = failed("ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory",
                cause="exception:ImportError")
    libs = pip_cuda_libraries()
    libs = replace(libs, copies=[c for c in libs.copies if c.name != "cudnn"])
    return snapshot(nvml_of(FakeMachine(gpus=gpus(2))), tf, libraries=libs)


def half_upgraded() -> Snapshot:
    """pip's metadata says TensorFlow 2.15.1 / Keras 2.15.0, but a newer copy in ~/.local is what
    imports: TensorFlow 2.21.0 with Keras 3.15.1 (a half-finished upgrade, or a shadowing copy)."""
    local = "/home/u/.local/lib/python3.11/site-packages"
    tf = tf_view(8, module_path=f"{local}/tensorflow")
    return snapshot(healthy_8gpu_nvlink().nvml, tf, packages(tensorflow="2.15.1", keras="2.15.0"))


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
    "half-upgraded": half_upgraded,
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

def real_cudart() -> Path | None:
    """The real libcudart.so.12 of the nvidia-cuda-runtime-cu12 wheel (test extra), if installed."""
    for base in site.getsitepackages():
        lib = Path(base) / "nvidia/cuda_runtime/lib/libcudart.so.12"
        if lib.exists():
            return lib
    return None

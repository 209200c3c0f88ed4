"""Command lines and the short outputs people paste next to them: ``nvcc --version`` (the CUDA
toolkit on PATH), the driver's own version lines (``cat /proc/driver/nvidia/version``, ``dkms status``),
container images (``docker run tensorflow/tensorflow:2.18.0-gpu-jupyter``,
``FROM nvcr.io/nvidia/tensorflow:23.03-tf2-py3``) and Horovod/MPI launches (``horovodrun -np 4``,
``mpirun -np 16 -H a:4,b:4``). Every pattern is bounded; each line is searched to ``MAX_SCANNED``."""

from __future__ import annotations

import re

from mgpu_doctor.model.pasted import PastedImage, PastedLaunch
from mgpu_doctor.pasted.text import MAX_SCANNED, RANK_PACKAGES, RANK_TOOL, Found, whole

# --- nvcc --version ----------------------------------------------------------------------------

_NVCC_HEAD = re.compile(r"nvcc: NVIDIA \(R\) Cuda compiler driver")
_NVCC_RELEASE = re.compile(r"Cuda compilation tools,\s{0,3}release\s{0,3}(?P<release>\d{1,3}\.\d{1,3}),?"
                           r"(?:\s{0,3}V(?P<full>\d{1,3}(?:\.\d{1,6}){1,3}))?")


def find_nvcc(lines: list[str]) -> list[Found]:
    """``nvcc --version``: the toolkit nvcc belongs to (``cuda_toolkit``). It names the CUDA version
    only where nothing else does: the nvcc on PATH is often not the runtime TensorFlow loads."""
    found: list[Found] = []
    for i, line in enumerate(lines):
        if "Cuda compilation tools" not in line[:MAX_SCANNED]:
            continue
        match = _NVCC_RELEASE.search(line[:MAX_SCANNED])
        if match is None:
            continue
        first = i
        for j in range(i - 1, max(-1, i - 4), -1):  # its header and "Copyright"/"Built on" lines
            head = lines[j][:MAX_SCANNED]
            if _NVCC_HEAD.search(head) or head.lstrip().startswith(("Copyright", "Built on")):
                first = j
        last = i + 1 if i + 1 < len(lines) and lines[i + 1].lstrip().startswith("Build cuda_") else i
        version = match.group("full") or match.group("release")
        out = Found("nvcc --version", first, last, RANK_TOOL)
        out.versions["cuda_toolkit"] = version
        out.version_lines["cuda_toolkit"] = i
        out.facts.append(f"CUDA toolkit (nvcc): {version}")
        found.append(out)
    return found


# --- the driver's own lines ---------------------------------------------------------------------

_DRIVER_LINES = (
    # /proc/driver/nvidia/version: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  396.26  Mon Apr 30 ..."
    ("/proc/driver/nvidia/version", re.compile(
        r"NVRM version:\s{0,3}NVIDIA UNIX[\w ]{0,40}?Kernel Module\s{1,5}(?P<v>\d{3}(?:\.\d{1,3}){1,2})\b")),
    # dkms status: "nvidia-current, 470.199.02, 5.10.0-26-amd64, x86_64: installed"
    ("dkms status", re.compile(
        r"^\W{0,3}nvidia(?:-current|-\d{3})?(?:/|,\s{0,3})(?P<v>\d{3}(?:\.\d{1,3}){1,2}),\s{0,3}\S{1,80},"
        r"\s{0,3}\w{1,20}:\s{0,3}installed")),
)


def find_driver_lines(lines: list[str]) -> list[Found]:
    """The version of the loaded NVIDIA driver as the driver itself reports it."""
    found: list[Found] = []
    for i, line in enumerate(lines):
        text = line[:MAX_SCANNED]
        for kind, pattern in _DRIVER_LINES:
            match = pattern.search(text)
            if match:
                out = Found(kind, i, i, RANK_TOOL)
                out.versions["driver"] = match.group("v")
                out.version_lines["driver"] = i
                out.facts.append(f"driver: {match.group('v')}")
                found.append(out)
                break
    return found


# --- container images --------------------------------------------------------------------------

_TF_IMAGE = re.compile(r"(?<![\w.-])(?:docker\.io/)?tensorflow/tensorflow:(?P<tag>[\w][\w.-]{0,127})")
_NGC_IMAGE = re.compile(r"(?<![\w.-])nvcr\.io/nvidia/(?P<name>[\w.-]{1,64}):(?P<tag>[\w][\w.-]{0,127})")
_TAG_VERSION = re.compile(r"(?P<v>\d{1,2}\.\d{1,3}(?:\.\d{1,3})?(?:rc\d{1,2})?)(?![\w.]{0,3}\d)")
# Horovod's images (horovod/horovod, horovod/horovod-ray ...) are tagged with what they hold, a tag people
# also quote alone: "0.16.4-tf1.14.0-torch1.1.0-mxnet1.4.1-py3.6" is Horovod 0.16.4, TensorFlow 1.14.0,
# Python 3.6.
_HOROVOD_TAG = re.compile(
    r"(?<![\w.-])(?P<image>horovod/horovod[\w-]{0,20}:)?(?P<horovod>\d{1,2}\.\d{1,3}\.\d{1,3})"
    r"-tf(?P<tensorflow>\d{1,2}\.\d{1,3}\.\d{1,3}(?:rc\d{1,2})?)(?:-(?:torch|pytorch|mxnet)[\w.]{1,20}){0,3}"
    r"-py(?P<python>\d\.\d{1,2})(?![\w.])")


def find_images(lines: list[str]) -> list[Found]:
    """The images named: a tensorflow/tensorflow tag names its TensorFlow release ("2.18.0-gpu-jupyter"
    -> 2.18.0; "latest-gpu" names none); an NGC tag is NVIDIA's release ("23.03-tf2-py3"), whose
    TensorFlow is in NVIDIA's release notes, not in the tag: recorded as the image only; a Horovod tag
    names Horovod's, TensorFlow's and Python's versions."""
    out = Found("Container image", 0, 0, RANK_PACKAGES)
    for i, line in enumerate(lines):
        text = line[:MAX_SCANNED]
        if "-tf" in text and "-py" in text:
            _horovod_images(out, i, text)
        if "tensorflow/tensorflow:" not in text and "nvcr.io/nvidia/" not in text:
            continue
        for match in _TF_IMAGE.finditer(text):
            tag = match.group("tag").rstrip(".-")
            version = _TAG_VERSION.match(tag)
            tensorflow = version.group("v") if version else ""
            out.images.append(PastedImage(i + 1, f"tensorflow/tensorflow:{tag}", "tensorflow", tensorflow))
            if tensorflow and "tensorflow" not in out.versions:
                out.versions["tensorflow"] = tensorflow
                out.version_lines["tensorflow"] = i
            out.facts.append(f"image tensorflow/tensorflow:{tag} (line {i + 1})"
                             + (f": TensorFlow {tensorflow}" if tensorflow else ": the tag names no release"))
            out.used.append(i)
        for match in _NGC_IMAGE.finditer(text):
            image = f"nvcr.io/nvidia/{match.group('name')}:{match.group('tag').rstrip('.-')}"
            out.images.append(PastedImage(i + 1, image, "ngc"))
            out.facts.append(f"NGC image {image} (line {i + 1}): NVIDIA's release {match.group('tag')}; "
                             "the TensorFlow it holds is in NVIDIA's release notes, not in the tag")
            out.used.append(i)
    if not out.used:
        return []
    out.used = sorted(set(out.used))
    out.first, out.last = out.used[0], out.used[-1]
    return [out]


def _horovod_images(out: Found, i: int, text: str) -> None:
    for match in _HOROVOD_TAG.finditer(text):
        tag = match.group(0).split(":", 1)[-1]
        image = match.group(0) if match.group("image") else f"horovod/horovod:{tag}"
        out.images.append(PastedImage(i + 1, image, "horovod", match.group("tensorflow")))
        for key in ("horovod", "tensorflow", "python"):
            if key not in out.versions:
                out.versions[key] = match.group(key)
                out.version_lines[key] = i
        out.facts.append(f"Horovod image tag {tag} (line {i + 1}): Horovod {match.group('horovod')}, "
                         f"TensorFlow {match.group('tensorflow')}, Python {match.group('python')}")
        out.used.append(i)


# --- horovodrun / mpirun -----------------------------------------------------------------------

_LAUNCH = re.compile(r"(?<![\w.-])(?P<tool>horovodrun|mpirun|mpiexec)(?![\w.-])(?P<args>.{0,600})")
_PROCESSES = re.compile(r"(?<!\S)(?:-np|-n|--num-proc|--np|-c)[\s=]{1,3}(?P<n>\d{1,6})(?!\S)")
_HOSTS = re.compile(r"(?<!\S)(?:-H|--host|--hosts|-host)[\s=]{1,3}(?P<hosts>[\w.,:\[\]-]{1,300})")


def find_launches(lines: list[str]) -> list[Found]:
    """A Horovod/MPI training: each launch line, with its process count and hosts."""
    out = Found("Horovod/MPI launch", 0, 0, RANK_TOOL)
    for i, line in enumerate(lines):
        text = line[:MAX_SCANNED]
        if "horovodrun" not in text and "mpirun" not in text and "mpiexec" not in text:
            continue
        match = _LAUNCH.search(text)
        if match is None:
            continue
        args = match.group("args")
        if not _PROCESSES.search(args) and not _HOSTS.search(args) and "python" not in args:
            continue  # "mpirun" named in a sentence, not a command line
        processes = _PROCESSES.search(args)
        hosts = _HOSTS.search(args)
        count = whole(processes.group("n")) if processes else 0
        host_list = [h for h in hosts.group("hosts").split(",") if h] if hosts else []
        shown = text.strip() if len(text.strip()) <= 300 else text.strip()[:299] + "…"
        out.launches.append(PastedLaunch(i + 1, match.group("tool"), count, host_list, shown))
        out.facts.append(f"line {i + 1}: {match.group('tool')}, "
                         + (f"{count} processes" if count else "process count not given")
                         + (f" on {', '.join(host_list)}" if host_list else ""))
        out.used.append(i)
    if not out.used:
        return []
    out.first, out.last = out.used[0], out.used[-1]
    return [out]

"""The environment reports users run for bug threads: TensorFlow's ``tf_env_collect.sh`` and
PyTorch's ``collect_env`` (whose lines name the driver, CUDA, cuDNN and Python)."""

from __future__ import annotations

import re

from mgpu_doctor.pasted.text import RANK_TOOL, Found, cudnn_from_number, first_version, stated

# --- PyTorch's collect_env -------------------------------------------------------------------

_COLLECT = {
    "PyTorch version": "torch", "CUDA used to build PyTorch": "torch-cuda", "OS": "os",
    "Python version": "python", "Is CUDA available": "cuda-available", "CUDA runtime version": "cuda",
    "Nvidia driver version": "driver", "cuDNN version": "cudnn", "GPU models and configuration": "gpu",
    "Libc version": "libc", "GCC version": "gcc",
    # Projects' own copies of the script add their framework's line (DocTR's "TensorFlow version: 2.4.1").
    "TensorFlow version": "tensorflow",
}
_COLLECT_LINE = re.compile(r"^\s*(?P<key>[A-Za-z][A-Za-z ]+?):\s*(?P<value>.*)$")
_CUDNN_FILE = re.compile(r"libcudnn(?:_\w+)?\.so\.(\d+\.\d+\.\d+)")
_GPU_LINE = re.compile(r"^\s*GPU (?P<i>\d+):\s*(?P<name>.+?)\s*$")


def find_collect_env(lines: list[str]) -> list[Found]:
    found: list[Found] = []
    for i, line in enumerate(lines):
        if not line.strip().startswith(("PyTorch version:", "Collecting environment")):
            continue
        if found and i <= found[-1].last:
            continue
        out = Found("PyTorch collect_env", i, i, RANK_TOOL)
        j = i + 1 if line.strip().startswith("Collecting") else i
        gap = 0
        key = ""
        probable: list[str] = []
        while j < len(lines) and gap < 3:
            text = lines[j]
            if not text.strip():
                gap += 1
                j += 1
                continue
            gap = 0
            m = _COLLECT_LINE.match(text)
            gpu = _GPU_LINE.match(text)
            if gpu and key in ("gpu", "cudnn"):
                out.facts.append(f"GPU {gpu.group('i')}: {gpu.group('name')}")
            elif (cudnn := _CUDNN_FILE.search(text)) and key == "cudnn":
                probable.append(cudnn.group(1))
            elif m and m.group("key").strip() in _COLLECT:
                key = _COLLECT[m.group("key").strip()]
                value = m.group("value").strip()
                if key in ("python", "cuda", "driver", "cudnn", "tensorflow") and stated(value):
                    version = first_version(value)
                    if version and not (key == "cudnn" and value.startswith("Probably")):
                        out.versions[key] = cudnn_from_number(version) if key == "cudnn" else version
                if stated(value) and key not in ("gpu",):
                    out.facts.append(f"{key}: {value}")
                if key == "os":
                    out.os_release = value
            elif m or text.lstrip().startswith("["):
                key = ""
            else:
                if not text.startswith("/"):
                    key = ""
            out.last = j
            j += 1
        if probable and "cudnn" not in out.versions:
            majors = {".".join(v.split(".")[:2]) for v in probable}
            if len(majors) == 1:  # several files of one cuDNN: its version
                out.versions["cudnn"] = probable[0]
            else:
                out.facts.append(f"cudnn: one of {', '.join(sorted(majors))} (collect_env cannot tell)")
        found.append(out)
    return found


# --- tf_env_collect.sh -----------------------------------------------------------------------

_SECTION = re.compile(r"^\s*==\s*(?P<name>[^=]+?)\s*=+\s*$")
_TF_VERSION = re.compile(r"^\s*tf\.(?:version\.VERSION|VERSION)\s*=\s*(?P<v>\S+)")
_PY_TUPLE = re.compile(r"^\s*\((?P<a>\d+),\s*(?P<b>\d+),\s*(?P<c>\d+),\s*'(?:final|candidate|beta|alpha)'")
_PY_LINE = re.compile(r"^\s*python version:\s*(?P<v>\d+\.\d+(?:\.\d+)?)", re.IGNORECASE)
_CUDA_LIB = re.compile(r"/(?:usr/local/)?cuda-?(?P<cuda>\d+\.\d+)?/\S*lib(?P<lib>cudart|cudnn)\S*"
                       r"\.so\.(?P<v>\d+\.\d+(?:\.\d+)*)")
_PRETTY = re.compile(r'^\s*(?:PRETTY_NAME|DISTRIB_DESCRIPTION)="?(?P<v>[^"]+)"?')


def find_tf_env(lines: list[str]) -> list[Found]:
    sections = [i for i, line in enumerate(lines) if _SECTION.match(line)]
    names = {i: _SECTION.match(lines[i]).group("name").lower() for i in sections}  # type: ignore[union-attr]
    known = ("check python", "check os platform", "are we in docker", "compiler", "check pips",
             "check for virtualenv", "tensorflow import", "env", "nvidia-smi", "cuda libs",
             "tensorflow installed from info", "python version", "bazel version", "uname -a", "check pips ")
    hits = [i for i in sections if names[i].startswith(known)]
    if len(hits) < 2:
        return []
    out = Found("tf_env_collect.sh", hits[0], hits[0], RANK_TOOL)
    section = ""
    for i in range(hits[0], len(lines)):
        line = lines[i]
        if i in names:
            section = names[i]
            out.last = i
            continue
        if not section:
            continue
        if i - out.last > 40 and not line.strip():
            break
        if m := _TF_VERSION.match(line):
            out.versions["tensorflow"] = first_version(m.group("v"))
            out.facts.append(f"tensorflow: {m.group('v')}")
            out.tensorflow_ran = True
        elif section.startswith(("python version", "check python")) and (m := _PY_TUPLE.match(line)):
            out.versions["python"] = f"{m.group('a')}.{m.group('b')}.{m.group('c')}"
            out.facts.append(f"python: {out.versions['python']}")
        elif (m := _PY_LINE.match(line)) and "python" not in out.versions:
            out.versions["python"] = m.group("v")
            out.facts.append(f"python: {m.group('v')}")
        elif section.startswith("cuda libs") and (m := _CUDA_LIB.search(line)):
            key = "cuda" if m.group("lib") == "cudart" else "cudnn"
            full = key == "cudnn" or len(m.group("v").split(".")) > 2
            version = m.group("v") if full else m.group("cuda") or ""
            if version and key not in out.versions:
                out.versions[key] = version
                out.facts.append(f"{key}: {version} ({line.strip()})")
        elif section.startswith("check os") and (m := _PRETTY.match(line)):
            out.os_release = m.group("v")
        if line.strip():
            out.last = i
    return [out]
